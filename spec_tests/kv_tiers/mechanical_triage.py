"""Surviving mechanical variants of reference/kv_tiers.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line stripped, the change).

The sample of 60 variants (``--sample 60 --profile mutants``) killed 57. One survivor was a gap
(``order(-1)`` read the disk tier through Python's negative index: closed by the bad-input row
"order of tier -1"); the two others are below.
"""

TRIAGE = {
    ("reference", "half = raw.numel() // 2", "2 -> 1"): (
        "equivalent", "where _copy splits a block around the fault hook is the reference's instrument: every byte "
                      "is still written before the copy commits, and a fault at any split leaves the staged copy "
                      "uncommitted (the whole block written before the hook, then none, is one such split)"),
    ("reference", "half = raw.numel() // 2", "2 -> 3"): (
        "equivalent", "the same split at a third of the bytes instead of half: same bytes, same commit, same "
                      "fault behaviour through the API"),
}
