"""Surviving mechanical variants of reference/tree_spec.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line, the change).

Gaps closed in the triage of rerun t7 (a sample of 160 of 422 variants, 24 survivors): bad-input
rows parents[0] = -2 and a second root (parent -1) for tree_from_parents, a negative entry in
next_probs (expand_topk), context id -1 and tree token -1 (tree_logits), tree token -1
(verify_tree / verify_tree_greedy / typical_accept); test_root_may_be_a_0d_integer_tensor;
test_law.test_candidate_of_draft_probability_zero_is_never_accepted (q(x) = 0 is rejected even
at u = 0)."""

TRIAGE = {
    ("reference", 'raise ValueError(f"{name}[{i}] is not a probability vector: it holds NaN or inf")',
     'drop `raise ValueError(f"{name}[{i}] is not a probability vector: `'): (
        "equivalent", "a non-finite row still fails the next checks (a -inf is negative; NaN/inf make the sum "
                      "nan/inf, 'sums to nan/inf, not 1'): a ValueError naming the argument, all the contract asks"),
    ("reference", "ok_depth = [0] + [-1] * (len(parents) - 1)   # depth of node i if its whole path is kept, else -1",
     "0 -> 1"): (
        "equivalent", "every kept depth shifts by one; depths are only compared with each other and with >= 0, "
                      "which the root passes either way"),
    ("reference", "return min(idx, last)", "min(a, b, ...) -> min(b, a, ...)"): (
        "equivalent", "min of two ints is symmetric (equal ints are the same value)"),
    ("reference", "for d in range(1, max((len(p) for p in clean), default=0) + 1):", "1 -> 0"): (
        "equivalent", "the extra d = 0 pass only sees path[:0] = (), already in index: it adds nothing"),
    ("reference", "for d in range(1, max((len(p) for p in clean), default=0) + 1):", "0 -> -1"): (
        "equivalent", "the default is used only when paths is empty: range(1, 0) and range(1, 1) are both empty"),
    ("reference", "abs(float(p.sum()) - 1) > SUM_TOLERANCE[probs.dtype]:", "> -> >="): (
        "equivalent", "differs only at |s - 1| == tol exactly; for a float64 s in [0.5, 2] s - 1 is exact and a multiple "
                      "of 2^-53, and no tolerance (1e-6, 1e-4, 1e-2 as float64) is; outside that range |s - 1| >= 0.5"),
    ("reference", "k = attn.k_proj(x).view(1, total, attn.n_kv_heads, attn.head_dim).transpose(1, 2)",
     "transpose(a, b, ...) -> transpose(b, a, ...)"): (
        "equivalent", "transpose(2, 1) is transpose(1, 2): swapping two dims is symmetric in them"),
    ("reference", "v = attn.v_proj(x).view(1, total, attn.n_kv_heads, attn.head_dim).transpose(1, 2)",
     "transpose(a, b, ...) -> transpose(b, a, ...)"): (
        "equivalent", "transpose(2, 1) is transpose(1, 2): swapping two dims is symmetric in them"),
    ("reference", "allowed = torch.ones(total, total, dtype=torch.bool).tril()            # the context: causal",
     "ones(a, b, ...) -> ones(b, a, ...)"): (
        "equivalent", "a square (total, total) shape: both arguments are the same value"),
    ("reference", "return model.lm_head(model.model.norm(h))[0, n_ctx:]", "0 -> -1"): (
        "equivalent", "h is built from torch.tensor([ids]): batch dim 1, so index -1 is index 0"),
    ("reference", "vocab = len(p_rows[0])", "0 -> -1"): (
        "equivalent", "target_probs is validated (N, vocab) with N >= 1: every row has the same length"),
    ("reference", "if probs.shape[1] < 1:", "1 -> 0"): (
        "equivalent", "a (N, 0) probs tensor has row sums 0 and fails the sum check next: the same ValueError "
                      "naming the argument, all the contract asks"),
    ("reference", "i = int(bad.nonzero()[0])", "0 -> -1"): (
        "equivalent", "only which bad row the message describes changes: still a ValueError naming the argument "
                      "(the contract names no row)"),
    ("reference", "residual = [max(a - b, 0.0) for a, b in zip(p, q)]", "max(a, b, ...) -> max(b, a, ...)"): (
        "equivalent", "a - b is finite (inputs validated); the two orders differ only in the sign of a zero "
                      "(-0.0 vs 0.0), which sums, comparisons u*q < p, w > 0 and the cumsum treat alike"),
    ("reference", "mask = torch.zeros(n, n, dtype=torch.bool)", "zeros(a, b, ...) -> zeros(b, a, ...)"): (
        "equivalent", "an n x n mask: swapping the two equal sizes changes nothing"),
    # -- rerun s1 --------------------------------------------------------------------------------
    ("reference", "bad = ~finite | negative | ((sums - 1).abs() > tol)", "> -> >="): (
        "equivalent", "differs only at |s - 1| == tol exactly; for a float64 s in [0.5, 2] s - 1 is exact and a multiple "
                      "of 2^-53, and no tolerance (1e-6, 1e-4, 1e-2 as float64) is; outside that range |s - 1| >= 0.5"),
    ("reference", "ok_depth = [0] + [-1] * (len(parents) - 1)   # depth of node i if its whole path is kept, else -1",
     "- -> +"): (
        "equivalent", "two extra -1 entries at indices len(parents) and len(parents) + 1, never read: _deepest reads "
                      "ok_depth[i] and ok_depth[best] for nodes i < len(parents) and ok_depth[parents[i]], parents[i] < i"),
    ("reference", "ok_depth[i] = ok_depth[par] + 1", "1 -> 2"): (
        "equivalent", "every kept depth doubles (2 * depth); depths are only compared with each other (>) and with "
                      ">= 0, which a doubling of non-negative depths preserves, so the same best node"),
    ("reference", 'eps = check_real("epsilon", epsilon, minimum=0, maximum=1)', "0 -> -1"): (
        "equivalent", "an epsilon in [-1, 0) now passes check_real and fails `eps <= 0` next: the same ValueError "
                      "naming epsilon ('epsilon must be in (0, 1]'), all the contract asks (wording); below -1 "
                      "check_real still raises it"),
}
