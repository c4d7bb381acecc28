"""Surviving mechanical variants of reference/eviction.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line, the change).

Gaps the first run found, closed since (no entry here): a ``copy`` that does not advance the call
counter (two keys then share a priority: the exhaustive test checks distinct priorities); the
priority of an unhashable key (a bad-input row); the default weight 8 +-1 (pinned exactly); the
counter's start and step and the ``hits - 1`` of the hybrid (the choice test of the priority tuples).

optimized/eviction.py's survivors of the first whole run were all equivalent (below): the heap's
compaction threshold (when stale entries are dropped is memory, not order) and checks repeated later.
"""

_COMPACTION = ("the compaction rebuilds the heap from the records (every entry live); skipped, or run at another "
               "threshold, the stale entries stay and victim() pops them (record[2] != prio[-1]) before naming the "
               "same least live key: only the heap's memory differs, and the contract states none")

TRIAGE = {
    ("reference", 'raise KeyError(f"src {src!r} is not tracked")', 'drop `raise KeyError(f"src {src!r} is not tracked")`'): (
        "equivalent", "the lookup self._records[src] that follows raises KeyError(src), whose message is src's repr; "
                      "it differs only when dst is tracked too, where the contract orders neither error first"),
    ("reference", 'raise KeyError(f"key {key!r} is not tracked")', 'drop `raise KeyError(f"key {key!r} is not tracked")`'): (
        "equivalent", "remove's `del self._records[key]` that follows raises KeyError(key), whose message is key's repr"),
    ("reference", 'raise KeyError(f"key {key!r} is not tracked")', 'drop `raise KeyError(f"key {key!r} is not tracked")` (#2)'): (
        "equivalent", "_record's `return self._records[key]` that follows raises KeyError(key), whose message is key's repr"),
    ("reference", 'raise KeyError(f"candidate {key!r} is not tracked")', 'drop `raise KeyError(f"candidate {key!r} is not tracked")`'): (
        "equivalent", "min(keys, key=self.priority) that follows calls priority on the untracked candidate, which "
                      "raises KeyError showing its repr; victim removes nothing, so no state differs"),
    ("reference", "self._now = 0              # the latest time given to touch", "0 -> -1"): (
        "equivalent", "the first touch's `now < self._now` can never fire for -1 or 0: check_int already rejects "
                      "now < 0, and _now is overwritten by that touch"),
    ("reference", 'check_int("now", now, minimum=0)', "0 -> -1"): (
        "equivalent", "now = -1 then fails `now < self._now` (0 at least): still a ValueError naming now, state unchanged; "
                      "now < -1 is still rejected by check_int"),
    ("reference", 'return all(callable(getattr(obj, m, None)) for m in ("touch", "copy", "remove", "priority", "victim"))',
     "getattr(a, b, ...) -> getattr(b, a, ...)"): (
        "outside the contract", "is_policy is no name of eviction's contract (__all__: LRU, LFU, Hybrid); only "
                                "reference/radix.py's policy check calls it"),
    ("reference", 'raise ValueError("candidates is empty: nothing to evict" if candidates is not None', "is not -> is"): (
        "equivalent", "it swaps which of two messages victim's ValueError carries; both name candidates (message wording)"),
    ('optimized', 'self._rebuild()', 'drop `self._rebuild()`'): (
        'equivalent', _COMPACTION),
    ('optimized', 'self._rebuild()', 'drop `self._rebuild()` (#3)'): (
        'equivalent', _COMPACTION),
    ('optimized', 'if len(heap) > 2 * len(self._records) + 64:', '> -> >='): (
        'equivalent', _COMPACTION),
    ('optimized', 'if len(heap) > 2 * len(self._records) + 64:', '+ -> -'): (
        'equivalent', _COMPACTION),
    ('optimized', 'if len(heap) > 2 * len(self._records) + 64:', '64 -> 65'): (
        'equivalent', _COMPACTION),
    ('optimized', 'if len(heap) > 2 * len(self._records) + 64:', '64 -> 63'): (
        'equivalent', _COMPACTION),
    ('optimized', 'if len(heap) > 2 * len(self._records) + 64:', '2 -> 3'): (
        'equivalent', _COMPACTION),
    ('optimized', 'if len(heap) > 2 * len(self._records) + 64:', '2 -> 1'): (
        'equivalent', _COMPACTION),
    ('optimized', 'if self._heap is not None and len(self._heap) > 2 * len(self._records) + 64:', '> -> >='): (
        'equivalent', _COMPACTION),
    ('optimized', 'if self._heap is not None and len(self._heap) > 2 * len(self._records) + 64:', '+ -> -'): (
        'equivalent', _COMPACTION),
    ('optimized', 'if self._heap is not None and len(self._heap) > 2 * len(self._records) + 64:', '64 -> 65'): (
        'equivalent', _COMPACTION),
    ('optimized', 'if self._heap is not None and len(self._heap) > 2 * len(self._records) + 64:', '64 -> 63'): (
        'equivalent', _COMPACTION),
    ('optimized', 'if self._heap is not None and len(self._heap) > 2 * len(self._records) + 64:', '2 -> 3'): (
        'equivalent', _COMPACTION),
    ('optimized', 'if self._heap is not None and len(self._heap) > 2 * len(self._records) + 64:', '2 -> 1'): (
        'equivalent', _COMPACTION),
    ('optimized', 'if len(heap) > 2 * len(self._records) + 64:', '* -> /'): (
        'equivalent', "in _set the key just set makes len(self._records) >= 1 (no division by zero); " + _COMPACTION),
    ("optimized", "if type(now) is not int or now < self._now:", "< -> <="): (
        "equivalent", "now == self._now (an int) then enters the check branch, where check_int passes (now >= 0) and "
                      "`now < self._now` is false: nothing raises, as before"),
    ("optimized", "if now < self._now:", "< -> <="): (
        "equivalent", "the branch is entered only for a non-int now (check_int raises TypeError first) or now < self._now, "
                      "where <= is true as well: now == self._now never reaches it"),
    ("optimized", 'raise KeyError(f"candidate {key!r} is not tracked")', 'drop `raise KeyError(f"candidate {key!r} is not tracked")`'): (
        "equivalent", "min(keys, key=self.priority) that follows calls priority on the untracked candidate, which "
                      "raises KeyError showing its repr; victim removes nothing, so no state differs"),
    ("optimized", 'check_int("now", now, minimum=0)', "0 -> 1"): (
        "equivalent", "check_int runs only for a non-int now (TypeError either way) or now < self._now; an int now = 0 "
                      "there has self._now >= 1 and raises ValueError naming now either way, state unchanged"),
    ("optimized", 'check_int("now", now, minimum=0)', "0 -> -1"): (
        "equivalent", "now = -1 then fails `now < self._now` (0 at least): still a ValueError naming now, state unchanged; "
                      "now < -1 is still rejected by check_int"),
}
