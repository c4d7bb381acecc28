"""Speculative verification (course 05.08-05.10): one ``verify`` call on 64 rows x γ 4 x 32,000
float32 probabilities on the 2-core CPU, reference vs optimized.

The reference casts both probability tensors to float64 and walks each row position by position;
the optimized verifier validates in the input dtype (two passes per tensor, chunked to stay in
cache), decides every acceptance by one gather, and builds one float64 residual row per row for
the draw. Workloads: spec_tests/bench/speculative_speed.py (target softmax(4 randn), draft = noisy
target, drafts drawn from the draft).

    python3 -m pytest spec_tests/bench/test_bench_speculative.py --benchmark-enable
    PYTHONPATH=. python3 spec_tests/bench/speculative_speed.py      # the table in docs/speculative.md
"""
from __future__ import annotations

import functools
import time

import pytest
import torch

from optimized import speculative as fast
from reference import speculative as ref
from spec_tests.bench.floors import FLOORS
from spec_tests.bench.speculative_speed import CONFIGS, make_inputs

KEY = "speculative.cpu_64x4x32000"


@functools.cache
def inputs(config: str) -> dict:
    return make_inputs(64, 4, 32000, config, "cpu")


@pytest.mark.parametrize("config", list(CONFIGS))
def test_bench_speculative_optimized(benchmark, config):
    benchmark(fast.verify, **inputs(config))


@pytest.mark.parametrize("config", list(CONFIGS))
def test_bench_speculative_reference(benchmark, config):
    benchmark.pedantic(ref.verify, kwargs=inputs(config), rounds=3, iterations=1)


@pytest.mark.parametrize("config", list(CONFIGS))
def test_speedup_over_reference(config):
    """Reference and optimized timed alternately in one run, best of 3 each; same tokens."""
    kw = inputs(config)
    a, b = ref.verify(**kw), fast.verify(**kw)
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.num_accepted, b.num_accepted)
    best = {"ref": float("inf"), "fast": float("inf")}
    for _ in range(3):
        for name, module in (("ref", ref), ("fast", fast)):
            t0 = time.perf_counter()
            module.verify(**kw)
            best[name] = min(best[name], time.perf_counter() - t0)
    ratio = best["ref"] / best["fast"]
    print(f"\nverify {config}, 64 x 4 x 32000: reference {best['ref'] * 1e3:.1f} ms, "
          f"optimized {best['fast'] * 1e3:.1f} ms, speedup {ratio:.1f}x")
    assert ratio >= FLOORS[KEY], best
