"""Surviving mechanical variants of reference/moe.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line, the change).

The sample of 60 of the 301 reference variants (``--sample 60``, five dev seeds) killed 57; one
survivor was a gap (the device check, untested on a CPU-only machine: closed by
``test_bad_input.py::test_moe_forward_rejects_weights_on_another_device``, "meta" weights); the
other two are below.

The sample of 30 variants of optimized/moe.py (``--mechanical optimized --sample 30``) killed 23;
two survivors were gaps, caught by some seeds only (a skipped row's placeholder expert 1, out of
range with ONE expert and drops; float64 x sent to the kernels): closed by pinned examples of
``test_moe.py::test_matches_oracle`` (one expert with drops; float64); the five others are below.

Every variant of the optimized modules (optimized/moe.py, optimized/_moe_triton.py; 298, the
``mutants`` profile): 234 killed at first; four survivors were gaps, closed by pinned cases and
killed on the re-run (the capacity rule's ``capacity < T`` read against d: eight tokens on one of
two experts, capacity 4 between d = 2 and T = 8; w_gate and w_up of different strides: the
second half of test_strided_inputs; the EP fallback path: a float64 run of test_ep_equals_dense);
the others are below: launch_config's CUDA branch (outside the contract on a CPU machine), the
dispatch's other path, bookkeeping of skipped rows and masked lanes (equivalent).
"""

_GPU = ("outside the contract", "the GPU-only branch of launch_config (a CUDA device): never taken on the CPU")
_OTHER_PATH = ("equivalent", "the dispatch then sends CPU tensors to the reference's path instead of the kernels: the "
               "same contract's result")
_MASKED = ("equivalent", "the value of a masked lane: rows outside the aligned run (row_ok false) load and store nothing")
_SAME_DIM = ("equivalent", "dimension -1 of a 1-D tensor is dimension 0")
_EMPTY = ("equivalent", "the early return is a shortcut: with no row the aligned grid has no tile, with d = 0 the "
          "down kernel's grid has no column; the zeros are returned all the same")

TRIAGE = {
    ("optimized", 'if device_type != "cuda":', "!= -> =="): (
        "equivalent", "the CPU then takes the GPU's tile sizes: other tiles, the same contract (the kernels mask "
                      "every tile edge); only speed differs"),
    ("optimized", "bm = 16 if n_rows <= 256 else 64", "16 -> 17"): (
        "outside the contract", "the GPU-only branch of launch_config (a CUDA device): never taken on the CPU"),
    ("optimized", "return dict(BLOCK_M=bm, BLOCK_N_UP=64, BLOCK_N_DOWN=64, BLOCK_K_UP=64, BLOCK_K_DOWN=64, num_warps=4,",
     "4 -> 5"): ("outside the contract", "the GPU-only branch of launch_config; the interpreter ignores num_warps"),
    ("optimized", "if n == 0 or d == 0:", "0 -> -1"): (
        "equivalent", "with no row the aligned grid has no tile (max_tiles = min(n, ...) = 0): nothing is launched "
                      "and the zeros are returned all the same"),
    ("reference", "slot = kept.reshape(-1).nonzero()[:, 0]", "0 -> -1"): (
        "equivalent", "nonzero() of a 1-D tensor has one column: [:, -1] is [:, 0]"),
    ("reference", "sel = (expert_of_row == e).nonzero()[:, 0]", "0 -> -1"): (
        "equivalent", "nonzero() of a 1-D tensor has one column: [:, -1] is [:, 0]"),
}

# The sweep of every variant of the optimized modules (2026-12-07; the module doc).
TRIAGE.update({
    **{("optimized", "@functools.lru_cache(maxsize=256)", c): ("equivalent", "a cache's size: same answers")
       for c in ("256 -> 255", "256 -> 257")},
    ("optimized", "if triton is None or x.dtype not in KERNEL_DTYPES:", "is -> is not"): _OTHER_PATH,
    ("optimized", "if not kernel_supports(rows):", "not x -> x"): _OTHER_PATH,
    **{("optimized", "bm = 16 if n_rows <= 256 else 64", c): _GPU
       for c in ("16 -> 15", "256 -> 255", "256 -> 257", "64 -> 63", "64 -> 65", "<= -> <")},
    **{("optimized", "return dict(BLOCK_M=bm, BLOCK_N_UP=64, BLOCK_N_DOWN=64, BLOCK_K_UP=64, BLOCK_K_DOWN=64, num_warps=4,", c): _GPU
       for c in ("4 -> 3", "64 -> 63", "64 -> 63 (#2)", "64 -> 63 (#3)", "64 -> 63 (#4)", "64 -> 65", "64 -> 65 (#2)",
                 "64 -> 65 (#3)", "64 -> 65 (#4)")},
    **{("optimized", "num_stages=3)", c): _GPU for c in ("3 -> 2", "3 -> 4")},
    **{("optimized", "num_stages=1)", c): ("equivalent", "the interpreter's num_stages: ignored under the interpreter")
       for c in ("1 -> 0", "1 -> 2")},
    **{("optimized", "return dict(BLOCK_M=16, BLOCK_N_UP=16, BLOCK_N_DOWN=16, BLOCK_K_UP=16, BLOCK_K_DOWN=16, num_warps=4,", c): (
        "equivalent", "num_warps under the interpreter: ignored") for c in ("4 -> 3", "4 -> 5")},
    ("optimized", "cfg = config or launch_config(n, d, f, x.device.type, shared_memory_per_block(x.device))", "launch_config(a, b, ...) -> launch_config(b, a, ...)"): (
        "equivalent", "launch_config's CPU branch reads neither n_rows nor d: the same tiles"),
    ("optimized", "counts = torch.zeros(num_experts + 1, dtype=torch.int64, device=device)", "1 -> 2"): (
        "equivalent", "one more bin past the skipped rows' bin E, dropped by counts[:num_experts] like it"),
    ("optimized", "counts.scatter_add_(0, expert_of_row, torch.ones_like(expert_of_row))", "0 -> -1"): _SAME_DIM,
    ("optimized", "first_row = torch.cumsum(counts, 0) - counts", "0 -> -1"): _SAME_DIM,
    ("optimized", "tile_end = torch.cumsum(tiles, 0)", "0 -> -1"): _SAME_DIM,
    ("optimized", "safe = torch.where(valid, expert, 0)", "0 -> -1"): (
        "equivalent", "the index of a skipped row (expert E): its destination is replaced by the spare slot just after"),
    ("optimized", "sorted_rows = torch.full((slots + 1,), n, dtype=torch.int64, device=device)   # + a slot for skipped rows", "1 -> 2"): (
        "equivalent", "one more spare slot, cut off with the first by sorted_rows[:slots]"),
    ("optimized", "max_tiles = min(n, -(-n // block_m) + num_experts)", "min -> max"): (
        "equivalent", "more tiles than the bound: the extra ones get expert E (searchsorted past the end) and are skipped"),
    ("optimized", "max_tiles = min(n, -(-n // block_m) + num_experts)", "min(a, b, ...) -> min(b, a, ...)"): (
        "equivalent", "min is symmetric"),
    **{("optimized", "if n == 0 or d == 0:", c): _EMPTY for c in ("0 -> -1 (#2)", "or -> and")},
    ("optimized", "if capacity < x.shape[0]:", "< -> <="): (
        "equivalent", "at capacity = T the rule keeps every choice (positions are below T): applying it changes nothing"),
    ("optimized", "k = _check_k(k, w_gate.shape[0])", "0 -> -1"): (
        "equivalent", "k is then checked against d; expert_capacity, called next with the real E, rejects k > E with "
                      "the same ValueError naming k"),
    **{("optimized__moe_triton", "if e < num_experts:", c): (
        "equivalent", "a tile of expert E (an unused tile of the bound) then runs with every row masked: no store "
                      "reaches the output") for c in ("< -> <=", "< -> <= (#2)")},
    **{("optimized__moe_triton", "safe = tl.where(row_ok, rows, 0).to(tl.int64)", c): _MASKED for c in ("0 -> -1", "0 -> 1")},
    **{("optimized__moe_triton", "tokens = tl.where(row_ok, rows // top_k, 0).to(tl.int64)", c): _MASKED
       for c in ("0 -> -1", "0 -> 1")},
    ("optimized__moe_triton", "tokens = tl.where(row_ok, rows // top_k, 0).to(tl.int64)", "// -> /"): (
        "equivalent", "rows and top_k are positive: the true quotient truncated by .to(int64) is the floor"),
})
