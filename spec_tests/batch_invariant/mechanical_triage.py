"""Surviving mechanical variants of reference/batch_invariant.py and optimized/batch_invariant.py that
are not gaps of the spec (read by ``conformance.mechanical.triage`` as data). Key: (module, the
source line, the change).

Gaps the first run found, closed since (no entry here): every function's shape and dtype on an
empty row length, on no rows and on a 1-D or 3-D x (softmax of an empty row, row_sum / row_mean of
one, rms_norm's kernel path on one, the rank >= 1 check: ``test_edge_cases``); inside
``invariant_mode()``, torch's results for empty mm / bmm / softmax / mean dims, softmax and
log_softmax over each non-last dim of a 3-D tensor (the ``movedim`` pairs) and addmm with beta -1
and 0 (``test_invariant_mode_edges``); bad input of the row functions and of decode_attention's v
and Hkv = 0 (``test_row_functions_reject_bad_input``, ``ATT_BAD``); the reference's order in
float64, decode's KV_SPLIT = 32 included (the choice test ``test_float64_has_the_references_bits``);
matmul's output tiles past the first in N and in M (``test_matmul_values_across_output_tiles``).
"""

_MATMUL_TILED = ("matmul_tiled is no name of batch_invariant's contract (__all__); only the tile probe of "
                 "bench/cases/batch_invariant.py and the bundled internals test call it")

TRIAGE = {
    ("reference", "for k in range(k0 + 1, min(k0 + BLOCK, length)):", "min(a, b, ...) -> min(b, a, ...)"): (
        "equivalent", "min of two ints is symmetric"),
    ("reference", "s1 = min(s0 + KV_SPLIT, n)", "min(a, b, ...) -> min(b, a, ...)"): (
        "equivalent", "min of two ints is symmetric"),
    ("reference", "m_new = torch.maximum(m_all, m)", "maximum(a, b, ...) -> maximum(b, a, ...)"): (
        "equivalent", "torch.maximum propagates a NaN from either side and differs only in the sign of a zero "
                      "(+0 vs -0 ties keep the first); m_new enters only exp(m_all - m_new), exp(m - m_new) "
                      "(exp(+-0) = 1) and the next maximum, so no output bit changes"),
    ("reference", "if weight.shape[0] != x.shape[-1]:", "0 -> -1"): (
        "equivalent", "weight was just checked to be 1-D (_float_tensor('weight', weight, 1)): shape[-1] is shape[0]"),
    ("reference", "lib._destroy()", "drop `lib._destroy()`"): (
        "equivalent", "torch.library.Library destroys itself through weakref.finalize when its last reference goes: "
                      "the generator's frame, released when the generator ends (normal exit or the exception "
                      "thrown into it) before __exit__ returns; torch.mm checked restored after exit, inside the "
                      "except block and after it"),
    ("reference", 'warnings.filterwarnings("ignore", message="(?s).*Overriding a previously registered kernel")',
     'drop `warnings.filterwarnings("ignore", message="(?s).*Overriding `'): (
        "outside the contract", "it only lets torch's 'Overriding a previously registered kernel' UserWarning "
                                "through on entry to invariant_mode(); the contract states results, restoration and "
                                "errors, no warnings, and every result is unchanged"),
    ("optimized", "m = torch.empty(B, H, NS, dtype=torch.float32, device=q.device)", "empty(a, b, ...) -> empty(b, a, ...)"): (
        "equivalent", "m is a contiguous float32 workspace the kernels address only by pointer arithmetic "
                      "((b * Hkv + hk) * G * NS + split ...); (H, B, NS) has the same size, and l = empty_like(m) too"),
    ("optimized", "torch.bfloat16: (64, 64, 64, 4, 4),", "4 -> 5 (#2)"): (
        "equivalent", "num_stages (software pipelining of the loads) of the bfloat16 small-M tile: 5 stages of "
                      "64x64 + 64x64 bfloat16 tiles fit in shared memory (80 KB); the K loop, BLOCK_K and the "
                      "dot's accumulation order are unchanged, so every element's bits are"),
    ("optimized", "mx = tl.maximum(mx, x)", "maximum(a, b, ...) -> maximum(b, a, ...)"): (
        "equivalent", "a lane-wise max, symmetric for NaN (either side) and differing at most in the sign of a zero "
                      "max m; m enters only x - m, then exp(x - m) (exp(+-0) = 1) or (x - m) - log(s), where a "
                      "+0/-0 tie puts two elements at the max, so s >= 2 and log(s) != 0 hides the zero's sign"),
    ("optimized", "if t.dtype not in KERNEL_DTYPES or any(x.dtype != t.dtype for x in ts) or any(x.numel() == 0 for x in ts):",
     "!= -> =="): (
        "equivalent", "any(x.dtype == t.dtype ...) is always true (ts[0] is t): every call then computes with the "
                      "reference's code, itself the contract (its bits are the reference's, which the law admits "
                      "and every choice test names); no input of the contract tells it from a correct implementation"),
    ("optimized", "mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)", "< -> <= (#2)"): (
        "equivalent", "it also loads b's column N (one past), which feeds only accumulator column N; the store is "
                      "masked to columns < N, and each output column's dot reads only its own column of b"),
    ("optimized", "c = torch.empty(M, N, dtype=a.dtype, device=a.device)", "empty(a, b, ...) -> empty(b, a, ...) (#2)"): (
        "outside the contract", _MATMUL_TILED),
    ("optimized", "(M, K), N = a.shape, b.shape[1]", "1 -> 2 (#2)"): (
        "outside the contract", _MATMUL_TILED),
    ("optimized", "c.stride(0), c.stride(1), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,", "1 -> 0 (#2)"): (
        "outside the contract", _MATMUL_TILED),
    ("optimized", "IEEE=a.dtype == torch.float32, GROUP_M=8, num_warps=warps, num_stages=stages)", "== -> != (#2)"): (
        "outside the contract", _MATMUL_TILED),
    ('optimized', 'IEEE=q.dtype == torch.float32, num_warps=4)', '4 -> 5'): (
        "outside the contract", "the decode split kernel's num_warps: ignored by the Triton interpreter (the CPU run), "
                                "rejected at launch on a GPU ('num_warps must be a power of 2'); not run natively in "
                                "this measure"),
    # Second triage (tag k1).
    ("reference", "s = _sum_last(x.to(compute_dtype(x.dtype)))[..., 0]", "0 -> -1"): (
        "equivalent", "_sum_last keeps the last dim as size 1 (fixed_order_sum's shape (*xf.shape[:-1], 1)), so "
                      "[..., -1] is [..., 0]"),
    ("optimized", "torch.bfloat16: (64, 64, 64, 4, 4),", "4 -> 5"): (
        "outside the contract", "num_warps of the bfloat16 small-M matmul tile: ignored by the Triton interpreter (the "
                                "CPU run; BLOCK_M/N/K, hence the bits, unchanged); it acts only on CUDA tensors "
                                "(_kernel_ok: t.is_cuda), where a warp count of 5 is rejected at launch ('num_warps "
                                "must be a power of 2'); not run natively in this measure"),
    ("optimized", "_decode_merge_kernel[(B * H,)](m, l, o, lens, out, H, NS, D=D, D_PAD=D_PAD, SPLIT=KV_SPLIT, num_warps=1)",
     "1 -> 0"): (
        "outside the contract", "the decode merge kernel's num_warps: ignored by the Triton interpreter (the CPU run); it "
                                "acts only on CUDA tensors, where num_warps 0 is rejected at launch (not a power of 2); "
                                "not run natively in this measure"),
}
