"""Planted bugs of `batch_invariant` (each must make a batch_invariant test fail): reduction
orders that depend on the batch."""
from conformance.declarations import Patch


MUTANTS = [
    Patch("split_k_above_m",
          "matmul splits K in two halves (two partial sums added at the end, as split-K kernels "
          "do) once the batch has 128 rows or more: a row's bits change with the batch size.",
          "    out = fixed_order_sum(lambda k: af[:, k, None] * bf[None, k, :], K, cd, (M, N), a.device)\n",
          "    if M >= 128 and K > 1:\n"
          "        h = K // 2\n"
          "        out = (fixed_order_sum(lambda k: af[:, k, None] * bf[None, k, :], h, cd, (M, N), a.device)\n"
          "               + fixed_order_sum(lambda k: af[:, h + k, None] * bf[None, h + k, :], K - h, cd, (M, N), a.device))\n"
          "    else:\n"
          "        out = fixed_order_sum(lambda k: af[:, k, None] * bf[None, k, :], K, cd, (M, N), a.device)\n"),
    Patch("block_from_batch",
          "The reduction block is chosen from the number of rows (16 below 64 rows, 32 from 64 "
          "rows on, as a heuristic tuned for occupancy would): a row's bits change with the batch.",
          "    total = torch.zeros(shape, dtype=dtype, device=device)\n"
          "    for k0 in range(0, length, BLOCK):\n"
          "        part = term(k0)\n"
          "        for k in range(k0 + 1, min(k0 + BLOCK, length)):\n",
          "    total = torch.zeros(shape, dtype=dtype, device=device)\n"
          "    blk = BLOCK if len(shape) == 0 or shape[0] < 64 else 2 * BLOCK\n"
          "    for k0 in range(0, length, blk):\n"
          "        part = term(k0)\n"
          "        for k in range(k0 + 1, min(k0 + blk, length)):\n"),
    Patch("atomic_add_order",
          "Block partials are added in 'arrival order', as an atomic add would: modelled as a "
          "permutation seeded by the output's shape (on a GPU it changes run to run; here it "
          "changes with the batch, which makes it testable deterministically).",
          "    total = torch.zeros(shape, dtype=dtype, device=device)\n"
          "    for k0 in range(0, length, BLOCK):\n"
          "        part = term(k0)\n"
          "        for k in range(k0 + 1, min(k0 + BLOCK, length)):\n"
          "            part = part + term(k)\n"
          "        total = total + part\n"
          "    return total\n",
          "    total = torch.zeros(shape, dtype=dtype, device=device)\n"
          "    parts = []\n"
          "    for k0 in range(0, length, BLOCK):\n"
          "        part = term(k0)\n"
          "        for k in range(k0 + 1, min(k0 + BLOCK, length)):\n"
          "            part = part + term(k)\n"
          "        parts.append(part)\n"
          "    seed = 1\n"
          "    for s in tuple(shape):\n"
          "        seed = seed * 31 + int(s)\n"
          "    for i in torch.randperm(len(parts), generator=torch.Generator().manual_seed(seed)).tolist():\n"
          "        total = total + parts[i]\n"
          "    return total\n"),
    Patch("position_dependent_order",
          "Row-wise sums (rms_norm, softmax, sum, mean) add a row's terms right to left when the "
          "row sits at an odd position of the batch: its bits depend on where it is placed.",
          "    L = xf.shape[-1]\n"
          "    return fixed_order_sum(lambda k: xf[..., k:k + 1], L, xf.dtype, (*xf.shape[:-1], 1), xf.device)\n",
          "    L = xf.shape[-1]\n"
          "    fwd = fixed_order_sum(lambda k: xf[..., k:k + 1], L, xf.dtype, (*xf.shape[:-1], 1), xf.device)\n"
          "    rev = fixed_order_sum(lambda k: xf[..., L - 1 - k:L - k], L, xf.dtype, (*xf.shape[:-1], 1), xf.device)\n"
          "    odd = (torch.arange(fwd.numel(), device=xf.device).reshape(fwd.shape) % 2) == 1\n"
          "    return torch.where(odd, rev, fwd)\n"),
    Patch("attention_splits_from_batch",
          "decode_attention cuts the keys into a split COUNT chosen from the batch (4 splits for "
          "one sequence, fewer as the batch grows, as split-KV heuristics fill the GPU), so the "
          "split size and the merge order change with the batch.",
          "        for s0 in range(0, n, KV_SPLIT):              # fixed split size: never a count from B\n"
          "            s1 = min(s0 + KV_SPLIT, n)\n",
          "        split = -(-n // max(1, 4 // B))\n"
          "        for s0 in range(0, n, split):\n"
          "            s1 = min(s0 + split, n)\n"),
    Patch("kernel_block_k_from_batch",
          "The Triton matmul halves BLOCK_K from 128 rows on (a tile configuration chosen from "
          "M): the float32 accumulation order over K, and so a row's bits, change with the batch.",
          "    bm, bn, bk, warps, stages = (TILES_SMALL_M if M <= SMALL_M else TILES)[a.dtype]\n",
          "    bm, bn, bk, warps, stages = (TILES_SMALL_M if M <= SMALL_M else TILES)[a.dtype]\n"
          "    bk = bk if M < 128 else bk // 2\n", module="optimized"),
    Patch("kernel_split_from_longest",
          "The Triton decode kernel cuts every sequence into splits of a size chosen from the "
          "batch's LONGEST context (a fixed count of 4 splits of the longest sequence, rounded up to "
          "a power of two >= 16 keys), as simple flash-decoding kernels do: a sequence's split "
          "boundaries, and so its bits, change with the other sequences' lengths.",
          "    NS = triton.cdiv(S, KV_SPLIT)\n",
          "    KV_SPLIT = max(16, triton.next_power_of_2(triton.cdiv(int(lens.max()), 4)))\n"
          "    NS = triton.cdiv(S, KV_SPLIT)\n", module="optimized"),
    Patch("gqa_head_modulo",
          "GQA head map h % Hkv instead of h // (H / Hkv) (the interleaved convention of another "
          "codebase): query head h reads the wrong KV head whenever 1 < Hkv < H.",
          "    heads = torch.arange(H, device=q.device) // (H // k.shape[1])",
          "    heads = torch.arange(H, device=q.device) % k.shape[1]"),
    Patch("log_softmax_without_max",
          "log_softmax as x - log(sum(exp(x))) without subtracting the row max first: exact in "
          "real arithmetic, but exp overflows float32 once a logit exceeds ~88, giving -inf.",
          "    m = xf.amax(dim=-1, keepdim=True)       # a max is exact in any order\n"
          "    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))\n",
          "    m = torch.zeros_like(xf.amax(dim=-1, keepdim=True))\n"),
    Patch("softmax_without_max",
          "softmax as exp(x) / sum(exp(x)) without the max shift: NaN (inf / inf) once a row has "
          "a value above ~88.",
          "    m = xf.amax(dim=-1, keepdim=True)\n"
          "    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))\n"
          "    e = torch.exp(xf - m)\n",
          "    m = torch.zeros_like(xf.amax(dim=-1, keepdim=True))\n"
          "    e = torch.exp(xf - m)\n"),
    Patch("rms_eps_outside_sqrt",
          "rms_norm divides by sqrt(mean(x^2)) + eps instead of sqrt(mean(x^2) + eps) (a common "
          "LayerNorm-style slip): invisible at eps 1e-6, wrong at any eps that matters.",
          "    normed = xf * torch.rsqrt(ms + eps)\n",
          "    normed = xf / (torch.sqrt(ms) + eps)\n"),
    Patch("rms_eps_ignored",
          "rms_norm ignores its eps argument and always uses the default 1e-6.",
          "    normed = xf * torch.rsqrt(ms + eps)\n",
          "    normed = xf * torch.rsqrt(ms + 1e-6)\n"),
    # --- issue 22: batch invariant, but wrong (each caught by a value test against float64) ---
    Patch("log_softmax_batch_max",
          "log_softmax subtracts the max of the whole batch (amax without dim) instead of the row's: "
          "exact in real arithmetic, but a row far below the batch's max underflows to exp = 0 and "
          "log 0 = -inf (and its bits depend on the other rows).",
          "    m = xf.amax(dim=-1, keepdim=True)       # a max is exact in any order\n",
          "    m = xf.amax()\n"),
    Patch("rms_norm_accumulates_in_input_dtype",
          "rms_norm squares and sums in the input's 16-bit dtype instead of float32: batch "
          "invariant (the order is still fixed), but the sum of squares loses its low bits.",
          "    cd = compute_dtype(x.dtype)\n    xf = x.to(cd)\n    ms =",
          "    cd = x.dtype\n    xf = x.to(cd)\n    ms ="),
    Patch("row_sum_accumulates_in_input_dtype",
          "row_sum accumulates in the input's 16-bit dtype: a long row's running sum stagnates once "
          "its ulp exceeds a block's partial sum.",
          "    return _sum_last(x.to(compute_dtype(x.dtype)))[..., 0].to(x.dtype)\n",
          "    return _sum_last(x)[..., 0]\n"),
    Patch("mode_addmm_drops_bias",
          "invariant_mode's addmm route returns a @ b and forgets the bias: F.linear with a bias is "
          "batch invariant and wrong.",
          "        return out + bias * beta if beta != 0 else out\n",
          "        return out\n"),
    Patch("mode_bmm_broadcasts_first_b",
          "invariant_mode's bmm route multiplies every batch entry by b[0] (an indexing slip): "
          "batch invariant, wrong for every entry but the first.",
          "mm(a[i], b[i])", "mm(a[i], b[0])"),
    Patch("decode_scale_padded_dim",
          "decode_attention scales the scores by 1/sqrt of the head_dim padded to a power of two (the "
          "kernel's D_PAD) instead of the real D: right only when D is a power of two (found by a blind "
          "bug hunt; the values test drew D = 16 only).",
          "q, k, v, lens, m, l, o, Hkv, NS, 1.0 / math.sqrt(D),",
          "q, k, v, lens, m, l, o, Hkv, NS, 1.0 / math.sqrt(D_PAD),", module="optimized"),
]
