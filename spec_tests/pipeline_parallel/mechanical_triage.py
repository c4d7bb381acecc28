"""Surviving mechanical variants of reference/pipeline_parallel.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line, the change).

The first sample (60 variants, seeds 1-5) killed 59; the survivor is below.
"""

TRIAGE = {
    ("reference", "top = max(top, held)", "max(a, b, ...) -> max(b, a, ...)"): (
        "equivalent", "max of two ints is symmetric: max(held, top) == max(top, held)"),
}
