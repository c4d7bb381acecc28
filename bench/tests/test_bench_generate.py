"""Generation (course 03.01): the KV cache's speedup over recomputing the whole sequence.

The concept's "optimized" counterpart is the cached decode itself (reference.generate.generate);
the naive side is reference.generate.generate_uncached. Same model, prompt and greedy tokens
(``python -m bench run --concept generate`` measures the whole curve; docs/generate.md has the table).

    python -m pytest bench/tests/test_bench_generate.py --benchmark-enable -s

Without --benchmark-enable (the default run) each benchmark is one cheap call and the speedup
floor is checked on a short generation only for sanity (no timing assertion: a busy machine
must not fail the default run).
"""
from __future__ import annotations

import pytest
import torch

from bench.cases.generate import bench_model, bench_prompt, time_pair
from bench.floors import FLOORS


LONG = 256          # new tokens of the floor's "long output"


@pytest.fixture(autouse=True)
def _one_intra_op_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def model():
    return bench_model()


def _new_tokens(benchmark, long: int) -> int:
    return long if not benchmark.disabled else 4


def test_bench_generate_cached(benchmark, model):
    """Prefill 16 tokens + 64 cached decode steps."""
    prompt = bench_prompt()
    from reference.generate import generate
    benchmark.pedantic(generate, args=(model, prompt, _new_tokens(benchmark, 64)), rounds=3, iterations=1)


def test_bench_generate_uncached(benchmark, model):
    """64 steps, each recomputing the whole sequence (16-token prompt)."""
    prompt = bench_prompt()
    from reference.generate import generate_uncached
    benchmark.pedantic(generate_uncached, args=(model, prompt, _new_tokens(benchmark, 64)), rounds=3, iterations=1)


def test_kv_cache_speedup_floor(benchmark, model):
    """Cached vs uncached timed alternately in one run (best of 2) for a 256-token output: the
    ratio must reach FLOORS["generate.kv_cache_speedup_256_tokens"]. The floor is asserted only
    with --benchmark-enable; the default run checks a 4-token pair (equal tokens) and times nothing."""
    n, repeats = (4, 1) if benchmark.disabled else (LONG, 2)
    cached, uncached = benchmark.pedantic(time_pair, args=(model, bench_prompt(), n, repeats), rounds=1, iterations=1)
    if benchmark.disabled:
        return
    ratio = uncached / cached
    print(f"\nKV cache, {LONG} new tokens after a 16-token prompt: cached {cached * 1e3:.0f} ms, "
          f"uncached {uncached * 1e3:.0f} ms, speedup {ratio:.2f}x")
    benchmark.extra_info.update(cached_s=cached, uncached_s=uncached, speedup=ratio)
    assert ratio >= FLOORS["generate.kv_cache_speedup_256_tokens"], (cached, uncached)
