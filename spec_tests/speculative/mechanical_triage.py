"""Surviving mechanical variants of reference/speculative.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line, the change)."""

TRIAGE = {
    ("reference",
     "return int(inverse_cdf(weights[None], torch.tensor([v], dtype=torch.float64, device=weights.device))[0])",
     "0 -> -1"): (
        "equivalent", "inverse_cdf of a batch of one returns a 1-element tensor: index 0 is index -1"),
}
