"""Formats (course 02.08, 05.02): encode+decode of 10M float32 values, ours vs ml_dtypes, on one
CPU thread each (the workload of bench/cases/formats.py).

    python -m pytest bench/tests/test_bench_formats.py -s
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("ml_dtypes")

from bench.cases.formats import ours, theirs, workload  # noqa: E402
from bench.timing import compare  # noqa: E402


@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp8_e5m2", "fp4_e2m1"])
def test_same_codes_and_ratio(fmt):
    """Same codes and values as ml_dtypes on the bench workload (1M values here), and the ratio of
    the two timed alternately in one run (printed; no floor: ml_dtypes is a C++ cast, ours a
    sequence of torch ops, and the ratio is recorded in docs/formats.md)."""
    x = workload(fmt, 1_000_000)
    xn = x.numpy()
    codes, values = ours(x, fmt)
    stored, back = theirs(xn, fmt)
    assert np.array_equal(codes.to(torch.int64).numpy(), stored.view(np.uint8).astype(np.int64))
    assert np.array_equal(values.numpy(), back, equal_nan=True)
    t = compare({"ours": lambda: ours(x, fmt), "ml_dtypes": lambda: theirs(xn, fmt)}, rounds=3, repeats=1,
                budget_ms=None, min_warmup=1, warmup_ms=0)
    best = {k: t[k].min_ms for k in t}
    print(f"\n{fmt} encode+decode 1M float32: ours {best['ours']:.1f} ms, ml_dtypes {best['ml_dtypes']:.1f} ms, "
          f"ratio {best['ml_dtypes'] / best['ours']:.2f}x")
