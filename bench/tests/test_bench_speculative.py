"""Speculative verification (course 05.08-05.10): one ``verify`` call on 64 rows x γ 4 x 32,000
float32 probabilities on the 2-core CPU, reference vs optimized.

The reference casts both probability tensors to float64 and walks each row position by position;
the optimized verifier validates in the input dtype (two passes per tensor, chunked to stay in
cache), decides every acceptance by one gather, and builds one float64 residual row per row for
the draw. Workloads: bench/cases/speculative.py (target softmax(4 randn), draft = noisy target,
drafts drawn from the draft).

    python -m pytest bench/tests/test_bench_speculative.py --benchmark-enable -s
    python -m bench run --concept speculative --out speculative_speed_cpu.json   # the table in docs/speculative.md
"""
from __future__ import annotations

import functools

import pytest
import torch

from bench.cases.speculative import CONFIGS, make_inputs
from bench.floors import FLOORS
from bench.timing import compare
from optimized import speculative as fast
from reference import speculative as ref

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
    t = compare({"ref": lambda: ref.verify(**kw), "fast": lambda: fast.verify(**kw)}, rounds=3, repeats=1,
                budget_ms=None, min_warmup=0, warmup_ms=0)
    best = {name: t[name].min_ms / 1e3 for name in t}
    ratio = best["ref"] / best["fast"]
    print(f"\nverify {config}, 64 x 4 x 32000: reference {best['ref'] * 1e3:.1f} ms, "
          f"optimized {best['fast'] * 1e3:.1f} ms, speedup {ratio:.1f}x")
    assert ratio >= FLOORS[KEY], best
