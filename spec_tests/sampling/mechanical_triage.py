"""Surviving mechanical variants of reference/sampling.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line, the change)."""
_EMPTY = "if x.shape[0] == 0:"
_TOP_K = "k = torch.where((top_k > 0) & (top_k < vocab), top_k, torch.full_like(top_k, vocab))"
_RAW_NAN = 'raise ValueError(f"logits contain NaN (row {int(torch.isnan(x).any(1).nonzero()[0])})")'

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
    ("reference", _EMPTY, "0 -> 1 (#2)"): (
        "equivalent", "x.shape[1] is the vocab, >= 1 by validation: the early return is never taken, and the "
                      "full path on batch 0 yields the same empty (0, vocab) tensor in the compute dtype"),
    ("reference", "t = torch.where(temperature > 0, temperature, torch.ones_like(temperature))", "0 -> -1"): (
        "equivalent", "only greedy rows (T = 0) change: their z becomes 0/0 and -inf, every step after is "
                      "row-wise, and probs_from_processed replaces those rows by the one-hot"),
    ("reference", "value = value.item() if value.dim() == 0 else value.tolist()", "0 -> -1"): (
        "equivalent", "tolist() of a 0-d tensor returns the same Python scalar as item()"),
    ("reference", _RAW_NAN, "drop `raise ValueError(f'logits contain NaN (row {int(torch.isnan(`"): (
        "equivalent", "NaN survives penalties and bias, so check_processed raises the same error for the same "
                      "row; only when an earlier row's +inf logit is banned by a -inf bias (NaN after it) is that "
                      "earlier bad row named, which the contract leaves open (the optimized sampler does so too)"),
}
