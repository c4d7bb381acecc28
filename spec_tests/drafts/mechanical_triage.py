"""Surviving mechanical variants of reference/drafts.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line, the change)."""

TRIAGE = {
    ("reference", 'raise ValueError(f"c must be finite, got {c}")',
     "drop `raise ValueError(f'c must be finite, got {c}')`"): (
        "equivalent", "dead code: check_real('c', c) just above already raises ValueError naming c for inf/nan"),
    ("reference", "_truncate(d_cache, min(d_cache.seq_len, len(seq) + k))", "min(a, b, ...) -> min(b, a, ...)"): (
        "equivalent", "min is symmetric"),
    ("reference", "if i + 1 < g:", "1 -> 0"): (
        "outside the contract",
        "the draft also forwards its last draft token (logits discarded); the rollback keeps the same K/V "
        "at the same positions, only computed one call earlier, and the draft's call count is not in the contract"),
}
