"""Eviction policies for prefix caches (course 03.09-03.11; chapter 6): LRU, LFU and a hybrid.

A prefix cache keeps KV entries of finished requests so that later requests sharing a prefix skip
its prefill; when memory runs low it must drop some. *Which* entry goes is the eviction policy.
The policies here are objects that a cache of either design plugs in: the radix cache
(``reference/radix.py``: keys are tree nodes) and the hash cache of full blocks (``prefix_cache``:
keys are blocks). A policy never sees tokens or memory; it sees keys and a logical clock.

The protocol (what a cache calls)
---------------------------------
``policy.touch(key, now)``
    an access to ``key`` at logical time ``now`` (an int >= 0; the times a policy is given never
    decrease). A key not tracked yet starts being tracked. ``key`` is any hashable object.
``policy.copy(src, dst)``
    ``dst`` (not tracked) starts being tracked with ``src``'s access history: its number of
    accesses and the time of its last access. A radix tree calls it when it splits a node: the two
    halves have been accessed exactly as often, and as recently, as the node they were cut from.
``policy.remove(key)``
    stop tracking ``key`` (evicted, or no longer evictable). A key tracked again later starts a
    new history: nothing about it is remembered.
``policy.priority(key) -> tuple``
    ``key``'s place in the eviction order: the key with the smallest priority is evicted first.
    Priorities of distinct tracked keys are never equal, and a key's priority changes only when it
    is touched (so a cache may keep candidates in a heap between touches).
``policy.victim(candidates=None)``
    the key to evict first: ``min(candidates, key=priority)``; ``None`` means every tracked key.
    A query: it removes nothing (the cache calls ``remove`` when it evicts).

What each key's record holds: ``hits``, the number of touches since it started being tracked
(copied from ``src`` by ``copy``); ``last``, the ``now`` of its last touch (copied by ``copy``);
``order``, the number of the ``touch``/``copy`` call that last set its record (each call of either
takes the next number, starting at 0). ``order`` is unique, so priorities never tie.

``LRU()``
    ``(last, order)``: least recently used first; among keys touched at the same ``now``, the one
    touched first (a copy ranks after keys touched at the same time).
``LFU()``
    ``(hits, last, order)``: fewest accesses first, ties by recency as LRU (SGLang's "lfu").
``Hybrid(weight=8)``
    ``(last + weight * (hits - 1), last, order)``: recency, where every access after the first
    extends a key's life by ``weight`` clock ticks. ``weight=0`` is LRU; a weight larger than the
    span of the clock orders like LFU. It keeps a shared system prompt through a burst of one-off
    requests (which LRU would let push it out) without keeping a once-popular, now-stale entry
    forever (which LFU does).

The law is the order the priorities induce (which key ``victim`` names, how keys sort by
``priority``, no two equal); the tuples themselves as written above (the values of ``order``,
counting touch/copy calls from 0; ``hits - 1`` in the hybrid) are a choice, checked only at
token-exact (``test_priority_values_small_scope``).

Bad input, checked before anything changes: a ``now`` that is not an int (``TypeError``; a bool
is not an int) or is negative or earlier than a time already given (``ValueError``), naming
``now``; an unhashable ``key``, ``src`` or ``dst`` (``TypeError`` naming that argument);
``remove``/``priority`` of a key, or ``copy`` of a ``src``, that is not tracked (``KeyError``
whose message shows the key's ``repr``); ``copy`` onto a tracked ``dst`` (``ValueError`` naming
``dst``); ``victim`` with an empty ``candidates``, or with ``None`` while nothing is tracked
(``ValueError`` naming ``candidates``), with a ``candidates`` that is not an iterable or holds an
unhashable key (``TypeError`` naming ``candidates``), or with an untracked candidate
(``KeyError`` showing its ``repr``); ``weight`` not an int (``TypeError``) or negative
(``ValueError``), naming ``weight``.

This reference keeps one dict of records and scans for ``victim`` (O(keys));
``optimized/eviction.py`` answers ``victim()`` from a heap (O(log keys) amortized).
"""
from __future__ import annotations

from reference._checks import check_int

__all__ = ["LRU", "LFU", "Hybrid"]  # the contract: what an implementation must provide
__optional__: list[str] = []


def check_key(name: str, key) -> None:
    """``key`` must be hashable (a dict key); ``TypeError`` naming ``name`` otherwise."""
    try:
        hash(key)
    except TypeError:
        raise TypeError(f"{name} must be hashable, got {type(key).__name__}") from None


def check_candidates(candidates) -> list:
    """``candidates`` as a list of hashable keys; ``TypeError`` naming ``candidates`` otherwise."""
    try:
        keys = list(candidates)
    except TypeError:
        raise TypeError(f"candidates must be an iterable of keys or None, got {type(candidates).__name__}") from None
    for key in keys:
        check_key("candidates", key)
    return keys


class LRU:
    """Least recently used first: priority ``(last, order)`` (see the module docstring)."""

    def __init__(self):
        self._records: dict = {}   # key -> (hits, last, order)
        self._now = 0              # the latest time given to touch
        self._calls = 0            # the next touch/copy number

    def touch(self, key, now: int) -> None:
        """Record an access to ``key`` at logical time ``now`` (tracking it if it is new)."""
        check_key("key", key)
        check_int("now", now, minimum=0)
        if now < self._now:
            raise ValueError(f"now must not decrease: got {now} after {self._now}")
        hits = self._records[key][0] if key in self._records else 0
        self._records[key] = (hits + 1, now, self._calls)
        self._now = now
        self._calls += 1

    def copy(self, src, dst) -> None:
        """Track ``dst`` with ``src``'s history (hits and last access): a radix split."""
        check_key("src", src)
        check_key("dst", dst)
        if src not in self._records:
            raise KeyError(f"src {src!r} is not tracked")
        if dst in self._records:
            raise ValueError(f"dst {dst!r} is already tracked")
        hits, last, _ = self._records[src]
        self._records[dst] = (hits, last, self._calls)
        self._calls += 1

    def remove(self, key) -> None:
        """Stop tracking ``key``; its history is forgotten."""
        check_key("key", key)
        if key not in self._records:
            raise KeyError(f"key {key!r} is not tracked")
        del self._records[key]

    def _record(self, key) -> tuple:
        check_key("key", key)
        if key not in self._records:
            raise KeyError(f"key {key!r} is not tracked")
        return self._records[key]

    def priority(self, key) -> tuple:
        """``key``'s place in the eviction order: the smallest priority is evicted first."""
        hits, last, order = self._record(key)
        return (last, order)

    def victim(self, candidates=None):
        """The candidate evicted first (``None``: every tracked key). Removes nothing."""
        keys = list(self._records) if candidates is None else check_candidates(candidates)
        if not keys:
            raise ValueError("candidates is empty: nothing to evict" if candidates is not None
                             else "candidates is None and no key is tracked: nothing to evict")
        for key in keys:
            if key not in self._records:
                raise KeyError(f"candidate {key!r} is not tracked")
        return min(keys, key=self.priority)


class LFU(LRU):
    """Least frequently used first, ties by recency: priority ``(hits, last, order)``."""

    def priority(self, key) -> tuple:
        """``key``'s place in the eviction order: the smallest priority is evicted first."""
        hits, last, order = self._record(key)
        return (hits, last, order)


class Hybrid(LRU):
    """Recency extended by frequency: priority ``(last + weight * (hits - 1), last, order)``."""

    def __init__(self, weight: int = 8):
        super().__init__()
        self.weight = check_int("weight", weight, minimum=0)

    def priority(self, key) -> tuple:
        """``key``'s place in the eviction order: the smallest priority is evicted first."""
        hits, last, order = self._record(key)
        return (last + self.weight * (hits - 1), last, order)


def is_policy(obj) -> bool:
    """Does ``obj`` have the protocol's methods (touch, copy, remove, priority, victim)?"""
    return all(callable(getattr(obj, m, None)) for m in ("touch", "copy", "remove", "priority", "victim"))

