"""Surviving mechanical variants of reference/routing.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line, the change).

The first uniform sample (40 variants of 192, seed default, ``--profile mutants``) killed 38; the
two survivors are below.
"""

TRIAGE = {
    ("reference", "if self.capacity is not None and cache.total > self.capacity:", "> -> >="): (
        "equivalent", "at total == capacity the variant calls cache.evict(0), which frees nothing (radix's contract)"),
    ("reference", "self._next_slot = [0] * n", "0 -> 1"): (
        "equivalent", "the slot ids a replica inserts are not in the contract ('fresh slots'): no observable of "
                      "Router or simulate_routing reads them; only their count and distinctness matter, kept by the shift"),
}
