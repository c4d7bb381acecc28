"""Oracles of `eviction`, by definition, never incremental.

``record(events, key, end)`` derives a key's record (hits, last, order) from the whole history of
protocol calls, replayed from the start each time: the key's current life begins after its last
``remove``; its hits are the touches in that life (plus the source's hits at the moment of a
``copy`` that started it), ``last`` the time of its last touch (or the source's, for a copy not
touched since), ``order`` the number of touch/copy calls before the call that last set it.

``textbook_cache`` simulates a fixed-capacity cache the way each policy is usually taught, without
the protocol: LRU as a list in recency order (hit: move to the end; evict the front), LFU as
counts with the recency list breaking ties, the hybrid as its score with the same tie rule.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Event:
    kind: str          # "touch", "copy" or "remove"
    key: object        # the touched / removed key, or copy's dst
    now: int = 0       # touch only
    src: object = None  # copy only


def _calls_before(events: list[Event], i: int) -> int:
    return sum(1 for e in events[:i] if e.kind in ("touch", "copy"))


def record(events: list[Event], key, end: int | None = None):
    """``(hits, last, order)`` of ``key`` after ``events[:end]``, or None if it is not tracked."""
    end = len(events) if end is None else end
    start = 0
    for i in range(end):
        if events[i].kind == "remove" and events[i].key == key:
            start = i + 1
    hits, last, order = 0, None, None
    for i in range(start, end):
        e = events[i]
        if e.kind == "touch" and e.key == key:
            hits, last, order = hits + 1, e.now, _calls_before(events, i)
        elif e.kind == "copy" and e.key == key:
            src_hits, src_last, _ = record(events, e.src, i)
            hits, last, order = src_hits, src_last, _calls_before(events, i)
    return None if order is None else (hits, last, order)


def score(kind: str, weight: int, rec: tuple) -> tuple:
    """Each policy's definition (reference/eviction.py's module docstring)."""
    hits, last, order = rec
    if kind == "LRU":
        return (last, order)
    if kind == "LFU":
        return (hits, last, order)
    return (last + weight * (hits - 1), last, order)


def eviction_order(events: list[Event], kind: str, weight: int, keys) -> list:
    """``keys`` (all tracked) from the first to be evicted to the last."""
    return sorted(keys, key=lambda k: score(kind, weight, record(events, k)))


def textbook_cache(kind: str, weight: int, accesses: list[tuple], capacity: int) -> list[tuple]:
    """For each ``(key, now)`` access: ``(hit, evicted key or None)``."""
    recency: list = []            # cached keys, least recently used first
    count: dict = {}
    last: dict = {}
    out = []
    for key, now in accesses:
        if key in recency:
            recency.remove(key)
            recency.append(key)
            count[key] += 1
            last[key] = now
            out.append((True, None))
            continue
        evicted = None
        if len(recency) == capacity:
            if kind == "LRU":
                evicted = recency[0]
            elif kind == "LFU":
                evicted = min(recency, key=lambda k: (count[k], recency.index(k)))
            else:
                evicted = min(recency, key=lambda k: (last[k] + weight * (count[k] - 1), recency.index(k)))
            recency.remove(evicted)
            del count[evicted], last[evicted]
        recency.append(key)
        count[key], last[key] = 1, now
        out.append((False, evicted))
    return out
