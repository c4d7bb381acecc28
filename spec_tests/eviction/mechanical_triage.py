"""Surviving mechanical variants of reference/eviction.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line, the change).

Gaps the first run found, closed since (no entry here): a ``copy`` that does not advance the call
counter (two keys then share a priority: the exhaustive test checks distinct priorities); the
priority of an unhashable key (a bad-input row); the default weight 8 +-1 (pinned exactly); the
counter's start and step and the ``hits - 1`` of the hybrid (the choice test of the priority tuples).
"""

TRIAGE = {
    ("reference", 'raise KeyError(f"src {src!r} is not tracked")', "drop `raise KeyError(f'src {src!r} is not tracked')`"): (
        "equivalent", "the lookup self._records[src] that follows raises KeyError(src), whose message is src's repr; "
                      "it differs only when dst is tracked too, where the contract orders neither error first"),
    ("reference", 'raise KeyError(f"key {key!r} is not tracked")', "drop `raise KeyError(f'key {key!r} is not tracked')`"): (
        "equivalent", "remove's `del self._records[key]` that follows raises KeyError(key), whose message is key's repr"),
    ("reference", 'raise KeyError(f"key {key!r} is not tracked")', "drop `raise KeyError(f'key {key!r} is not tracked')` (#2)"): (
        "equivalent", "_record's `return self._records[key]` that follows raises KeyError(key), whose message is key's repr"),
    ("reference", 'raise KeyError(f"candidate {key!r} is not tracked")', "drop `raise KeyError(f'candidate {key!r} is not tracked')`"): (
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
}
