"""Surviving mechanical variants of reference/batch_invariant.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line, the change)."""

TRIAGE = {
    ("reference", "return dim == -1 or dim == x.dim() - 1", "1 -> 0 (#2)"): (
        "equivalent", "aten's softmax/log_softmax wrap dim before _softmax/_log_softmax, so the last dim then takes "
                      "the movedim path, where moving the last dim to the last is the identity (same call, same bits)"),
}
