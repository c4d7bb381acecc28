"""Number formats (course 02.08, 05.02) on the CPU: encode then decode 10M float32 values.

Ours is ``optimized.formats.encode(x, fmt)`` then ``decode(codes, fmt, dtype=torch.float32)``
(torch casts where they are the same function, bit manipulation elsewhere, decode by table or
view); the peer is ml_dtypes' ``x.astype(t).astype(np.float32)`` (numpy's float16 for fp16, and
``np.rint`` + clip + astype for int8, whose plain cast truncates). The values are N(0, 1) times
a spread of powers of two, so every binade, the subnormals and the overflow of each format are
exercised. Both sides produce the same codes and values (``check``). Timed alternately, best of 3,
on ONE thread each (ml_dtypes is single-threaded; torch's call runs under ``torch.set_num_threads(1)``,
restored after each call): a per-core comparison, and on a busy 2-core machine torch's idle OpenMP
workers otherwise cost ~15 ms per elementwise op.

    python -m bench run --concept formats --device cpu --out formats.json
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import torch

from bench.runner import Case, P
from optimized import formats as fast

N = 10_000_000
ML = {"fp8_e4m3": ml_dtypes.float8_e4m3fn, "fp8_e5m2": ml_dtypes.float8_e5m2, "bf16": ml_dtypes.bfloat16,
      "fp16": np.float16, "fp4_e2m1": ml_dtypes.float4_e2m1fn, "int8": np.int8}
SPREAD = {"fp8_e4m3": 8, "fp8_e5m2": 16, "bf16": 16, "fp16": 16, "fp4_e2m1": 3, "int8": 7}


def workload(fmt: str, n: int = N) -> torch.Tensor:
    g = torch.Generator().manual_seed(24)
    k = SPREAD[fmt]
    return torch.randn(n, generator=g) * torch.exp2(torch.randint(-k, k + 1, (n,), generator=g).float())


def ours(x: torch.Tensor, fmt: str):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        codes = fast.encode(x, fmt)
        return codes, fast.decode(codes, fmt, dtype=torch.float32)
    finally:
        torch.set_num_threads(threads)


def theirs(x: np.ndarray, fmt: str):
    with np.errstate(all="ignore"):
        stored = np.clip(np.rint(x), -128, 127).astype(np.int8) if fmt == "int8" else x.astype(ML[fmt])
        return stored, stored.astype(np.float32)


BEST_OF_3 = dict(rounds=3, repeats=1, min_warmup=1, warmup_ms=0, budget_ms=None)
CASES = [
    Case(f"encode+decode {n // 1_000_000 or n}{'M' if n >= 1_000_000 else ''} float32 {fmt}", dict(n=n, fmt=fmt),
         (P("optimized"), P("ml_dtypes")), metric="ms", devices=("cpu",), tags=tags, timing=BEST_OF_3)
    for fmt in ("fp8_e4m3", "fp8_e5m2", "bf16", "fp16", "fp4_e2m1", "int8")
    for n, tags in ((N, ()), (100_000, ("smoke",)))
]


def setup(case, device):
    x = workload(case.params["fmt"], case.params["n"])
    return x, x.numpy()


def check(problem, case, device) -> dict:
    x, xn = problem
    fmt = case.params["fmt"]
    codes, values = ours(x, fmt)
    stored, back = theirs(xn, fmt)
    bits = stored.view(np.uint16 if stored.itemsize == 2 else np.uint8).astype(np.int64)
    same_codes = np.array_equal(codes.to(torch.int64).numpy(), bits)
    same_values = np.array_equal(values.numpy(), back, equal_nan=True)
    return dict(ok=bool(same_codes and same_values), what="the same codes and values as ml_dtypes")


BUILDERS = {
    "optimized": lambda problem, case, device: lambda: ours(problem[0], case.params["fmt"]),
    "ml_dtypes": lambda problem, case, device: lambda: theirs(problem[1], case.params["fmt"]),
}
