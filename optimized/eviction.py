"""Eviction policies with ``victim()`` from a heap (same contract as reference/eviction.py, whose
docstring is the contract: the protocol, the records, each policy's priority).

The reference scans every tracked key for ``victim()``: O(keys) per eviction, which a cache that
asks for the next victim among all its entries (the hash cache's free queue) pays on every
allocation under memory pressure. Here ``victim()`` with no candidates reads the top of a binary
heap of ``(priority, key)`` entries. A touch does not update the heap in place: it pushes a new
entry, and an entry whose ``order`` (the last element of every priority) is no longer its key's
current ``order`` is stale and skipped when it reaches the top (lazy deletion); the heap is
rebuilt from the records when stale entries outnumber live ones. Priorities are unique, so an
entry's key is never compared. The heap is only built on the first ``victim()`` without
candidates: a radix cache, which orders its own candidate leaves by ``priority``, pays a dict
update per touch and nothing more. ``victim(candidates)`` scans the candidates, as the reference.
"""
from __future__ import annotations

from heapq import heapify, heappop, heappush

from reference._checks import check_int
from reference.eviction import check_candidates, check_key

__all__ = ["LRU", "LFU", "Hybrid"]


class LRU:
    """Least recently used first: priority ``(last, order)``; ``victim()`` from a lazy heap."""

    def __init__(self):
        self._records: dict = {}   # key -> (hits, last, order)
        self._now = 0
        self._calls = 0
        self._heap: list | None = None  # (priority, key), built by the first victim()

    def _prio(self, hits: int, last: int, order: int) -> tuple:
        return (last, order)

    def _set(self, key, record: tuple) -> None:
        self._records[key] = record
        heap = self._heap
        if heap is not None:
            heappush(heap, (self._prio(*record), key))
            if len(heap) > 2 * len(self._records) + 64:
                self._rebuild()

    def _rebuild(self) -> None:
        self._heap = [(self._prio(*r), k) for k, r in self._records.items()]
        heapify(self._heap)

    def touch(self, key, now: int) -> None:
        check_key("key", key)
        if type(now) is not int or now < self._now:
            check_int("now", now, minimum=0)
            if now < self._now:
                raise ValueError(f"now must not decrease: got {now} after {self._now}")
        record = self._records.get(key)
        self._set(key, (1 if record is None else record[0] + 1, now, self._calls))
        self._now = now
        self._calls += 1

    def copy(self, src, dst) -> None:
        check_key("src", src)
        check_key("dst", dst)
        record = self._records.get(src)
        if record is None:
            raise KeyError(f"src {src!r} is not tracked")
        if dst in self._records:
            raise ValueError(f"dst {dst!r} is already tracked")
        self._set(dst, (record[0], record[1], self._calls))
        self._calls += 1

    def remove(self, key) -> None:
        check_key("key", key)
        if self._records.pop(key, None) is None:
            raise KeyError(f"key {key!r} is not tracked")
        if self._heap is not None and len(self._heap) > 2 * len(self._records) + 64:
            self._rebuild()

    def priority(self, key) -> tuple:
        check_key("key", key)
        record = self._records.get(key)
        if record is None:
            raise KeyError(f"key {key!r} is not tracked")
        return self._prio(*record)

    def victim(self, candidates=None):
        records = self._records
        if candidates is not None:
            keys = check_candidates(candidates)
            if not keys:
                raise ValueError("candidates is empty: nothing to evict")
            for key in keys:
                if key not in records:
                    raise KeyError(f"candidate {key!r} is not tracked")
            return min(keys, key=self.priority)
        if self._heap is None:
            self._rebuild()
        heap = self._heap
        while heap:
            prio, key = heap[0]
            record = records.get(key)
            if record is not None and record[2] == prio[-1]:
                return key
            heappop(heap)  # stale: the key was touched, copied over or removed since
        raise ValueError("candidates is None and no key is tracked: nothing to evict")


class LFU(LRU):
    """Least frequently used first, ties by recency: priority ``(hits, last, order)``."""

    def _prio(self, hits: int, last: int, order: int) -> tuple:
        return (hits, last, order)


class Hybrid(LRU):
    """Recency extended by frequency: priority ``(last + weight * (hits - 1), last, order)``."""

    def __init__(self, weight: int = 8):
        super().__init__()
        self.weight = check_int("weight", weight, minimum=0)

    def _prio(self, hits: int, last: int, order: int) -> tuple:
        return (last + self.weight * (hits - 1), last, order)
