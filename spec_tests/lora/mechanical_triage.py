"""Surviving mechanical variants of reference/lora.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line, the change).

The sample of 60 of the reference's variants (``--sample 60``, five dev seeds) killed 57; two
survivors were gaps (merge_lora's tensor checks of lora_a and lora_b: no bad-input row passed a
non-tensor there; closed by the rows "list lora_a" and "list lora_b"); the third is below.

The optimized modules (optimized/lora.py, optimized/_lora_triton.py; 252 variants, all run with
the ``mutants`` profile after the split-K shrink): 166 killed at first; three survivors were gaps,
closed by pinned cases (a rank above 16 and not a power of two, one output column:
test_matches_oracle's rank-24 example; d_in = 0: test_zero_width_input) and killed on the re-run;
the 83 others are below: launch_config's CUDA branch and the SM count (outside the contract on a
CPU machine), tile and split choices under the interpreter, the dispatch's other path, and values
of masked lanes (equivalent).
"""

_GPU = ("outside the contract", "launch_config's CUDA branch: a GPU's tiles and splits, unreachable on a CPU machine "
        "(the spec runs the kernels under the interpreter; the sm_90 compile check and the GPU benchmark cover it)")
_TILE_CPU = ("equivalent", "a launch shape under the interpreter (tiles, splits, warps): the same contract computed; "
             "every split non-empty and summed")
_OTHER_PATH = ("equivalent", "the dispatch then sends CPU tensors to the reference's path instead of the kernels: the "
               "same contract's result")
_SMS = ("outside the contract", "the SM count: read only on the GPU (launch_config's CUDA branch), 0 on the CPU and unused there")
_EMPTY = ("equivalent", "the early return is a shortcut: without it an empty batch / d_out launches empty grids and a "
          "batch of no adapters (every id -1) leaves every row the base product, the same y")
_MASKED = ("equivalent", "the value of a masked lane: rows outside the batch or of id -1 load nothing with it "
           "(use / row_ok masks every load and store it reaches)")

TRIAGE = {
    ("reference", "if adapter_ids.shape[0] != batch:", "0 -> -1"): (
        "equivalent", "adapter_ids is checked to be 1-D just before: shape[-1] is shape[0]"),
}

# The sweep of every variant of the optimized modules (2026-12-07; the module doc).
TRIAGE.update({
    ("optimized", 'if triton is None or x.dtype not in KERNEL_DTYPES:', "is -> is not"): _OTHER_PATH,
    ("optimized", "adapters, rank = lora_a.shape[0], lora_a.shape[1]", "0 -> 1"): (
        "equivalent", "adapters then reads the rank (>= 1, checked): only the early return's adapters == 0 test "
                      "uses it, and a batch of no adapters computes the base alone through the kernels too"),
    ("optimized", "adapters, rank = lora_a.shape[0], lora_a.shape[1]", "0 -> -1"): (
        "equivalent", "adapters then reads d_in: only the early return uses it (d_in = 0 returns the base, which is "
                      "exactly 0 there, test_zero_width_input; N = 0 computes the base alone through the kernels)"),
    ("optimized", 'if device_type != "cuda":', "!= -> =="): _TILE_CPU,
    ("optimized", "want = 2", "2 -> 1"): _TILE_CPU,
    ("optimized", "want = 2", "2 -> 3"): _TILE_CPU,
    ("optimized", "cfg = dict(BLOCK_M=8, BLOCK_R=block_r, BLOCK_K=16, BLOCK_N=32, num_warps=4)", "4 -> 3"): _TILE_CPU,
    ("optimized", "cfg = dict(BLOCK_M=8, BLOCK_R=block_r, BLOCK_K=16, BLOCK_N=32, num_warps=4)", "4 -> 5"): _TILE_CPU,
    ("optimized", "block_r = max(16, triton.next_power_of_2(rank))", "max(a, b, ...) -> max(b, a, ...)"): (
        "equivalent", "max is symmetric"),
    ("optimized", 'steps = max(1, triton.cdiv(d_in, cfg["BLOCK_K"]))   # BLOCK_K steps over d_in (one for d_in = 0)',
     "max(a, b, ...) -> max(b, a, ...)"): ("equivalent", "max is symmetric"),
    ("optimized", 'steps = max(1, triton.cdiv(d_in, cfg["BLOCK_K"]))   # BLOCK_K steps over d_in (one for d_in = 0)',
     "1 -> 2"): ("equivalent", "at least two steps: for d_in <= BLOCK_K a second split over no columns, which "
                               "writes zeros that the expand adds"),
    ("optimized", "per_split = triton.cdiv(steps, min(want, steps))    # steps per split; the last split non-empty",
     "cdiv(a, b, ...) -> cdiv(b, a, ...)"): _TILE_CPU,
    ("optimized", "per_split = triton.cdiv(steps, min(want, steps))    # steps per split; the last split non-empty",
     "min -> max"): _TILE_CPU,
    ("optimized", "per_split = triton.cdiv(steps, min(want, steps))    # steps per split; the last split non-empty",
     "min(a, b, ...) -> min(b, a, ...)"): ("equivalent", "min is symmetric"),
    **{("optimized", "if batch == 0 or d_out == 0 or adapters == 0:", c): _EMPTY
       for c in ("0 -> -1", "0 -> -1 (#2)", "0 -> -1 (#3)", "or -> and")},
    **{("optimized", "MAX_SPLIT_K = 32   # the expand adds SPLIT_K partials per row (an unrolled loop): bounded", c): _GPU
       for c in ("32 -> 31", "32 -> 33")},
    **{("optimized", "def launch_config(rank: int, d_in: int, d_out: int, batch: int, device_type: str, sms: int = 132) -> dict:", c): _SMS
       for c in ("132 -> 131", "132 -> 133")},
    **{("optimized", "block_k = max(16, 2048 // block_r)", c): _GPU
       for c in ("// -> /", "16 -> 15", "16 -> 17", "2048 -> 2047", "2048 -> 2049", "max -> min", "max(a, b, ...) -> max(b, a, ...)")},
    **{("optimized", "cfg = dict(BLOCK_M=4, BLOCK_R=block_r, BLOCK_K=block_k, BLOCK_N=block_k, num_warps=4)", c): _GPU
       for c in ("4 -> 3", "4 -> 3 (#2)", "4 -> 5", "4 -> 5 (#2)")},
    **{("optimized", 'cfg["BLOCK_K"] //= 2', c): _GPU for c in ("//= -> /=", "2 -> 1", "2 -> 3", 'drop `cfg["BLOCK_K"] //= 2`')},
    ("optimized", 'programs = triton.cdiv(batch, cfg["BLOCK_M"])', "cdiv(a, b, ...) -> cdiv(b, a, ...)"): _GPU,
    **{("optimized", "want = min(triton.next_power_of_2(triton.cdiv(max(sms, 1), max(programs, 1))), MAX_SPLIT_K)", c): _GPU
       for c in ("1 -> 0", "1 -> 0 (#2)", "1 -> 2", "1 -> 2 (#2)", "cdiv(a, b, ...) -> cdiv(b, a, ...)", "max -> min",
                 "max -> min (#2)", "max(a, b, ...) -> max(b, a, ...)", "max(a, b, ...) -> max(b, a, ...) (#2)", "min -> max",
                 "min(a, b, ...) -> min(b, a, ...)")},
    **{("optimized", 'while cfg["BLOCK_K"] > 32 and triton.cdiv(d_in, cfg["BLOCK_K"]) < want:', c): _GPU
       for c in ("32 -> 31", "32 -> 33", "< -> <=", "> -> >=", "and -> or", "cdiv(a, b, ...) -> cdiv(b, a, ...)")},
    **{("optimized__lora_triton", "a_base = A + tl.where(use, adapter, 0)[:, None, None] * sae + offs_r[None, :, None] * sar", c): _MASKED
       for c in ("0 -> -1", "0 -> 1")},
    **{("optimized__lora_triton", "b = tl.load(B + tl.where(use, adapter, 0)[:, None, None] * sbe + offs_n[None, :, None] * sbn", c): _MASKED
       for c in ("0 -> -1", "0 -> 1")},
    **{("optimized__lora_triton", "adapter = tl.load(IDS + rows, mask=row_ok, other=-1).to(tl.int64)", c): _MASKED
       for c in ("1 -> 0", "1 -> 0 (#2)", "1 -> 2", "1 -> 2 (#2)")},
    ("optimized__lora_triton", "k_stop = tl.minimum(k_start + k_per_split, d_in)", "minimum(a, b, ...) -> minimum(b, a, ...)"): (
        "equivalent", "tl.minimum is symmetric"),
    ("optimized__lora_triton", "r_ok = offs_r < rank", "< -> <="): (
        "equivalent", "the shrink then also computes r = rank (one row past A's rank) into the workspace's padding "
                      "column, which the expand never reads (its own r_ok): the output is unchanged"),
    ("optimized__lora_triton", "r_ok = offs_r < rank", "< -> <= (#2)"): (
        "equivalent", "the expand then also reads column r = rank of v, the 0 that the shrink wrote into the "
                      "workspace's padding (its masked lanes), times a finite B element: adds 0"),
    ("optimized__lora_triton", "use = row_ok & (adapter >= 0)", "0 -> -1"): (
        "equivalent", "the shrink then computes a v for rows of id -1 (from A[-1]'s address) that the expand never "
                      "uses: its own use mask keeps those rows the base"),
})
