"""Surviving mechanical variants of reference/paged_attention.py that are not gaps of the spec (read
by ``conformance.mechanical.triage`` as data). Key: (module, the source line, the change)."""
_LSE = "lse[b] = lb[0].transpose(0, 1)"

TRIAGE = {
    ("reference", _LSE, "transpose(a, b, ...) -> transpose(b, a, ...)"): (
        "equivalent", "transpose(1, 0) is transpose(0, 1): a swap of two dimensions is symmetric"),
    ("reference", _LSE, "0 -> -1 (#2)"): (
        "equivalent", "lb comes from attention over a batch of one, so lb[-1] is lb[0]"),
    ("reference", "out, lse = out[:, 0], lse[:, 0]", "0 -> -1 (#2)"): (
        "equivalent", "this branch runs for a rank-3 q, unsqueezed to q_len 1, so lse[:, -1] is lse[:, 0]"),
    ("reference", "if -(-n // block_size) > width:", "// -> /"): (
        "equivalent", "ceil(n / b) > w iff n / b > w for an integer w, and Python's correctly rounded int / int "
                      "keeps that exact while n < 2^53 (a longer sequence needs a cache of 2^53 slots: only a "
                      "zero-stride view can fake one, and the spec's no-change check would copy it)"),
    ("reference", "b, i = bad.nonzero()[0].tolist()", "0 -> -1"): (
        "equivalent", "the message quotes the last bad block id instead of the first; the contract fixes the "
                      "error type and that it names block_tables, not which bad entry it quotes"),
}
