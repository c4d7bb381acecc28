"""Planted bugs of `eviction` (each must make an eviction test fail)."""
from conformance.declarations import Patch


MUTANTS = [
    Patch("lfu_ties_newest_first",
          "LFU breaks ties between equally frequent keys newest first (the most recently used of "
          "them is evicted), instead of least recently used first.",
          "        return (hits, last, order)\n",
          "        return (hits, -last, -order)\n"),
    Patch("hybrid_weight_sign",
          "The hybrid subtracts the frequency bonus: every extra access brings a key's eviction "
          "closer instead of extending its life.",
          "        return (last + self.weight * (hits - 1), last, order)\n",
          "        return (last - self.weight * (hits - 1), last, order)\n"),
    Patch("hybrid_ties_newest_first",
          "The hybrid breaks ties of its score newest first (the most recently used of two keys "
          "with equal last + weight * (hits - 1) is evicted), instead of least recently used first.",
          "        return (last + self.weight * (hits - 1), last, order)\n",
          "        return (last + self.weight * (hits - 1), -last, -order)\n"),
    Patch("lru_clock_not_refreshed",
          "A touch of a tracked key keeps the time of its first access (LRU degenerates to FIFO).",
          "        self._records[key] = (hits + 1, now, self._calls)\n",
          "        first = self._records[key][1] if key in self._records else now\n"
          "        self._records[key] = (hits + 1, first, self._calls)\n"),
    Patch("lfu_count_not_accumulated",
          "A touch sets the access count to 1 instead of adding one (LFU degenerates to LRU).",
          "        self._records[key] = (hits + 1, now, self._calls)\n",
          "        self._records[key] = (1, now, self._calls)\n"),
    Patch("copy_resets_hits",
          "A copy (a radix split) starts the new key with no accesses, as SGLang's _split_node "
          "creates a fresh TreeNode: the prefix half of a hot node looks cold to LFU.",
          "        self._records[dst] = (hits, last, self._calls)\n",
          "        self._records[dst] = (0, last, self._calls)\n"),
    Patch("copy_ties_with_source",
          "A copy takes its source's order too: the two keys' priorities are equal and which one "
          "victim returns depends on the order of the candidates.",
          "        hits, last, _ = self._records[src]\n        self._records[dst] = (hits, last, self._calls)\n",
          "        self._records[dst] = self._records[src]\n"),
    Patch("victim_ignores_candidates",
          "victim(candidates) returns the first key to evict among all tracked keys, even one that "
          "is not a candidate (a radix tree would evict a protected or inner node).",
          "        return min(keys, key=self.priority)\n",
          "        return min(self._records, key=self.priority)\n"),
    Patch("heap_stale_entry",
          "The optimized heap does not skip stale entries: after a key is touched again, its old "
          "(older) entry still reaches the top and victim() names it.",
          "            if record is not None and record[2] == prio[-1]:\n",
          "            if record is not None:\n", module="optimized"),
    Patch("victim_candidates_unchecked",
          "victim(candidates) takes list(candidates) unchecked: a candidates that is not iterable, "
          "or holds an unhashable key, raises Python's own TypeError ('int' object is not "
          "iterable, unhashable type: 'list'), which does not name candidates.",
          "        keys = list(self._records) if candidates is None else check_candidates(candidates)\n",
          "        keys = list(self._records) if candidates is None else list(candidates)\n"),
    # found by the bounded-exhaustive exploration (test_exhaustive.py), missed by the random tests
    Patch("copy_counts_as_access",
          "A copy (a radix split) counts as one more access of the new key: the upper half of a "
          "split node looks more frequently used than the node it was cut from.",
          "        self._records[dst] = (hits, last, self._calls)\n",
          "        self._records[dst] = (hits + 1, last, self._calls)\n"),
    Patch("same_time_touch_keeps_order",
          "A touch at the time of the key's previous touch keeps its old call order (only a later "
          "time refreshes it): among keys touched at one time, a key touched again still ranks as "
          "if touched first.",
          "        self._records[key] = (hits + 1, now, self._calls)\n",
          "        same = key in self._records and self._records[key][1] == now\n"
          "        self._records[key] = (hits + 1, now, self._records[key][2] if same else self._calls)\n"),
]
