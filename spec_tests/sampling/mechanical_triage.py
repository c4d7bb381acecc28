"""Surviving mechanical variants of reference/sampling.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line, the change).

Gaps closed (rows of test_sampling.BAD): "+inf logit banned by a -inf bias, row 1" (the NaN check
after penalties and bias: dropped, or over the wrong axis, naming a column as the row); "bias token
-1"; "prompt 1-D int tensor of length batch"; "temperature empty bool tensor, batch 0" (the
real-number dtype check of a per-row tensor: dropped, or its condition broken)."""
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
    ("reference", _RAW_NAN, 'drop `raise ValueError(f"logits contain NaN (row {int(torch.isnan(`'): (
        "equivalent", "NaN survives penalties and bias, so check_processed raises the same error for the same "
                      "row; only when an earlier row's +inf logit is banned by a -inf bias (NaN after it) is that "
                      "earlier bad row named, which the contract leaves open (the optimized sampler does so too)"),
    ("reference", 'raise ValueError(f"generator is on {generator.device}, logits on {device}: they must match")',
     'drop `raise ValueError(f"generator is on {generator.device}, logit`'): (
        "outside the contract", "reachable only on a CUDA host (a CPU-only torch has no generator on another device "
                                "type; torch.Generator('meta') is refused); there the gpu test "
                                "test_sample_rejects_generator_on_another_device catches it (torch.rand then raises RuntimeError)"),
    ("reference", "target = u.to(probs.dtype) * c[:, -1]", "* -> /"): (
        "equivalent", "C_L = c[:, -1] is exactly 1 for greedy (one-hot) rows and 1 + d, |d| the compute dtype's rounding "
                      "of the softmax sum, otherwise: u/C_L and u*C_L differ by u|C_L - 1/C_L| ~ 2|d|, so a token flips "
                      "only when u*C_L lies within that rounding of a C_t, which the contract leaves open"),
    ("reference", "t = torch.where(temperature > 0, temperature, torch.ones_like(temperature))", "> -> >="): (
        "equivalent", "T < 0 is rejected, so only greedy rows (T = 0) change: their z becomes 0/0 and -inf, every step "
                      "after is row-wise and raises nothing, and probs_from_processed replaces those rows by the one-hot"),
    ("reference", "kept_sorted = (above < top_p[:, None]) | (top_p[:, None] >= 1)", "< -> <="): (
        "equivalent", "differs only where an exclusive cumsum of q equals p; exactly, sum_(g above) m_g e^(z_g) = "
                      "p sum_g m_g e^(z_g) (distinct rational z_g, integer m_g, the own group's coefficient -p m != 0) "
                      "is impossible (Lindemann-Weierstrass), so equality is a float rounding event, left open"),
    ("reference", "if batch == 0:", "0 -> -1"): (
        "equivalent", "batch 0 then takes inverse_cdf on (0, vocab) probs: uniforms (0,) (torch.rand of 0 elements "
                      "advances no generator: CPU checked by test_batch_zero's state check, CUDA's kernel returns at "
                      "numel 0) and (0,) int64 tokens on the logits' device, as the early return"),
    ("reference", "x = torch.where(seen, torch.where(x > 0, x / rp, x * rp), x)", "> -> >="): (
        "equivalent", "differs only at x = +-0, where x / rp and x * rp are both x (rp finite and > 0 by validation)"),
}
