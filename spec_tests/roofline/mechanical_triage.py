"""Surviving mechanical variants of reference/roofline.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line, the change).

The full sweep (all 78 variants, ``--sample 78``, five dev seeds) killed 74; ``gain <= 0 -> <= 1``
survived and was a gap (a ridge just below the intensity's limit, where the batch is huge but
exists), closed by test_decode.py::test_batch_exactly_at_the_ridge; the three below are equivalent.
"""

_SWAP = "the two arguments of a min/max of two exact Fractions swapped: equal arguments are equal values, so the result is the same number"

TRIAGE = {
    ("reference", "return _result(min(p, i * b), intensity, peak_flops, bandwidth)", "min(a, b, ...) -> min(b, a, ...)"): (
        "equivalent", _SWAP),
    ("reference", "return _result(max(f / p, m / b), flops, bytes_moved, peak_flops, bandwidth)", "max(a, b, ...) -> max(b, a, ...)"): (
        "equivalent", _SWAP),
    ("reference", "return _result(a / min(p, i * b), achieved_flops, intensity, peak_flops, bandwidth)",
     "min(a, b, ...) -> min(b, a, ...)"): ("equivalent", _SWAP),
}
