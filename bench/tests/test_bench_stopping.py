"""Stopping (course 01.06): a 4096-token generation with 4 stop strings, fed token by token
(the workload of bench/cases/stopping.py: the reference rescans the whole text every token, the
optimized checker a window of max_stop_len - 1 old characters plus the new ones).

    python -m pytest bench/tests/test_bench_stopping.py --benchmark-enable -s
"""
from __future__ import annotations

from bench.cases.stopping import run, workload
from bench.floors import FLOORS
from bench.timing import compare
from optimized import stopping as fast
from reference import stopping as ref

VOCAB, TOKENS = workload()


def test_bench_stopping_optimized(benchmark):
    benchmark(run, fast, VOCAB, TOKENS)


def test_bench_stopping_reference(benchmark):
    benchmark.pedantic(run, args=(ref, VOCAB, TOKENS), rounds=3, iterations=1)


def test_speedup_over_reference():
    """Reference and optimized timed alternately in one run; best of 3 each. Same stream out."""
    assert run(fast, VOCAB, TOKENS) == run(ref, VOCAB, TOKENS)
    t = compare({"ref": lambda: run(ref, VOCAB, TOKENS), "fast": lambda: run(fast, VOCAB, TOKENS)}, rounds=3,
                repeats=1, budget_ms=None, min_warmup=0, warmup_ms=0)
    best = {name: t[name].min_ms for name in t}
    ratio = best["ref"] / best["fast"]
    print(f"\nstopping 4096 tokens x 4 stop strings: reference {best['ref']:.1f} ms, "
          f"optimized {best['fast']:.1f} ms, speedup {ratio:.1f}x")
    assert ratio >= FLOORS["stopping.append_4096_tokens_4_stops"], best
