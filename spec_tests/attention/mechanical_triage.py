"""Surviving mechanical variants of reference/attention.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line, the change)."""

TRIAGE = {
    ("reference", "m_new = torch.maximum(m, s.amax(dim=-1))", "maximum(a, b, ...) -> maximum(b, a, ...)"): (
        "equivalent", "torch.maximum is symmetric elementwise (NaN from either side included), and both "
                      "operands have the shape and dtype (batch, rows) of the accumulator"),
}
