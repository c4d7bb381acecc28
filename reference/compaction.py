"""Context compaction and what it does to the prefix cache (course 07.11).

The course's claim: an agent can cut its prompt instead of speeding it up -- summarise, prune or
retrieve rather than resend -- but "rewriting history shifts every token position after the edit,
so a compaction that saves tokens can destroy the prefix cache it was meant to help". A token's
K/V depend on its position (RoPE) and on every token before it (attention), so a cached block is
reusable only if its whole prefix is unchanged: after an edit, the cache serves the longest common
token prefix of the old and the new context, rounded down to whole blocks, and everything after
the edit point is prefilled again -- even tokens that are the same as before, only shifted.

Contract
--------
A *context* is a list or tuple of token ids, ints in ``[0, 2**32)`` (concept ``radix``'s token
rule).

``compact(context, start, stop, replacement=()) -> list[int]``
    the context with ``context[start:stop]`` replaced by ``replacement``:
    ``context[:start] + replacement + context[stop:]`` (a new list; the arguments are not
    modified). Summarising is a shorter replacement, dropping an empty one, an edit any.
    ``0 <= start <= stop <= len(context)``.
``common_prefix(a, b) -> int``
    the length of the longest common prefix of two contexts.
``hit_after_edit(old, new, *, block_size=1) -> int``
    the prefix-cache hit of serving ``new`` (non-empty) right after ``old`` was served and cached
    (its whole blocks), measured through the radix cache of concept ``radix``
    (``RadixCache(page_size=block_size)``: ``insert(old)``, then ``match_prefix(new[:-1])``, the
    last token never served from cache as concept ``hit_rate`` rules). The law, in closed form:

        hit = block_size * floor(min(common_prefix(old, new), len(new) - 1) / block_size)

    (the same as a hash-chained block cache, concept ``prefix_cache``: a block hits only if every
    token up to its end is unchanged).
``edit_cost(old, new, *, block_size=1, kv_bytes_per_token=131072, prefill_rate=31250.0) -> EditCost``
    what serving ``new`` after ``old`` costs: ``hit_tokens`` (``hit_after_edit``),
    ``prefill_tokens = len(new) - hit_tokens``, ``prefill_kv_bytes = prefill_tokens x
    kv_bytes_per_token`` (the K/V written again), ``resident_kv_bytes = len(new) x
    kv_bytes_per_token`` (the K/V the context holds once served) and ``prefill_seconds =
    prefill_tokens / prefill_rate`` (a stated rate: a model of the cost, not a measurement;
    attention's quadratic term is left out). The defaults are Llama-3-8B in bf16 on one H100: 2 x
    32 layers x 8 KV heads x 128 x 2 bytes = 131,072 bytes per token, and 2 x 8e9 FLOPs per
    token at 50 % of 989 TFLOP/s = 31,250 tokens/s (concept ``hit_rate``'s ``b = 3.2e-5`` s/token).
``break_even_steps(keep, compacted, *, bandwidth=3.35e12) -> float``
    ``keep`` and ``compacted`` are two ``EditCost``s of the same next turn (the context kept as is,
    and compacted). Compaction costs ``extra = compacted.prefill_seconds - keep.prefill_seconds``
    once and saves ``saved = keep.resident_kv_bytes - compacted.resident_kv_bytes`` bytes that
    every later decode step no longer reads (decode is memory-bound: a step reads the whole
    context's K/V at ``bandwidth`` bytes/s). Returns the decode steps after which compaction has
    paid for itself: ``extra / (saved / bandwidth)``; ``0.0`` if ``extra <= 0`` (it pays at once),
    ``math.inf`` if ``extra > 0`` and ``saved <= 0`` (never). The default bandwidth is an H100
    SXM's 3.35 TB/s.

Choices the law leaves open: none; every result is law (floats for the byte counts only when
``kv_bytes_per_token`` is a float).

Bad input (``TypeError`` for the wrong kind, ``ValueError`` for a bad value, each naming the
argument): a context, ``a``, ``b`` or ``replacement`` that is not a list or tuple of ints in
``[0, 2**32)``; ``new`` empty; ``start``/``stop`` not ints with ``0 <= start <= stop <=
len(context)``; ``block_size`` not an int >= 1; ``kv_bytes_per_token`` not a finite real >= 0;
``prefill_rate`` or ``bandwidth`` not a finite real > 0; ``keep``/``compacted`` without
``prefill_seconds`` and ``resident_kv_bytes`` (``TypeError``). A bool is not an int or a real here.
"""
from __future__ import annotations

import math
from typing import NamedTuple

from reference._checks import check_int, check_real
from reference.radix import TOKEN_LIMIT, RadixCache, check_ids

__all__ = ["compact", "common_prefix", "hit_after_edit", "edit_cost", "EditCost", "break_even_steps"]
__optional__: list[str] = []

KV_BYTES_PER_TOKEN = 2 * 32 * 8 * 128 * 2   # Llama-3-8B, bf16: K and V, 32 layers, 8 KV heads of 128
PREFILL_RATE = 31250.0                     # tokens/s: 2 x 8e9 FLOPs per token at 50 % of 989 TFLOP/s
BANDWIDTH = 3.35e12                        # bytes/s: an H100 SXM's HBM3


class EditCost(NamedTuple):
    """What serving a context after another costs: tokens served from cache and prefilled, K/V bytes
    written and held, prefill seconds (see :func:`edit_cost`)."""
    hit_tokens: int
    prefill_tokens: int
    prefill_kv_bytes: float
    resident_kv_bytes: float
    prefill_seconds: float


def _positive(name: str, value) -> float:
    value = check_real(name, value, minimum=0.0)
    if value == 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    return value


def compact(context, start: int, stop: int, replacement=()) -> list[int]:
    """``context[:start] + replacement + context[stop:]`` as a new list (module docstring)."""
    check_ids("context", context, TOKEN_LIMIT)
    check_ids("replacement", replacement, TOKEN_LIMIT)
    check_int("start", start, minimum=0)
    check_int("stop", stop)
    if start > len(context):
        raise ValueError(f"start must be <= len(context) = {len(context)}, got {start}")
    if not start <= stop <= len(context):
        raise ValueError(f"stop must be in [start, len(context)] = [{start}, {len(context)}], got {stop}")
    return list(context[:start]) + list(replacement) + list(context[stop:])


def common_prefix(a, b) -> int:
    """The length of the longest common prefix of ``a`` and ``b``."""
    check_ids("a", a, TOKEN_LIMIT)
    check_ids("b", b, TOKEN_LIMIT)
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def hit_after_edit(old, new, *, block_size: int = 1) -> int:
    """The tokens of ``new`` served from a prefix cache that holds ``old`` (module docstring)."""
    check_ids("old", old, TOKEN_LIMIT)
    check_ids("new", new, TOKEN_LIMIT)
    if not new:
        raise ValueError("new must hold at least one token (its last token is always computed)")
    cache = RadixCache(page_size=check_int("block_size", block_size, minimum=1))
    cache.insert(list(old), list(range(len(old))))
    return cache.match_prefix(list(new[:-1])).length


def edit_cost(old, new, *, block_size: int = 1, kv_bytes_per_token: float = KV_BYTES_PER_TOKEN,
              prefill_rate: float = PREFILL_RATE) -> EditCost:
    """Tokens prefilled, K/V bytes written and held, and prefill seconds of serving ``new`` after
    ``old`` (module docstring)."""
    check_real("kv_bytes_per_token", kv_bytes_per_token, minimum=0.0)
    _positive("prefill_rate", prefill_rate)
    hit = hit_after_edit(old, new, block_size=block_size)
    prefill = len(new) - hit
    return EditCost(hit, prefill, prefill * kv_bytes_per_token, len(new) * kv_bytes_per_token,
                    prefill / prefill_rate)


def break_even_steps(keep, compacted, *, bandwidth: float = BANDWIDTH) -> float:
    """Decode steps after which the compacted context has paid back its extra prefill (module docstring)."""
    for name, cost in (("keep", keep), ("compacted", compacted)):
        if not (hasattr(cost, "prefill_seconds") and hasattr(cost, "resident_kv_bytes")):
            raise TypeError(f"{name} must be an EditCost (prefill_seconds, resident_kv_bytes), got {type(cost).__name__}")
        check_real(f"{name}.prefill_seconds", cost.prefill_seconds, minimum=0.0)
        check_real(f"{name}.resident_kv_bytes", cost.resident_kv_bytes, minimum=0.0)
    bandwidth = _positive("bandwidth", bandwidth)
    extra = compacted.prefill_seconds - keep.prefill_seconds
    saved = keep.resident_kv_bytes - compacted.resident_kv_bytes
    if extra <= 0:
        return 0.0
    if saved <= 0:
        return math.inf
    return extra / (saved / bandwidth)
