"""Planted bugs of `flash_attention` (each must make a flash_attention test fail): one-line
patches of the real Triton kernels in optimized/flash_attention.py, run through the same kernel
code (under the interpreter on CPU)."""
from conformance.declarations import Patch


MUTANTS = [
    Patch("causal_off_by_one",
          "Causal mask off by one: key j is visible only if j < pos instead of j <= pos, so every "
          "query loses its own position (and a query whose only key is its own sees nothing).",
          "(cols <= pos + right)", "(cols < pos + right)", module="optimized"),
    Patch("gqa_wrong_kv_head",
          "GQA head mapping by modulo: query head h reads KV head h % kv_heads instead of h // group. "
          "Right for MHA and MQA, wrong for every real GQA model (in the forward and the dQ kernel; "
          "the dK/dV kernel still gathers by group).",
          "return off_h // group", "return off_h % (tl.num_programs(1) // group)", module="optimized"),
    Patch("lse_base2",
          "The log-sum-exp is returned in base 2 (the kernel's exp2 domain) without the ln 2 "
          "conversion: outputs are right, lse is wrong by a factor 1/ln 2, and so is the backward, "
          "which rebuilds the probabilities from the stored lse.",
          "(m_i + tl.math.log2(l_safe)) * 0.6931471805599453", "(m_i + tl.math.log2(l_safe))", module="optimized"),
    Patch("no_rescale",
          "Online softmax without the accumulator rescale: when a new key tile raises the running "
          "row max, the output accumulated so far is not multiplied by exp2(m_old - m_new) (the "
          "denominator still is). Right whenever the first tile holds each row's maximum.",
          "acc = acc * alpha[:, None]", "acc = acc  # BUG: not rescaled to the new max", module="optimized"),
    Patch("unmasked_tail",
          "The last, partial key tile is treated as an interior tile: the key range split rounds the "
          "end of the unmasked stretch up instead of down, so the zero-filled keys past the sequence "
          "end enter the softmax with score 0. Right whenever kv_len is a multiple of the tile size.",
          "full_hi = (seq_k // BLOCK_N) * BLOCK_N", "full_hi = tl.cdiv(seq_k, BLOCK_N) * BLOCK_N", module="optimized"),
    Patch("q_tiles_off_by_one",
          "Query tiles counted as seq_q // BLOCK_M + 1 instead of cdiv(seq_q, BLOCK_M): the same "
          "whenever seq_q is not a multiple of the query tile; when it is, the heaviest-first tile "
          "order shifts by one and the first query tile is never computed (its rows are garbage).",
          "n_blocks = tl.cdiv(seq_q, BLOCK_M)\n        if VARLEN:",
          "n_blocks = seq_q // BLOCK_M + 1\n        if VARLEN:", module="optimized"),
    Patch("window_first_tile_skipped",
          "The key range of a query tile starts at the first key tile wholly inside the window "
          "(lo rounded up): the keys of the window's partial first tile are dropped. Right only "
          "when the window edge of the tile's first row falls on a key-tile boundary.",
          "lo = (tl.maximum(start_m + diag - left, 0) // BLOCK_N) * BLOCK_N",
          "lo = tl.cdiv(tl.maximum(start_m + diag - left, 0), BLOCK_N) * BLOCK_N", module="optimized"),
    Patch("window_edge_tile_unmasked",
          "The window-edge tile is run as an interior tile (full_lo rounded down instead of up): "
          "keys left of the window leak into the softmax of the tile's later rows. Right only when "
          "the window edge of the tile's last row falls on a key-tile boundary.",
          "full_lo = tl.cdiv(tl.maximum(start_m + BLOCK_M - 1 + diag - left, 0), BLOCK_N) * BLOCK_N",
          "full_lo = (tl.maximum(start_m + BLOCK_M - 1 + diag - left, 0) // BLOCK_N) * BLOCK_N", module="optimized"),
    Patch("bwd_window_tile_unmasked",
          "dK/dV kernel: the query tiles past a key tile's window reach are run unmasked (full_hi "
          "rounded up): queries outside the window add to dK and dV. The forward is right.",
          "full_hi = (tl.maximum(start_n + left - diag + 1, 0) // BLOCK_M) * BLOCK_M",
          "full_hi = tl.cdiv(tl.maximum(start_n + left - diag + 1, 0), BLOCK_M) * BLOCK_M", module="optimized"),
    Patch("delta_head_dim_unmasked",
          "The backward's delta = rowsum(dO * O) loads O and dO without the head_dim mask: right "
          "for a power-of-two head_dim (BLOCK_D == head_dim), the next row's values enter for "
          "head_dim 24, 40, 96, ... (the gradients are wrong, the forward is right).",
          "mask = (offs_m < seq_q)[:, None] & (offs_d < HEAD_DIM)[None, :]",
          "mask = (offs_m < seq_q)[:, None] & (offs_d < BLOCK_D)[None, :]", module="optimized"),
    Patch("negative_scale_max",
          "A negative scale handed to the kernel as is: its unmasked loop takes each row's max "
          "before scaling (max(qk) * scale), the row minimum when scale < 0, so exp overflows "
          "and the output is NaN for a moderate score range (p is cast to fp16/bf16).",
          "return (-k, -scale) if scale < 0 else (k, scale)", "return k, scale", module="optimized"),
    Patch("scale_zero_is_default",
          "`scale or 1/sqrt(head_dim)`: a scale of 0 (legal: uniform weights) gets the default scale.",
          "return 1.0 / math.sqrt(head_dim) if scale is None else float(scale)",
          "return float(scale or 1.0 / math.sqrt(head_dim))", module="optimized"),
    Patch("window_zero_is_none",
          "`if window` instead of `is None`: window=0 (each query sees only its own position) is "
          "run as no window.",
          "(UNBOUNDED if window is None else min(int(window), UNBOUNDED))",
          "(min(int(window), UNBOUNDED) if window else UNBOUNDED)", module="optimized"),
    Patch("module_default_causal",
          "FlashAttention.forward defaults to causal=True (the documented default is False): "
          "every call that passes causal is right, one that omits it is not.",
          "def forward(self, q, k, v, *, causal: bool = False,",
          "def forward(self, q, k, v, *, causal: bool = True,", module="optimized"),
    Patch("varlen_grid_last_sequence",
          "The varlen grid is sized for the last sequence (cu[-1] - cu[-2]) instead of the "
          "longest: query tiles of a longer earlier sequence are never computed.",
          "max_q, max_k = int((cq[1:] - cq[:-1]).max()), int((ck[1:] - ck[:-1]).max())",
          "max_q, max_k = int(cq[-1] - cq[-2]), int(ck[-1] - ck[-2])", module="optimized"),
    Patch("block_d_capped_at_128",
          "The head_dim tile is capped at 128 (a shared-memory budget written for head_dim <= 128): "
          "head_dim 256, the largest the kernels take, computes with half of each row.",
          "    return max(16, triton.next_power_of_2(head_dim))\n",
          "    return max(16, min(128, triton.next_power_of_2(head_dim)))\n", module="optimized"),
]
