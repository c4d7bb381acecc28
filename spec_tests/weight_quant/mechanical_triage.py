"""Surviving mechanical variants of weight_quant that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line, the change).

Gap closed since (no entry here): the float32-range check of the weights read ``max`` of |w|;
``min`` survived because the bad-input row made EVERY weight 1e300 (row "one weight past float32"
now sets one: kills reference mech 214).

"Outside the contract": the cuda branch of optimized ``launch_config`` (and ``_pick_block_k``,
which only it calls) cannot run on a CPU machine; the configurations it returns are exercised under
the interpreter by spec_tests/bundled/test_weight_quant_internals.py and on the GPU by the spec.
"""

_GPU = ("outside the contract", "the cuda branch of launch_config: unreachable on CPU (the CPU branch returns first); "
        "its configurations are run under the interpreter by spec_tests/bundled/test_weight_quant_internals.py")
_TILES = ("equivalent", "a tile or split count: the grid covers M, N and K whatever the tile (cdiv), so only the "
          "launch shape changes, not the result")
_INTERP = ("equivalent", "num_warps / num_stages of the CPU configuration: the Triton interpreter ignores both")

TRIAGE = {
    ("optimized", 'tiles = k // cfg["BLOCK_K"]', "// -> /"): _GPU,
    ("optimized", "for bk in (preferred, 128, 64, 32):", "128 -> 127"): _GPU,
    ("optimized", 'cfg["SPLIT_K"] = max(1, min(tiles // 2, -(-2 * sms // programs), 16)) if programs < sms else 1',
     "1 -> 0 (#2)"): _GPU,
    ("optimized", 'cfg["SPLIT_K"] = max(1, min(tiles // 2, -(-2 * sms // programs), 16)) if programs < sms else 1',
     "// -> /"): _GPU,
    ("optimized", "cfg = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=_pick_block_k(64, group), DOT=True, num_warps=8, "
                  "num_stages=3)", "64 -> 63"): _GPU,
    ("optimized", "cfg = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=_pick_block_k(64, group), DOT=True, num_warps=8, "
                  "num_stages=3)", "3 -> 2"): _GPU,
    ("optimized", "cfg = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=_pick_block_k(128, group), DOT=True, num_warps=4, "
                  "num_stages=4)", "4 -> 5 (#2)"): _GPU,
    ("optimized", "def launch_config(m: int, n: int, k: int, group: int, device_type: str, sms: int = 132) -> dict:",
     "132 -> 131"): ("equivalent", "the default SM count (callers pass the device's): only the split-K count the cuda "
                                   "branch derives from it changes, a launch shape, not the result"),
    ("optimized", "cfg = dict(BLOCK_M=16, BLOCK_N=64, BLOCK_K=_pick_block_k(128, group), DOT=True, num_warps=4, "
                  "num_stages=4)", "128 -> 127"): _GPU,
    ("optimized", "if m <= 16:", "16 -> 15"): _GPU,
    ("optimized", "per_split = -(-tiles // max(1, min(split, tiles)))", "max -> min"): _TILES,
    ("optimized", "cfg = dict(BLOCK_M=16, BLOCK_N=64, BLOCK_K=_pick_block_k(128, group), DOT=True, num_warps=4, "
                  "num_stages=4)", "4 -> 5"): _GPU,
    ("optimized", "cfg = dict(BLOCK_M=16, BLOCK_N=64, BLOCK_K=_pick_block_k(128, group), DOT=True, num_warps=4, "
                  "num_stages=4)", "_pick_block_k(a, b, ...) -> _pick_block_k(b, a, ...)"): _GPU,
    ("optimized", "if bk <= preferred and group % bk == 0:", "0 -> 1"): _GPU,
    ("optimized", "if bk <= preferred and group % bk == 0:", "and -> or"): _GPU,
    ("optimized", "dot = m > 2", "> -> >="): ("equivalent", "two rows take the tensor-core tile path instead of the GEMV "
                                                          "path: both compute the same product (the spec's tolerance "
                                                          "rule holds for either; only the launch changes)"),
    ("optimized", "per_split = -(-tiles // max(1, min(split, tiles)))", "max(a, b, ...) -> max(b, a, ...)"): (
        "equivalent", "max is symmetric"),
    ("optimized", "@functools.lru_cache(maxsize=1024)", "1024 -> 1025"): ("equivalent", "a cache's size: memory, "
                                                                                      "not results"),
    ("optimized", "for bk in (preferred, 128, 64, 32):", "64 -> 65"): _GPU,
    ("optimized", "return 32", "32 -> 33"): _GPU,
    ("optimized", "num_warps=4)", "4 -> 5"): _INTERP,
    ("optimized", "bm = 16 if dot else (1 if m == 1 else 2)", "== -> !="): _TILES,
    ("optimized", "per_split = -(-tiles // max(1, min(split, tiles)))", "1 -> 2"): _TILES,
    ("optimized", "num_warps=4, num_stages=1)", "4 -> 5"): _INTERP,
    ("optimized", "num_warps=4, num_stages=1)", "1 -> 0"): _INTERP,
    ("optimized", "buf = _WORKSPACE[device] = torch.empty(max(numel, 1 << 16), dtype=torch.float32, device=device)",
     "16 -> 17"): ("equivalent", "the workspace's minimum size: memory, not results"),
    ("reference", "zero = torch.round(-lo / scale.double()).clamp(0, maxq).to(torch.int64)", "0 -> -1"): (
        "equivalent", "-lo / s >= 0 because lo = min(w_min, 0) <= 0: the clamp's lower bound never binds (module doc)"),
    ("optimized__weight_quant_triton", "k_stop = tl.minimum(k_start + k_per_split, K)",
     "minimum(a, b, ...) -> minimum(b, a, ...)"): (
        "equivalent", "tl.minimum of two integers is symmetric"),
    # ---- the device CPUs' uniform sample (278 variants): more of launch_config's CUDA branch, CPU tile choices
    ('optimized', 'return 32', '32 -> 31'): _GPU,
    ('optimized', 'programs = -(-n // cfg["BLOCK_N"]) * -(-m // cfg["BLOCK_M"])', '* -> /'): _GPU,
    ('optimized', 'for bk in (preferred, 128, 64, 32):', '128 -> 129'): _GPU,
    ('optimized', 'for bk in (preferred, 128, 64, 32):', '64 -> 63'): _GPU,
    ('optimized', 'for bk in (preferred, 128, 64, 32):', '32 -> 31'): _GPU,
    ('optimized', 'tiles = k // bk', '// -> / (#2)'): _GPU,
    ('optimized', 'if m <= 16:', '<= -> <'): _GPU,
    ('optimized', 'cfg["SPLIT_K"] = max(1, min(tiles // 2, -(-2 * sms // programs), 16)) if programs < sms else 1', '< -> <='): _GPU,
    ('optimized', 'cfg["SPLIT_K"] = max(1, min(tiles // 2, -(-2 * sms // programs), 16)) if programs < sms else 1', 'max -> min'): _GPU,
    ('optimized', 'elif m <= 64:', '<= -> <'): _GPU,
    ('optimized', 'programs = -(-n // cfg["BLOCK_N"]) * -(-m // cfg["BLOCK_M"])', '// -> /'): _GPU,
    ('optimized', 'if bk <= preferred and group % bk == 0:', '% -> //'): _GPU,
    ('optimized', 'elif m <= 64:', '64 -> 65'): _GPU,
    ('optimized', 'elif m <= 64:', '64 -> 63'): _GPU,
    ('optimized', 'cfg["SPLIT_K"] = max(1, min(tiles // 2, -(-2 * sms // programs), 16)) if programs < sms else 1', '16 -> 15'): _GPU,
    ('optimized', 'cfg["SPLIT_K"] = max(1, min(tiles // 2, -(-2 * sms // programs), 16)) if programs < sms else 1', '2 -> 1'): _GPU,
    ('optimized', 'cfg["SPLIT_K"] = max(1, min(tiles // 2, -(-2 * sms // programs), 16)) if programs < sms else 1', '* -> /'): _GPU,
    ('optimized', 'cfg = dict(BLOCK_M=16, BLOCK_N=64, BLOCK_K=_pick_block_k(128, group), DOT=True, num_warps=4, num_stages=4)', '16 -> 17'): _GPU,
    ('optimized', 'cfg = dict(BLOCK_M=16, BLOCK_N=64, BLOCK_K=_pick_block_k(128, group), DOT=True, num_warps=4, num_stages=4)', '16 -> 15'): _GPU,
    ('optimized', 'cfg = dict(BLOCK_M=16, BLOCK_N=64, BLOCK_K=_pick_block_k(128, group), DOT=True, num_warps=4, num_stages=4)', '64 -> 65'): _GPU,
    ('optimized', 'cfg = dict(BLOCK_M=16, BLOCK_N=64, BLOCK_K=_pick_block_k(128, group), DOT=True, num_warps=4, num_stages=4)', '128 -> 129'): _GPU,
    ('optimized', 'cfg = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=_pick_block_k(128, group), DOT=True, num_warps=4, num_stages=4)', '64 -> 65 (#2)'): _GPU,
    ('optimized', 'cfg = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=_pick_block_k(128, group), DOT=True, num_warps=4, num_stages=4)', '64 -> 63 (#2)'): _GPU,
    ('optimized', 'cfg = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=_pick_block_k(128, group), DOT=True, num_warps=4, num_stages=4)', '4 -> 5'): _GPU,
    ('optimized', 'cfg = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=_pick_block_k(128, group), DOT=True, num_warps=4, num_stages=4)', '128 -> 127'): _GPU,
    ('optimized', 'cfg = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=_pick_block_k(64, group), DOT=True, num_warps=8, num_stages=3)', '128 -> 129'): _GPU,
    ('optimized', 'cfg = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=_pick_block_k(64, group), DOT=True, num_warps=8, num_stages=3)', '128 -> 127 (#2)'): _GPU,
    ('optimized', 'cfg = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=_pick_block_k(64, group), DOT=True, num_warps=8, num_stages=3)', '_pick_block_k(a, b, ...) -> _pick_block_k(b, a, ...)'): _GPU,
    ('optimized', 'cfg = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=_pick_block_k(64, group), DOT=True, num_warps=8, num_stages=3)', '8 -> 7'): _GPU,
    ('optimized', 'cfg = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=_pick_block_k(64, group), DOT=True, num_warps=8, num_stages=3)', '3 -> 4'): _GPU,
    ('optimized', 'config = launch_config(m, n, k, group, x.device.type, sm_count(x.device))', 'launch_config(a, b, ...) -> launch_config(b, a, ...)'): _TILES,
    ('optimized', 'bm = 16 if dot else (1 if m == 1 else 2)', '2 -> 1'): _TILES,
    ('optimized', 'bm = 16 if dot else (1 if m == 1 else 2)', '1 -> 2 (#2)'): _TILES,
    ('optimized', 'return dict(BLOCK_M=bm, BLOCK_N=16, BLOCK_K=bk, DOT=dot, SPLIT_K=2 if tiles >= 2 else 1,', '2 -> 3'): _TILES,
    ('optimized', 'return dict(BLOCK_M=bm, BLOCK_N=16, BLOCK_K=bk, DOT=dot, SPLIT_K=2 if tiles >= 2 else 1,', '2 -> 1'): _TILES,
    ('optimized', 'return dict(BLOCK_M=bm, BLOCK_N=16, BLOCK_K=bk, DOT=dot, SPLIT_K=2 if tiles >= 2 else 1,', '1 -> 2'): _TILES,
    ('optimized', 'GROUP_MULTIPLE = 32', '32 -> 31'): (
        'equivalent', 'a group size the kernels accept: with 31 every tested group (multiples of 2) falls back to the '
                      "reference's dequantize-then-matmul, the same contract's results (only speed differs)"),
    ('optimized', 'if triton is None or x.dtype not in KERNEL_DTYPES or group_size % GROUP_MULTIPLE:', 'is -> is not'): (
        'equivalent', "kernel_supports then answers False: every call takes the reference's dequantize-then-matmul, "
                      'the same results'),
    **{('optimized', l, c): ('equivalent', 'with one split the kernel writes the answer into out (SPLIT False) and '
                                        'the reduction then adds one partial, out itself, back into out: unchanged')
       for l, c in (('part = _workspace(x2.device, split * m * n) if split > 1 else out', '> -> >='),
                    ('if split > 1:', '> -> >='), ('if split > 1:', '1 -> 0'),
                    ('GROUP=group, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, DOT=dot, SPLIT=split > 1, **cfg)', '> -> >='))},
    ('optimized', 'dot = m > 2', '2 -> 3'): ('equivalent', 'which path computes 3-row products under the interpreter: '
                                                         'both paths compute x w^T (each has its own mutants)'),
    ('optimized', 'dot = m > 2', '2 -> 1'): ('equivalent', 'which path computes 2-row products under the interpreter: '
                                                         'both paths compute x w^T (each has its own mutants)'),
    ('optimized', 'buf = _WORKSPACE[device] = torch.empty(max(numel, 1 << 16), dtype=torch.float32, device=device)',
     'max(a, b, ...) -> max(b, a, ...)'): ('equivalent', 'max of two ints is symmetric'),
    ('optimized', 'part = _workspace(x2.device, split * m * n) if split > 1 else out', '* -> / (#2)'): (
        'outside the contract', 'the workspace size as a float: compared only with the cached buffer (at least 65,536 '
                                'elements, more than any CPU case needs), so only a GPU-sized split-K launch reaches '
                                'torch.empty with it (there it fails): unreachable on a CPU machine'),
}
