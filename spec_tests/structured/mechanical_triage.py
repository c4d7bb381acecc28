"""Surviving mechanical variants of reference/structured.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line stripped, the change).

The sample of 60 variants (``--sample 60 --profile mutants``) killed 50. Six survivors were gaps,
closed and re-run (killed): a ``\\w`` without the capitals or without Z
(``test_every_character_of_each_class``), a UTF-8 range one byte short
(``test_dot_reads_exactly_the_well_formed_utf8_of_one_character``), ``a{1000}`` refused
(``test_the_largest_repeat_count_is_allowed``), an escape error that named no position (every
pattern row of ``test_pattern_error_names_the_position``), any escape taken inside a class (the
row "unknown escape in a class"). The four below are equivalent.
"""

TRIAGE = {
    ("reference", 'raise self.error(f"nothing to repeat before {c!r}")', 'drop `raise self.error(f"nothing to repeat before {c!r}")`'): (
        "equivalent", "every character of *+?{ is also in METACHARS, so the next branch raises the same ValueError "
                      "naming the pattern and the same position (only the words after it differ)"),
    ("reference", "break", "break -> continue"): (
        "equivalent", "in generate_constrained: once the matcher is finished every later step of the bounded loop "
                      "hits the same check again and does nothing; the tokens and the matcher's state are the same"),
    ("reference", 'body = self.p[self.i:close] if close >= 0 else ""', ">= -> >"): (
        "equivalent", "bounds() runs after an atom and its '{', so self.i >= 2 and find() returns -1 or an index "
                      ">= self.i: close is never 0"),
    ("reference", "if len(low) != 1 or len(high) != 1 or min(low) > min(high):", "min -> max"): (
        "equivalent", "the first two tests leave one-element sets only, whose min and max are the same"),
}
