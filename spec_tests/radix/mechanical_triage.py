"""Surviving mechanical variants of reference/radix.py and optimized/radix.py that are not gaps of
the spec (read by ``conformance.mechanical.triage`` as data). Key: (module, the source line, the
change).

Gaps the first whole run of the reference found, closed since (no entry here): an ``evict`` that
never tells the policy of the node it frees (``policy.remove``; the policy then keeps one record
per node the cache ever held: test_evicted_nodes_leave_the_policy) and a clock that starts at 0 or
2 instead of 1 (the choice test test_clock_starts_at_one).
"""

TRIAGE = {
    ("reference", "for x, y in zip(a, b):", "zip(a, b, ...) -> zip(b, a, ...)"): (
        "equivalent", "common_prefix_length compares x != y pairwise: the count of equal leading pairs is symmetric in a, b"),
    ("reference", "common = [common_prefix_length(s.key, key) for s in segments]",
     "common_prefix_length(a, b, ...) -> common_prefix_length(b, a, ...)"): (
        "equivalent", "common_prefix_length is symmetric in its two arguments"),
    ("reference", "self._empty = _Segment(None, (), 0, [])  # the handle of an empty match", "0 -> 1"): (
        "equivalent", "the empty handle is never in self._segments, so its start is never read (only `is` compares it)"),
    ("reference", "self._empty = _Segment(None, (), 0, [])  # the handle of an empty match", "0 -> -1"): (
        "equivalent", "the empty handle is never in self._segments, so its start is never read (only `is` compares it)"),
    ("reference", "best = max(common, default=0)", "0 -> 1"): (
        "equivalent", "the default is used only when the namespace has no segment, and then no path can be formed "
                      "whatever m is (both list comprehensions run over no segment)"),
    ("reference", "best = max(common, default=0)", "0 -> -1"): (
        "equivalent", "the default is used only when the namespace has no segment, and then no path can be formed "
                      "whatever m is (both list comprehensions run over no segment)"),
}
