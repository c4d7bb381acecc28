"""Surviving mechanical variants of reference/paged_attention.py that are not gaps of the spec (read
by ``conformance.mechanical.triage`` as data). Key: (module, the source line, the change).

Gaps closed since (no entry here): the reference leaves no check to the attention it runs per
sequence -- with batch 0 there is none, and a dropped scale, head_dim, heads or window check
accepted bad input (test_rejects_bad_input_without_sequences; kills reference mech 4, 9, 10, 85);
a cache with zero kv heads (bad-input row "zero kv heads"; a check of ``kv_heads < 0`` or
``< 1 and ...`` divides by zero: kills 23, 76); q and caches whose last dimension is not
contiguous (test_inputs_of_any_strides; kills optimized 103, which skipped the copy to unit
stride); a GQA group or a draft of more than 16 query rows per KV head, and many queries past a short
sequence with a window (test_many_query_rows_per_kv_head; kills optimized 34, whose M tile stopped at
16 rows, and 443, whose span computed first_visible(q_len, n) and skipped the tail's keys); q and
caches whose last dimension has stride 0 (test_inputs_with_a_broadcast_last_dimension; kills
optimized 230, which copied unit strides and passed stride 0 to the kernel as is).

Classed "outside the contract" at the end of TRIAGE (the CPU run cannot reach them): the CUDA-only
``num_warps`` 3/5 of decode_config and of the merge launch (the interpreter ignores num_warps;
whether Triton on a GPU accepts a warp count that is not a power of two is unchecked); and the
MAX_ROWS test read as ``q_len / group`` or with ``q.shape[0]`` (batch) for q_len (a kernel of more
than 128 rows, which no test draws: q_len * group <= 16 in the strategies; a resource question on
a GPU).
"""
_LSE = "lse[b] = lb[0].transpose(0, 1)"

TRIAGE = {
    ("reference", _LSE, "transpose(a, b, ...) -> transpose(b, a, ...)"): (
        "equivalent", "transpose(1, 0) is transpose(0, 1): a swap of two dimensions is symmetric"),
    ("reference", _LSE, "0 -> -1 (#2)"): (
        "equivalent", "lb comes from attention over a batch of one, so lb[-1] is lb[0]"),
    ("reference", "out, lse = out[:, 0], lse[:, 0]", "0 -> -1 (#2)"): (
        "equivalent", "this branch runs for a rank-3 q, unsqueezed to q_len 1, so lse[:, -1] is lse[:, 0]"),
    ("reference", "if -(-n // block_size) > width:", "// -> /"): (
        "equivalent", "ceil(n / b) > w iff n / b > w for an integer w, and Python's correctly rounded int / int "
                      "keeps that exact while n < 2^53 (a longer sequence needs a cache of 2^53 slots: only a "
                      "zero-stride view can fake one, and the spec's no-change check would copy it)"),
    ("reference", "b, i = bad.nonzero()[0].tolist()", "0 -> -1"): (
        "equivalent", "the message quotes the last bad block id instead of the first; the contract fixes the "
                      "error type and that it names block_tables, not which bad entry it quotes"),
    ("reference", "return 0 if window is None else max(0, seq_len - q_len - window)",
     "max(a, b, ...) -> max(b, a, ...)"): ("equivalent", "max of two ints is symmetric"),
    ("reference", "out[b] = ob[0].transpose(0, 1)", "transpose(a, b, ...) -> transpose(b, a, ...)"): (
        "equivalent", "transpose(1, 0) is transpose(0, 1): a swap of two dimensions is symmetric"),
    ("reference", 'ob, lb = attention(q4[b].transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None],', "transpose(a, b, ...) -> transpose(b, a, ...)"): (
        "equivalent", "transpose(1, 0) is transpose(0, 1): a swap of two dimensions is symmetric"),
    ("reference", 'ob, lb = attention(q4[b].transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None],', "transpose(a, b, ...) -> transpose(b, a, ...) (#2)"): (
        "equivalent", "transpose(1, 0) is transpose(0, 1): a swap of two dimensions is symmetric"),
    ("reference", 'ob, lb = attention(q4[b].transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None],', "transpose(a, b, ...) -> transpose(b, a, ...) (#3)"): (
        "equivalent", "transpose(1, 0) is transpose(0, 1): a swap of two dimensions is symmetric"),
    ("reference", "out[b] = ob[0].transpose(0, 1)", "0 -> -1 (#2)"): (
        "equivalent", "ob comes from attention over a batch of one, so ob[-1] is ob[0]"),
    ("reference", "out, lse = out[:, 0], lse[:, 0]", "0 -> -1"): (
        "equivalent", "this branch runs for a rank-3 q, unsqueezed to q_len 1, so out[:, -1] is out[:, 0]"),
    ("reference", "if seq_lens.shape[0] != batch:", "0 -> -1"): (
        "equivalent", "seq_lens was checked to be 1-d just above (check_tensor ndim=1): shape[-1] is shape[0]"),
    # -- optimized/paged_attention.py ------------------------------------------------------------
    ("optimized", "splits = max(1, min(splits, tiles, MAX_SPLITS))", "max(a, b, ...) -> max(b, a, ...)"): (
        "equivalent", "max of two ints is symmetric"),
    ("optimized", "lo = tl.maximum(seq_len - q_len - left, 0)", "maximum(a, b, ...) -> maximum(b, a, ...)"): (
        "equivalent", "the elementwise max of two ints is symmetric"),
    ("optimized", "m = tl.max(lse, 0)", "0 -> -1"): (
        "equivalent", "lse is 1-d (BLOCK_S): its axis -1 is its axis 0"),
    ("optimized", "out, lse = out[:, 0], lse[:, 0]", "0 -> -1 (#4)"): (
        "equivalent", "this branch runs for a rank-3 q, unsqueezed to q_len 1, so lse[:, -1] is lse[:, 0]"),
    ("optimized", "decode = q.dim() == 3", "== -> !="): (
        "outside the contract", "the line of paged_attention_unchecked (the benchmarks' and engines' entry, not in "
                                "__all__): paged_attention, the contract's name, has its own copy of it"),
    ("optimized", "out, lse = out[:, 0], lse[:, 0]", "0 -> 1"): (
        "outside the contract", "the line of paged_attention_unchecked (not in __all__); paged_attention's own "
                                "copy is a later line"),
    ("optimized", "q_len = 1 if q.dim() == 3 else q.shape[1]", "1 -> 2"): (
        "equivalent", "dispatch only: a decode step with group 65..128 goes to the reference's PyTorch path "
                      "instead of the kernel: the same contract, only speed differs"),
    ("optimized", "tiles = max(1, -(-span // block_n))", "1 -> 2"): (
        "equivalent", "differs only when the visible span fits one tile: then either one split longer than "
                      "needed (its loop stops at seq_len: the same tiles) or a second, empty split (lse -inf, weight "
                      "2^-inf = 0), whose merge with the one real split returns its o and lse bit for bit "
                      "(w = 1, denom = 1; a blind row stays 0 / -inf)"),
    ("optimized", "splits = max(1, min(splits, tiles, MAX_SPLITS))", "1 -> 2"): (
        "equivalent", "a plan with at least 2 splits where the shapes chose 1 (tiles >= 2; with 1 tile "
                      "ceil(1 / ceil(1 / 2)) is still 1 split): split-KV with an exact merge is the same function, "
                      "the split count a scheduling choice no contract rule or pinned choice fixes (rounding "
                      "within the tolerance rule)"),
    ("optimized", 'return dict(BLOCK_N=64, num_warps=4, num_stages=2, programs=4 * sms, min_tiles=4)', "2 -> 3"): (
        "equivalent", "CUDA-only config (decode_config returns the interpreter's first); num_stages is the GPU "
                      "software-pipelining depth: the tiles, hence the arithmetic, are unchanged"),
    ("optimized", 'return dict(BLOCK_N=64, num_warps=4, num_stages=2, programs=4 * sms, min_tiles=4)', "4 -> 5 (#3)"): (
        "equivalent", "CUDA-only config: programs = 5 x SMs only changes plan's split count, a scheduling choice "
                      "(the split-KV merge is exact math; rounding within the tolerance rule)"),
    # The six left open by the first triage, classed by the lead: the CPU run cannot reach them.
    ("optimized", 'return dict(BLOCK_N=64, num_warps=4, num_stages=2, programs=4 * sms, min_tiles=4)', "4 -> 3"): (
        "outside the contract", "CUDA-only launch config: the interpreter ignores num_warps; on a GPU a warp count "
                                "that is not a power of two is rejected at launch (not run natively in this measure)"),
    ("optimized", 'return dict(BLOCK_N=32, num_warps=4, num_stages=2, programs=4 * sms, min_tiles=8)', "4 -> 5"): (
        "outside the contract", "CUDA-only launch config (head_dim > 128): the interpreter ignores num_warps; a warp "
                                "count of 5 is rejected at launch on a GPU (not run natively in this measure)"),
    ("optimized", "num_warps=4)", "4 -> 3"): (
        "outside the contract", "the merge kernel's num_warps: ignored by the interpreter, a launch error on a GPU "
                                "(not run natively in this measure)"),
    ("optimized", "if q_len * (q.shape[-2] // k_cache.shape[2]) > MAX_ROWS:", "* -> /"): (
        "outside the contract", "MAX_ROWS is a GPU register budget (rows one program holds): the variant only moves "
                                "calls between the kernel and the reference's PyTorch path; under the interpreter the "
                                "kernel computes any row count, so no CPU run tells them apart"),
    ("optimized", "q_len = 1 if q.dim() == 3 else q.shape[1]", "1 -> 0 (#2)"): (
        "outside the contract", "the same MAX_ROWS dispatch, computed from the batch instead of q_len: only moves calls "
                                "between two correct paths on the CPU (a GPU register budget otherwise)"),
    # Second triage (tag k1).
    ("optimized", "MAX_SPLITS = 256", "256 -> 255"): (
        "equivalent", "a cap of the split count only: on the CPU programs = 16 keeps splits <= 16 (never reached); "
                      "on a GPU any count >= 1 covers the span (n_splits * split_len >= tiles * BLOCK_N) and the "
                      "merge is exact (an empty split weighs 2^-inf = 0): a scheduling choice, rounding within "
                      "the tolerance rule"),
    ("optimized", "if q_len * (q.shape[-2] // k_cache.shape[2]) > MAX_ROWS:", "> -> >="): (
        "equivalent", "dispatch only: exactly 128 rows per KV head then take the reference's PyTorch path instead "
                      "of the kernel (which never gets more rows than before): the same contract, only speed differs"),
    ("optimized", "splits = max(1, min(programs // max(units, 1), tiles // max(min_tiles, 1), MAX_SPLITS))", "1 -> 2"): (
        "equivalent", "at least 2 splits where the shapes chose 1 (then clamped to tiles): split-KV with an exact "
                      "merge is the same function for every split count, a scheduling choice (see the entry "
                      "'splits = max(1, min(splits, tiles, MAX_SPLITS))', '1 -> 2')"),
    ("optimized", "splits = max(1, min(programs // max(units, 1), tiles // max(min_tiles, 1), MAX_SPLITS))", "1 -> 2 (#2)"): (
        "equivalent", "differs only for units = batch x kv_heads = 1 (programs // 2 instead of programs): a "
                      "different split count, a scheduling choice (exact merge; rounding within the tolerance rule)"),
    ("optimized", "q_len = 1 if q.dim() == 3 else q.shape[1]", "3 -> 4"): (
        "outside the contract", "the MAX_ROWS dispatch read with q_len = q_heads for a rank-3 q and 1 for rank 4: it only "
                                "moves calls between the kernel and the PyTorch path; under the interpreter the kernel "
                                "computes any row count (checked: 140 rows, window 9, fp16, equal to the reference within "
                                "2e-3), so no CPU run tells them apart (a GPU register budget otherwise)"),
    ("optimized", 'if device.type == "cuda" and block_m >= 64:  # many speculative rows: more warps for the larger tiles', "64 -> 63"): (
        "equivalent", "block_m = max(16, next_power_of_2(...)) is a power of two >= 16, and none lies in [63, 64): "
                      ">= 63 iff >= 64 (and the branch is CUDA-only)"),
    ("optimized", "return dict(BLOCK_N=16, num_warps=4, num_stages=1, programs=16, min_tiles=1)", "1 -> 0 (#2)"): (
        "equivalent", "min_tiles is read only as plan's max(min_tiles, 1): 0 and 1 both give 1"),
    ("optimized", "return dict(BLOCK_N=32, num_warps=4, num_stages=2, programs=4 * sms, min_tiles=8)", "8 -> 7"): (
        "equivalent", "CUDA-only config (head_dim > 128): min_tiles only changes plan's split count, a scheduling "
                      "choice (exact merge; rounding within the tolerance rule)"),
    ("optimized", "span = max((n - first_visible(n, q_len, window) // block_n * block_n for n in lens), default=0)", "- -> +"): (
        "equivalent", "the span can only grow (n + x >= n - x, x >= 0): the splits still start at lo rounded down to "
                      "a tile and cover at least the true span (n_splits * split_len >= tiles * BLOCK_N); extra splits "
                      "start at or past seq_len (empty loop: lse -inf, weight 0 in the exact merge) and each loop stops "
                      "at seq_len; only the split count differs (rounding within the tolerance rule)"),
    # ---- the plan/run refactor's survivors (uniform sample of 36 on the 2-core machine)
    ("optimized", "s_vs = (0, 0, 0) if k_scale is None else v_scale.stride()", "0 -> -1"): (
        "equivalent", "the scale strides of a float cache: QUANT = 0 never reads them"),
    ("optimized", "MAX_SPLITS = 256", "256 -> 257"): (
        "equivalent", "a cap on the split count: a launch shape (the merge weighs every split, BLOCK_S is the next "
                      "power of two); CPU plans never reach it"),
    ("optimized", "out, lse = _paged_decode(q.unsqueeze(1) if decode else q, k_cache, v_cache, block_tables, seq_lens,",
     "1 -> 0"): (
        "outside the contract", "the line of paged_attention_unchecked (the engine's and the benchmarks' entry, not in "
                                "__all__): paged_attention and PagedAttentionPlan do not call it"),
    ("reference", "k = torch.where(read[..., None, None], k_cache[blocks, pos % block_size], 0)   # (batch, L, kv_heads, d)",
     "0 -> -1"): (
        "equivalent", "the stand-in of a key no query reads only has to be finite: its score is masked to -inf "
                      "before the softmax whatever it is (0 or -1)"),
    ("optimized", "tiles = max(1, -(-span // block_n))", "max(a, b, ...) -> max(b, a, ...)"): (
        "equivalent", "max of two ints is symmetric"),
    ("optimized", "q4_shape = (q.shape[0], 1 if q.dim() == 3 else q.shape[1], q.shape[-2], q.shape[-1])", "3 -> 2"): (
        "equivalent", "a decode plan then sizes its tiles for q_len = q_heads: more padded query rows and a wider "
                      "window span, a launch shape; the run launches with the real q_len, whose partials fit the "
                      "larger workspace"),
    ("optimized", "return dict(BLOCK_N=32, num_warps=4, num_stages=2, programs=4 * sms, min_tiles=8)", "* -> /"): (
        "outside the contract", "decode_config's CUDA branch (head_dim > 128): unreachable on a CPU machine"),
    ("optimized", "m_ij = tl.maximum(m_i, tl.max(qk, 1))", "maximum(a, b, ...) -> maximum(b, a, ...)"): (
        "equivalent", "tl.maximum is symmetric (m_i and the row max are never NaN: masked scores are -inf)"),
    ("optimized", "span = max((n - first_visible(n, q_len, window) // block_n * block_n for n in lens), default=0)",
     "// -> /"): (
        "outside the contract", "split_plan's window branch with exact lengths is reached only by _paged_decode "
                                "(paged_attention_unchecked, the engine, and kv_quant's kernels, whose spec runs it); "
                                "a plan sizes its splits for max_seq_len with window=None"),
    **{("optimized", "splits = max(1, min(programs // max(units, 1), tiles // max(min_tiles, 1), MAX_SPLITS))", c): (
        "equivalent", "fewer splits (one): a launch shape, the same attention (the merge is exercised by the "
                      "plans that split, and its own mutants)") for c in ("max -> min (#2)",
                                                                          "max(a, b, ...) -> max(b, a, ...) (#2)")},
    ("optimized", "if triton is None or q.dtype not in KERNEL_DTYPES or not 1 <= q.shape[-1] <= 256:", "not in -> in"): (
        "equivalent", "the dispatch then sends float16/bfloat16 to the reference's plan and float32/float64 to the "
                      "kernels (which compute them under the interpreter): the same contract's results either way"),
    ("optimized", "acc = acc * alpha[:, None] + v_max * tl.dot((p * (v_sc / v_max)[None, :]).to(tl.float16), v)",
     "* -> /"): (
        "outside the contract", "the QUANT path of the kernel (a quantised cache): paged_attention never takes it; "
                                "kv_quant's spec does"),
}
