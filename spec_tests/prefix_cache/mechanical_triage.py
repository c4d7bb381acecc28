"""Surviving mechanical variants of reference/prefix_cache.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line, the change)."""

TRIAGE = {
    ("reference", 'raise KeyError(f"seq {seq!r} is not allocated (never allocated, or already freed)")',
     "drop `raise KeyError(f'seq {seq!r} is not allocated (never allocat` (#3)"): (
        "equivalent", "block_table's next line self.tables[seq] raises KeyError(seq), whose message is repr(seq) "
                      "(all the contract asks), and nothing changes state before it"),
}
