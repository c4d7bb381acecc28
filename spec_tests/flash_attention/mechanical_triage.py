"""Surviving mechanical variants of reference/flash_attention.py that are not gaps of the spec (read
by ``conformance.mechanical.triage`` as data). Key: (module, the source line, the change)."""

TRIAGE = {
    ("reference", "qb, kb, vb = (t[s:e].transpose(0, 1).unsqueeze(0)", "transpose(a, b, ...) -> transpose(b, a, ...)"): (
        "equivalent", "transpose(1, 0) is transpose(0, 1): a swap of two dimensions is symmetric"),
    ("reference", "out[cq[b]:cq[b + 1]] = ob[0].transpose(0, 1)", "0 -> -1 (#2)"): (
        "equivalent", "ob comes from attention over a batch of one, so ob[-1] is ob[0]"),
}
