"""Surviving mechanical variants of reference/best_of_n.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line, the change).

The uniform sample of 60 variants (``--sample 60``, default sample seed, ``dev`` profile) killed 56;
the four survivors are below, each equivalent: no input of the contract tells it from the original.
"""

TRIAGE = {
    ("reference", "for i in range(1, len(scores)):", "1 -> 0"): (
        "equivalent", "the extra first iteration compares scores[0] > scores[0], which is False: best stays 0"),
    ("reference", "if c == 0:", "0 -> -1"): (
        "equivalent", "the early return is a shortcut: with c = 0 the count below reaches every wrong answer's "
                      "0 votes as a tie (k == c) and never places the n >= 1 wrong votes, so the share is 0 either way"),
    ("reference", "return _vote(answers, [1] * len(answers))", "1 -> 2"): (
        "equivalent", "every vote weighs 2 instead of 1: the sums scale uniformly, so the order and the ties are the same"),
    ("reference", "for k in range(min(c, wrong_votes - used) + 1):      # this answer's votes: at most c",
     "min(a, b, ...) -> min(b, a, ...)"): (
        "equivalent", "min is symmetric"),
}
