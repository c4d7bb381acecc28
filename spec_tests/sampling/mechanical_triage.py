"""Surviving mechanical variants of reference/sampling.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line, the change)."""
_EMPTY = "if x.shape[0] == 0:"
_TOP_K = "k = torch.where((top_k > 0) & (top_k < vocab), top_k, torch.full_like(top_k, vocab))"

TRIAGE = {
    ("reference", "return torch.minimum(idx, last)", "minimum(a, b, ...) -> minimum(b, a, ...)"): (
        "equivalent", "the element-wise minimum of two int64 tensors is symmetric in its arguments"),
    ("reference", _EMPTY, "0 -> -1"): (
        "equivalent", "batch 0 then takes the full path, which yields the same empty (0, vocab) tensor in the "
                      "compute dtype as the early return (checked over dtypes, vocab 1-7 and every stage)"),
    ("reference", _EMPTY, "0 -> -1 (#2)"): (
        "equivalent", "x.shape[-1] is the vocab, >= 1 by validation: the early return is never taken, and the "
                      "full path on batch 0 yields the same empty (0, vocab) tensor in the compute dtype"),
    ("reference", _TOP_K, "< -> <="): (
        "equivalent", "at top_k == vocab both branches give k = vocab"),
}
