"""Planted bugs of `kv_quant` (each must make a kv_quant test fail).

Reference mutants patch reference/kv_quant.py (so they reach the reference submission and, through
the re-exports, optimized/kv_quant.py); the kernel mutants patch the quantised path of the split-KV
kernel in optimized/paged_attention.py, which optimized/kv_quant.py launches."""
from conformance.declarations import Patch

KERNEL = "optimized/paged_attention.py"

MUTANTS = [
    Patch("round_half_away",
          "INT8 rounds half away from zero (floor(|y| + 0.5), the C habit) instead of half to even.",
          "torch.round(y).to(dtype)", "(torch.sign(y) * torch.floor(y.abs() + 0.5)).to(dtype)"),
    Patch("scale_from_max",
          "The scale comes from the row's max instead of its absmax: a row whose largest magnitude is "
          "negative gets too small a scale, and its codes saturate.",
          "    absmax = x32.abs().amax(dim=-1)\n", "    absmax = x32.amax(dim=-1).clamp(min=0)\n"),
    Patch("no_scale_floor",
          "No floor on the scale: a zero row (absmax 0) divides 0 by 0, its codes are NaN (E4M3) or "
          "garbage (INT8).",
          "    scale = torch.clamp(absmax / QMAX[dtype], min=SCALE_MIN)\n",
          "    scale = absmax / QMAX[dtype]\n"),
    Patch("per_tensor_scale",
          "One scale for the whole tensor (a per-tensor FP8 scale, as for weights) broadcast to every "
          "token-head: an outlier token coarsens every other token's step, and a new token rewrites "
          "the codes of all the others.",
          "    absmax = x32.abs().amax(dim=-1)\n",
          "    absmax = x32.abs().amax().expand(x32.shape[:-1])\n"),
    Patch("int8_qmax_128",
          "INT8 uses QMAX 128 (the int8 range's magnitude) instead of 127: the row's absmax maps to "
          "code 128, which wraps to -128.",
          "QMAX = {torch.float8_e4m3fn: 448.0, torch.int8: 127.0}",
          "QMAX = {torch.float8_e4m3fn: 448.0, torch.int8: 128.0}"),
    Patch("scale_bytes_half",
          "The KV-bytes formula counts the scales as 2 bytes (a float16 scale) though they are float32.",
          "    return codes + kv_cache_bytes(head_dim=1, dtype=SCALE_DTYPE, **shape)\n",
          "    return codes + kv_cache_bytes(head_dim=1, dtype=torch.float16, **shape)\n"),
    Patch("kernel_swaps_scales",
          "The kernel loads the key scales from the value-scale pool (k_sc from VS): right only where "
          "K and V of a token happen to share a scale.",
          "                k_sc = tl.load(KS + off_kvh.to(tl.int64) * sks_h + block * sks_blk + slot * sks_slot,\n",
          "                k_sc = tl.load(VS + off_kvh.to(tl.int64) * svs_h + block * svs_blk + slot * svs_slot,\n",
          file=KERNEL),
    Patch("kernel_scale_of_head_0",
          "The kernel reads every KV head's scales from head 0's (the head offset of the scale pool "
          "forgotten): right for MQA (one KV head) only.",
          "                v_sc = tl.load(VS + off_kvh.to(tl.int64) * svs_h + block * svs_blk + slot * svs_slot,\n",
          "                v_sc = tl.load(VS + block * svs_blk + slot * svs_slot,\n",
          file=KERNEL),
    Patch("kernel_v_unscaled",
          "The kernel forgets the value scales (p times the raw codes): the output is off by each "
          "token's scale.",
          "                acc = acc * alpha[:, None] + v_max * tl.dot((p * (v_sc / v_max)[None, :]).to(tl.float16), v)\n",
          "                acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)\n", file=KERNEL),
    Patch("kernel_tile_scale_dropped",
          "The kernel divides the value scales by the tile's largest (to keep the float16 weights in "
          "[0, 1]) and forgets to multiply it back: each tile's share of the output shrinks by its "
          "own largest scale, exact only where that is 1.",
          "                acc = acc * alpha[:, None] + v_max * tl.dot((p * (v_sc / v_max)[None, :]).to(tl.float16), v)\n",
          "                acc = acc * alpha[:, None] + tl.dot((p * (v_sc / v_max)[None, :]).to(tl.float16), v)\n",
          file=KERNEL),
    Patch("kernel_zero_scale_unguarded",
          "The kernel divides the V scales by the tile's largest without guarding 0: a tile whose "
          "scales are all 0 (legal: its values are 0) gives 0/0 = NaN weights.",
          "                v_max = tl.where(v_max > 0.0, v_max, 1.0)   # scales all 0 (legal: values 0)\n",
          "", file=KERNEL),
    Patch("kernel_q_cast_unscaled",
          "The kernel casts q straight to float16 for its float16 dots (no power-of-two scaling): a "
          "bfloat16 q beyond float16's range (|q| > 65504) becomes inf, its scores NaN.",
          "            q_down = ((e - 14) << 23).to(tl.float32, bitcast=True)     # 2^(e - 141)\n"
          "            q = (q32 * q_up[:, None]).to(tl.float16)\n",
          "            q_down = tl.full([BLOCK_M], 1.0, tl.float32)\n"
          "            q = q32.to(tl.float16)\n", file=KERNEL),
    Patch("kernel_scores_not_scaled_back",
          "The kernel scales each row of q by a power of two into float16's range and forgets to "
          "scale the scores back: softmax sees the logits times 2^(141 - e), right only for rows whose "
          "largest |q| has biased exponent 141 (|q| in [16384, 32768)).",
          "                qk = qk * q_down[:, None] * k_sc[None, :]\n",
          "                qk = qk * k_sc[None, :]\n", file=KERNEL),
]
