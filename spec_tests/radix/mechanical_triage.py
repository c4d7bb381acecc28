"""Surviving mechanical variants of reference/radix.py and optimized/radix.py that are not gaps of
the spec (read by ``conformance.mechanical.triage`` as data). Key: (module, the source line, the
change).

Gaps the first whole run of the reference found, closed since (no entry here): an ``evict`` that
never tells the policy of the node it frees (``policy.remove``; the policy then keeps one record
per node the cache ever held: test_evicted_nodes_leave_the_policy) and a clock that starts at 0 or
2 instead of 1 (the choice test test_clock_starts_at_one).

The optimized tree's survivors of the first whole run are all equivalent (below): the slot
checker's fallback is unreachable, and ``_common`` is a binary search whose bounds only need to
bracket the answer (``_common`` is called only where the child's first page matches and the key
does not continue with the child's whole run, so ``a[:4]`` matches and ``a[:4*m]`` differs from
``q[pos:pos+4*m]`` for every ``4*m > min(len(a), len(q) - pos)``: the search finds the same
largest matching ``m`` from any ``lo`` in ``[-1, 1]`` and any ``hi`` at least the true one; checked
on 140,812 random cases against the original).
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
    # -- optimized/radix.py ------------------------------------------------------------------
    ("optimized", 'check_ids("slots", slots, SLOT_LIMIT)', 'drop `check_ids("slots", slots, SLOT_LIMIT)`'): (
        "equivalent", "a check repeated: check_slots, called just before, starts with the same "
                      "check_ids('slots', slots, SLOT_LIMIT)"),
    ("optimized", 'raise AssertionError("unreachable: struct rejected slots the checker accepts")',
     'drop `raise AssertionError("unreachable: struct rejected slots the`'): (
        "equivalent", "unreachable: check_slots passes only for a list/tuple of len n_tokens of ints (not bools) in "
                      "[0, 2**63), which struct packs as 'q' with min >= 0, so the fast path has returned already"),
    ("optimized", "self._empty = _Root(self, None)  # the handle of an empty match (never in _roots)",
     "_Root(a, b, ...) -> _Root(b, a, ...)"): (
        "equivalent", "the empty handle's owner and namespace are never read: _node returns None on "
                      "`handle is self._empty` before any check, and it is never in _roots nor any node's parent"),
    ("optimized", "while pos < end:", "< -> <="): (
        "equivalent", "at pos == end the extra iteration looks up children.get(q[end:end + page]) = get(b''), "
                      "and every child key is a whole page of >= 4 bytes: None, break, the same return"),
    ("optimized", 'lo, hi = 0, min(len(a), len(q) - pos) >> 2   # a[:4 * lo] matches; a[:4 * (hi + 1)] does not', "0 -> 1"): (
        "equivalent", "lo = 1 still satisfies the search's invariant: _common runs only when the first page "
                      "(>= 1 token) matches, and then hi >= 1 (module docstring; checked on random cases)"),
    ("optimized", 'lo, hi = 0, min(len(a), len(q) - pos) >> 2   # a[:4 * lo] matches; a[:4 * (hi + 1)] does not', "0 -> -1"): (
        "equivalent", "lo = -1: the first probe is mid >= 0, whose test holds (a[:0] == q[pos:pos]), and the "
                      "search converges to the same largest matching m (module docstring)"),
    ("optimized", 'lo, hi = 0, min(len(a), len(q) - pos) >> 2   # a[:4 * lo] matches; a[:4 * (hi + 1)] does not', "min -> max"): (
        "equivalent", "a larger hi: every m with 4*m > min(len(a), len(q) - pos) fails the slice test (slices of "
                      "different lengths, or a vs q[pos:pos+len(a)], which differ where _common is called)"),
    ("optimized", 'lo, hi = 0, min(len(a), len(q) - pos) >> 2   # a[:4 * lo] matches; a[:4 * (hi + 1)] does not', "min(a, b, ...) -> min(b, a, ...)"): (
        "equivalent", "min of two ints is symmetric"),
    ("optimized", 'lo, hi = 0, min(len(a), len(q) - pos) >> 2   # a[:4 * lo] matches; a[:4 * (hi + 1)] does not', "2 -> 1"): (
        "equivalent", "hi in half-tokens is >= the true hi, and every m past the true bound fails the slice test "
                      "(as for min -> max)"),
    ("optimized", 'lo, hi = 0, min(len(a), len(q) - pos) >> 2   # a[:4 * lo] matches; a[:4 * (hi + 1)] does not', "- -> +"): (
        "equivalent", "len(q) + pos >= len(q) - pos (pos >= 0): a larger hi, past which every m fails the slice "
                      "test (as for min -> max)"),
    ("optimized", "if n_tokens == 0 or not self._leaves:", "0 -> -1"): (
        "equivalent", "n_tokens is checked >= 0 just above, so the variant only lets evict(0) past: it reads "
                      "policy.priority of each candidate leaf (a pure read of tracked keys) and the loop "
                      "`while n < 0` never runs: [] and no change"),
    ("optimized", "count += 1", "+= -> -="): (
        "equivalent", "count only breaks ties in the heap's (priority, count, node) entries, and the policy "
                      "protocol makes the priorities of distinct tracked keys never equal (reference/eviction.py)"),
    # -- rerun s1 (survivors of the optimized tree's sample) ------------------------------------
    ("optimized", "count += 1", "drop `count += 1`"): (
        "equivalent", "count only breaks ties in the heap's (priority, count, node) entries, and the policy "
                      "protocol makes the priorities of distinct tracked keys never equal (reference/eviction.py); "
                      "each node is pushed at most once, so no entry is compared past its priority"),
    ("optimized", "count += 1", "1 -> 0"): (
        "equivalent", "count only breaks ties in the heap's (priority, count, node) entries, and the policy "
                      "protocol makes the priorities of distinct tracked keys never equal (reference/eviction.py); "
                      "each node is pushed at most once, so no entry is compared past its priority"),
    ("optimized", 'raise AssertionError("unreachable: struct rejected tokens the checker accepts")',
     'drop `raise AssertionError("unreachable: struct rejected tokens th`'): (
        "equivalent", "unreachable: check_ids('tokens', ...) passes only for a list/tuple of Python ints (not bools) "
                      "in [0, 2**32), every one of which struct packs as 'I', so the fast path has returned already; "
                      "for anything struct rejects the checker raises first"),
    ("optimized", "break", "break -> continue"): (
        "equivalent", "after the split the walk stands on the new node with pos += m, m the common run cut to whole "
                      "pages: either pos == len(q) (the loop ends) or the page of q at pos holds the first differing "
                      "token, and the new node's one child starts with the child's page there, so "
                      "children.get(...) is None: break, the same (node, pos, path)"),
    ("optimized", "mid = (lo + hi + 1) >> 1", "1 -> 2 (#2)"): (
        "equivalent", "(lo + hi + 2) >> 1 = floor((lo + hi) / 2) + 1 lies in (lo, hi] whenever lo < hi, so each "
                      "probe keeps the invariant (a[:4 lo] matches, a[:4 (hi + 1)] does not) and shrinks the range: "
                      "the search ends at the same largest matching m (checked on 88,010 random calls of _common)"),
}
