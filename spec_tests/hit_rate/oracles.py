"""Brute-force oracles of hit-rate accounting."""
from __future__ import annotations


def lcp(a, b) -> int:
    """Length of the longest common prefix of ``a`` and ``b``, naively."""
    n = 0
    while n < len(a) and n < len(b) and a[n] == b[n]:
        n += 1
    return n


def unbounded_hits(trace, block_size: int) -> list[int]:
    """With unbounded capacity nothing is evicted: request i's hit is its longest common prefix
    with any earlier prompt (whose whole pages were cached), at most len - 1, rounded down to a
    whole number of blocks."""
    out = []
    for i, p in enumerate(trace):
        best = max((min(lcp(p, q), len(q)) for q in trace[:i]), default=0)
        best = min(best, len(p) - 1)
        out.append(best - best % block_size)
    return out


def attention_pairs(new_tokens: int, cached_tokens: int) -> int:
    """Query-key pairs of a causal prefill of ``new_tokens`` after ``cached_tokens``, counted one
    query at a time."""
    return sum(p + 1 for p in range(cached_tokens, cached_tokens + new_tokens))


def prefill_time_by_token(new_tokens: int, cached_tokens: int, a: float, b: float, c: float) -> float:
    """The cost model, summed token by token: a per pass, b per token, c per attended key."""
    if new_tokens == 0:
        return 0.0
    return a + sum(b + c * (p + 1) for p in range(cached_tokens, cached_tokens + new_tokens))
