"""Surviving mechanical variants of reference/flash_attention.py that are not gaps of the spec (read
by ``conformance.mechanical.triage`` as data). Key: (module, the source line, the change).

Gaps closed since (no entry here): attention_varlen's checks of the whole packed tensors, which the
reference's per-sequence attention repeats only for the sequences it visits (rows of
test_varlen_rejects_bad_input: k and v of different lengths, a bad window / heads / dtype when no
sequence has a query).

optimized/flash_attention.py: the mechanical run executes the CPU path (the Triton interpreter, the
GPU hidden), where fwd_config never sets HOST_DESC or PERSISTENT; those paths (the host-descriptor
kernel, the persistent grid) are reached by a contract name only on a CUDA device of compute
capability >= 9, and on the CPU only through _flash_forward / flash_forward with an explicit config,
which spec_tests/bundled/test_flash_attention_internals.py runs (not the contract: never run against
a submission). Entries of that kind say "outside the contract" and which bundled test catches the
variant where one does."""

TRIAGE = {
    ("reference", "qb, kb, vb = (t[s:e].transpose(0, 1).unsqueeze(0)", "transpose(a, b, ...) -> transpose(b, a, ...)"): (
        "equivalent", "transpose(1, 0) is transpose(0, 1): a swap of two dimensions is symmetric"),
    ("reference", "out[cq[b]:cq[b + 1]] = ob[0].transpose(0, 1)", "0 -> -1 (#2)"): (
        "equivalent", "ob comes from attention over a batch of one, so ob[-1] is ob[0]"),
    ("reference", "out[cq[b]:cq[b + 1]] = ob[0].transpose(0, 1)", "transpose(a, b, ...) -> transpose(b, a, ...)"): (
        "equivalent", "transpose(1, 0) is transpose(0, 1): a swap of two dimensions is symmetric"),
    ("reference", "lse[cq[b]:cq[b + 1]] = lb[0].transpose(0, 1)", "transpose(a, b, ...) -> transpose(b, a, ...)"): (
        "equivalent", "transpose(1, 0) is transpose(0, 1): a swap of two dimensions is symmetric"),
    ("reference", "check_attention_inputs(*(t.transpose(0, 1).unsqueeze(0) for t in (q, k, v)), window, scale)",
     "transpose(a, b, ...) -> transpose(b, a, ...)"): (
        "equivalent", "transpose(1, 0) is transpose(0, 1): a swap of two dimensions is symmetric"),
    ("reference", "lse[cq[b]:cq[b + 1]] = lb[0].transpose(0, 1)", "0 -> -1 (#2)"): (
        "equivalent", "lb comes from attention over a batch of one, so lb[-1] is lb[0]"),
    ("optimized", "full_lo = tl.cdiv(tl.maximum(start_m + BLOCK_M - 1 + diag - left, 0), BLOCK_N) * BLOCK_N",
     "maximum(a, b, ...) -> maximum(b, a, ...)"): (
        "equivalent", "tl.maximum is symmetric in its two arguments"),
    ("optimized", "full_lo = tl.cdiv(tl.maximum(start_m + BLOCK_M - 1 + diag - left, 0), BLOCK_N) * BLOCK_N",
     "1 -> 0"): (
        "equivalent", "full_lo can only grow by one key tile, which then runs in the masked loop instead of the "
                      "unmasked one (the stretches [lo, full_lo), [full_lo, full_hi), [full_hi, hi) still cover "
                      "[lo, hi) once: full_hi >= full_lo, full_lo <= hi_ceil); every key of that tile is visible "
                      "to every row, and for scale >= 0 (_signed) max(qk * s) == max(qk) * s exactly (rounding "
                      "is monotone), so the masked loop gives the same bits"),
    ("optimized", "return dict(BLOCK_M=32, BLOCK_N=16, num_warps=4, num_stages=1, WARP_SPEC=False)", "1 -> 0"): (
        "equivalent", "the non-CUDA tiles run only under the Triton interpreter, which ignores num_stages "
                      "(a GPU software-pipelining depth); the tiles, hence the arithmetic, are unchanged"),
    ("optimized", "dq=dict(BLOCK_M=32, BLOCK_N=16, num_warps=4, num_stages=1))", "1 -> 2"): (
        "equivalent", "the non-CUDA tiles run only under the Triton interpreter, which ignores num_stages "
                      "(a GPU software-pipelining depth); the tiles, hence the arithmetic, are unchanged"),
    ("optimized", "dq=dict(BLOCK_M=128, BLOCK_N=32, num_warps=4, num_stages=3))", "3 -> 4"): (
        "equivalent", "num_stages is the GPU software-pipelining depth of the dQ loop (how many K/V tiles are "
                      "prefetched), not its arithmetic or order; one more 128x32 / 32x64 stage fits the SM's "
                      "shared memory; and off CUDA this config is never reached"),
    ("optimized", "if not kernel_supports(q) or min(q.numel(), k.numel()) == 0:", "== -> !="): (
        "equivalent", "performance only: every non-empty call then takes the module's own PyTorch path (the "
                      "reference's math, which the contract's tolerances accept by definition) and an empty one "
                      "the kernels, which give the reference's out and lse bits for empty q or k (checked: "
                      "fp16, causal and not, q or k or both empty, backward runs)"),
    ("optimized", "if d % 8 or not 8 <= d <= 256:", "<= -> <"): (
        "equivalent", "performance only: head_dim 8 then takes the module's own PyTorch path (the reference's "
                      "math) instead of the kernels; the contract fixes results to its tolerances, not the path"),
    ("optimized", "if isinstance(current, _allocation.NullAllocator):", "isinstance(a, b, ...) -> isinstance(b, a, ...)"): (
        "outside the contract", "_ensure_allocator runs only for CUDA tensors (q.is_cuda), never on the CPU path "
                                "the mechanical run executes (on an sm_90 GPU it would raise TypeError)"),
    ("optimized", "grid = (min(grid[0] * q_heads * batch, max(1, sm_count(q.device)) * per_sm),)", "1 -> 0"): (
        "outside the contract", "the SM count sizes only the PERSISTENT grid, which no contract name reaches "
                                "(fwd_config never sets PERSISTENT); test_host_descriptor_forward_has_the_device_"
                                "path_bits (bundled) catches it"),
    ("optimized", "return element_size * block_d * (block_m * (2 if persistent else 1) + 2 * max(num_stages, 1) "
                  "* block_n) + 1024", "2 -> 1"): (
        "outside the contract", "fwd_shared_bytes feeds only _programs_per_sm, the PERSISTENT grid's size, which no "
                                "contract name reaches (fwd_config never sets PERSISTENT); the grid's size changes "
                                "the schedule, never the bits"),
    ("optimized", "_fwd_tile(desc_q, desc_k, desc_v, desc_o, LSE, sl_b, sl_h, sl_n, tl.program_id(2), off_h,",
     "_fwd_tile(a, b, ...) -> _fwd_tile(b, a, ...)"): (
        "outside the contract", "_fwd_kernel_host runs only with HOST_DESC, which fwd_config sets only on CUDA; "
                                "test_host_descriptor_forward_has_the_device_path_bits (bundled) catches it"),
    ("optimized", "_kv_head(off_h, group), (n_blocks - 1 - tl.program_id(0)) * BLOCK_M, 0, n_q, n_k,", "* -> /"): (
        "outside the contract", "_fwd_kernel_host runs only with HOST_DESC, which fwd_config sets only on CUDA; "
                                "test_host_descriptor_forward_has_the_device_path_bits (bundled) catches it"),
    ("optimized", "desc.store([off_b, off_h, row, 0], tile.reshape(1, 1, ROWS, COLS))", "0 -> -1"): (
        "outside the contract", "the DESC4 store runs only in _fwd_kernel_host (HOST_DESC, set by fwd_config only "
                                "on CUDA); test_host_descriptor_forward_has_the_device_path_bits (bundled) catches it"),
    # Second triage (tag k1).
    ("optimized", "if triton is None or q.dtype not in KERNEL_DTYPES:", "is -> is not"): (
        "equivalent", "performance only: with Triton installed kernel_supports (no contract name) is then always "
                      "False, so attention_varlen and FlashAttention take the module's own PyTorch path (the "
                      "reference's math and autograd, which the contract's tolerances accept by definition). Only "
                      "an install without Triton (a dependency on linux x86-64; no input of the contract, and no "
                      "configuration the spec runs in) would send calls to the missing kernels"),
    ("optimized", "out, lse = _FlashAttentionFn.apply(q, k, v, cu_q, cu_k, max(max_q, 1), max(max_k, 1), bool(causal),",
     "max(a, b, ...) -> max(b, a, ...)"): (
        "equivalent", "max of two ints is symmetric"),
    ("optimized", "if t.dim() != 4 or min(t.shape) == 0 or not _tma_aligned(t):", "min -> max"): (
        "equivalent", "_host_desc runs only with HOST_DESC (fwd_config sets it only on CUDA), on q, k, v and out of a "
                      "padded call, and attention sends min(q.numel(), k.numel()) == 0 to the PyTorch path first (v has "
                      "k's shape, out q's, head_dim >= 1): every tensor that reaches it has no zero dimension, where "
                      "min(shape) == 0 and max(shape) == 0 are both False"),
}
