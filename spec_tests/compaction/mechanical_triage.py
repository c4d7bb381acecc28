"""Surviving mechanical variants of reference/compaction.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line stripped, the change).

The sample of 60 variants of 101 (``--sample 60 --profile mutants``): 59 killed; the survivor is below.
"""

TRIAGE = {
    ("reference", "for x, y in zip(a, b):", "zip(a, b, ...) -> zip(b, a, ...)"): (
        "equivalent", "the loop compares x != y and counts pairs: the same pairs in the other order give the "
                      "same count (common_prefix is symmetric)"),
}
