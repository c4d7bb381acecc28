"""Oracles of compaction that share nothing with reference/compaction.py.

- :func:`brute_hit`: the cache hit straight from its definition -- the largest multiple m of the
  block size with m <= len(new) - 1, m <= len(old) and new[:m] == old[:m] (every block of the hit
  has its whole prefix unchanged), found by trying every m;
- :func:`prefix_cache_hit`: the same hit measured through concept ``prefix_cache``'s reference
  (vLLM's hash-chained full blocks): serve ``old`` (allocate, mark computed, free: its blocks stay
  cached), then ``lookup(new)`` -- a second, independent cache design;
- :func:`cost`: the cost model in exact fractions.
"""
from __future__ import annotations

from fractions import Fraction


def lcp(a, b) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def brute_hit(old, new, block_size: int) -> int:
    best = 0
    for m in range(0, len(new), block_size):
        if m <= len(old) and list(new[:m]) == list(old[:m]):
            best = m
    return best


def prefix_cache_hit(old, new, block_size: int) -> int:
    from reference.prefix_cache import PrefixCache
    blocks = -(-(len(old) + len(new)) // block_size) + 2
    cache = PrefixCache(blocks, block_size)
    if old:
        cache.allocate("old", list(old))
        cache.mark_computed("old", len(old))
        cache.free("old")
    return len(cache.lookup(list(new))) * block_size


def cost(old, new, block_size: int, kv_bytes_per_token, prefill_rate) -> tuple:
    """(hit, prefill tokens, prefill bytes, resident bytes, seconds) as exact fractions."""
    hit = brute_hit(old, new, block_size)
    prefill = len(new) - hit
    bpt = Fraction(kv_bytes_per_token)
    return hit, prefill, prefill * bpt, len(new) * bpt, Fraction(prefill) / Fraction(prefill_rate)
