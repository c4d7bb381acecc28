"""Surviving mechanical variants of reference/hit_rate.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line, the change).

First measured on a sample of 20 of the 189 variants, then on all of them (2026-12-06).

Gaps the whole run found, closed since (no entry here): a ``simulate`` that takes any iterable
(or None) as ``requests`` (bad-input rows "requests an empty dict", "requests None"); a passed
``cache`` of another page size accepted (row "cache of another page size"); the boundary rows
``cached_tokens=-1`` and simulate's ``capacity=-1``; simulate refusing the legal ``capacity=0``
(test_simulate_capacity_zero_caches_nothing); every request inserted with the same slot ids
(test_inserted_slots_are_fresh)."""

TRIAGE = {
    ("reference", 'L = check_int("prompt_tokens", prompt_tokens, minimum=1)', "1 -> 0"): (
        "equivalent", "time_saved(0, h) then fails `h > L - 1` (every h >= 0 exceeds -1): still a ValueError, "
                      "whose message names prompt_tokens ('hit_tokens must be <= prompt_tokens - 1 = -1')"),
    ("reference", "self.cache, self.capacity, self.next_slot = cache, capacity, 0", "0 -> 1"): (
        "equivalent", "slot ids are only required fresh (test_inserted_slots_are_fresh): a counter from 1 still "
                      "gives every inserted token its own id, far below the radix slot limit 2**63; hits read tokens only"),
    ("reference", "if self.capacity is not None and self.cache.total > self.capacity:", "> -> >="): (
        "equivalent", "the extra call is evict(0) (total == capacity), which by the radix contract frees nothing "
                      "(it frees until 0 tokens are freed) and touches no clock"),
    ("reference", "hits, start, finish = [0] * n, [0.0] * n, [0.0] * n", "0 -> 1"): (
        "equivalent", "dead initial values: the loop serves every index of range(n) exactly once (pending starts as "
                      "range(n), each pick is removed) and sets hits[pick] each time"),
    ("reference", "hits, start, finish = [0] * n, [0.0] * n, [0.0] * n", "0 -> -1"): (
        "equivalent", "dead initial values: the loop serves every index of range(n) exactly once (pending starts as "
                      "range(n), each pick is removed) and sets hits[pick] each time"),
}
