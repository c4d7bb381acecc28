"""Stopping (course 01.06): a 4096-token generation with 4 stop strings, fed token by token.

The reference re-decodes and rescans the whole text every token (O(length) per token, O(n^2) per
generation); the optimized checker decodes only the new bytes and searches a window of
max_stop_len - 1 old characters plus the new ones (O(1) in the length). The stop strings share
prefixes with the text ("\\n\\nUser" forms, ":" never comes), so the hold-back logic runs, but no
stop string completes: all 4096 tokens are checked.

    python3 -m pytest spec_tests/bench/test_bench_stopping.py --benchmark-enable
"""
from __future__ import annotations

import random
import time

import pytest

from optimized import stopping as fast
from reference import stopping as ref
from spec_tests.bench.floors import FLOORS

N_TOKENS = 4096
STOP = ("\n\nUser:", "</answer>", "###END", "Observation:")


def workload(n_tokens: int = N_TOKENS):
    """A seeded vocabulary of word pieces (no ':' or '>' and no 'END', so no stop string can
    complete), multi-byte characters split across tokens, and an ``n_tokens``-token stream."""
    rng = random.Random(1234)
    words = ["the", " model", " token", "ation", " User", "User", "Observ", "answer", " ##", "#",
             "\n", "\n\n", "<", "</", " ", ".", ",", "caf", "\u00e9", "\u20ac"]
    letters = "abcdefghijklmnopqrstuvwxyz"
    words += ["".join(rng.choice(letters) for _ in range(rng.randint(1, 6))) for _ in range(200)]
    vocab = [w.encode() for w in words] + [b"\xe2\x82", b"\xac", b"\xc3", b"\xa9"]
    tokens = [rng.randrange(len(vocab)) for _ in range(n_tokens)]
    return vocab, tokens


VOCAB, TOKENS = workload()


def run(module, vocab=VOCAB, tokens=TOKENS) -> str:
    checker = module.StopChecker(module.StopParams(max_tokens=len(tokens), stop=STOP), vocab)
    shown = []
    for t in tokens:
        step = checker.append(t)
        shown.append(step.emitted)
    assert checker.finish_reason == "length" and checker.num_tokens == len(tokens)
    return "".join(shown)


def test_bench_stopping_optimized(benchmark):
    benchmark(run, fast)


def test_bench_stopping_reference(benchmark):
    benchmark.pedantic(run, args=(ref,), rounds=3, iterations=1)


def test_speedup_over_reference():
    """Reference and optimized timed alternately in one run; best of 3 each. Same stream out."""
    assert run(fast) == run(ref)
    best = {"ref": float("inf"), "fast": float("inf")}
    for _ in range(3):
        for name, module in (("ref", ref), ("fast", fast)):
            t0 = time.perf_counter()
            run(module)
            best[name] = min(best[name], time.perf_counter() - t0)
    ratio = best["ref"] / best["fast"]
    print(f"\nstopping 4096 tokens x 4 stop strings: reference {best['ref'] * 1e3:.1f} ms, "
          f"optimized {best['fast'] * 1e3:.1f} ms, speedup {ratio:.1f}x")
    assert ratio >= FLOORS["stopping.append_4096_tokens_4_stops"], best
