"""Surviving mechanical variants of reference/drafts.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line, the change).

Gaps the whole run found, closed since (no entry here): bad-input rows of speculative_generate for
a draft that is not a model, a callable target without a config, a prompt with a negative id
(and ids below the vocabulary's top), a non-Generator generator at temperature 0, and
temperature > 0 without a generator when max_new_tokens is 0; max_new_tokens = 0 returning an
empty int64 tensor (test_zero_new_tokens_is_an_empty_int64_tensor); draft_model's seed defaulting
to 0 (test_seed_defaults_to_zero); the choice test test_break_even_alpha_exact_on_the_bisection_grid
(the bisection keeps `speedup(mid) < 1` below, so a dyadic break-even point is returned exactly)."""

TRIAGE = {
    ("reference", 'raise ValueError(f"c must be finite, got {c}")',
     'drop `raise ValueError(f"c must be finite, got {c}")`'): (
        "equivalent", "dead code: check_real('c', c) just above already raises ValueError naming c for inf/nan"),
    ("reference", "_truncate(d_cache, min(d_cache.seq_len, len(seq) + k))", "min(a, b, ...) -> min(b, a, ...)"): (
        "equivalent", "min is symmetric"),
    ("reference", "if i + 1 < g:", "1 -> 0"): (
        "outside the contract",
        "the draft also forwards its last draft token (logits discarded); the rollback keeps the same K/V "
        "at the same positions, only computed one call earlier, and the draft's call count is not in the contract"),    ("reference", "if i + 1 < g:", "+ -> -"): (
        "outside the contract",
        "i - 1 < g holds for every i in range(g), as i + 0 < g: the draft also forwards its last draft token "
        "(logits discarded), same K/V at the same positions; the draft's call count is not in the contract"),
    ("reference", "if i + 1 < g:", "< -> <="): (
        "outside the contract",
        "i + 1 <= g holds for every i in range(g), as i + 0 < g: the draft also forwards its last draft token "
        "(logits discarded), same K/V at the same positions; the draft's call count is not in the contract"),
    ("reference", 'raise ValueError(f"temperature must be finite, got {temperature}")',
     'drop `raise ValueError(f"temperature must be finite, got {temperat`'): (
        "equivalent", "dead code: check_real('temperature', ...) just above already raises ValueError naming "
                      "temperature for inf/nan"),
    ("reference", "if gamma == 0 or length <= n:", "or -> and"): (
        "equivalent", "each branch alone already gives []: gamma 0 slices seq[j+n:j+n] = [] at any match, and "
                      "length <= n makes range(length - n - 1, -1, -1) empty"),
    ("reference", "if gamma == 0 or length <= n:", "<= -> <"): (
        "equivalent", "at length == n the loop range(-1, -1, -1) is empty: [] as before"),
    ("reference", "for j in range(length - n - 1, -1, -1):          # most recent first; j = L - n is the suffix",
     "1 -> 2 (#2)"): (
        "equivalent", "the extra j = -1 (tried last) compares seq[-1:n-1], empty since L > n >= 1, with the "
                      "suffix of n >= 1 tokens: never a match"),
    ("reference", "while hi - lo > 1e-12:", "> -> >="): (
        "equivalent", "hi - lo is always 2**-k exactly (bisection of [0, 1], all dyadics exact in float64), never "
                      "1e-12 (2**-40 < 1e-12 < 2**-39): the loop stops at the same step"),
    ("reference", "return max(1.0, tokens / ridge)", "max(a, b, ...) -> max(b, a, ...)"): (
        "equivalent", "tokens / ridge is a finite float (batch finite >= 0, ridge finite > 0), never NaN; max of "
                      "two non-NaN floats is symmetric (equal values are the same float 1.0)"),
    ("reference", "logits = target(torch.tensor([seq[-1:] + drafts], device=device), cache=t_cache)[0]", "0 -> -1"): (
        "equivalent", "the tensor passed has batch dimension 1 (torch.tensor([...]) of one row), so the model's logits have batch 1 and index -1 is index 0"),
    ("reference", "logits = draft(torch.tensor([seq[d_cache.seq_len:]], device=device), cache=d_cache)[0, -1]",
     "0 -> -1"): ("equivalent", "the tensor passed has batch dimension 1 (torch.tensor([...]) of one row), so the model's logits have batch 1 and index -1 is index 0"),
    ("reference", "logits = draft(torch.tensor([[x]], device=device), cache=d_cache)[0, -1]", "0 -> -1"): (
        "equivalent", "the tensor passed has batch dimension 1 (torch.tensor([...]) of one row), so the model's logits have batch 1 and index -1 is index 0"),
    ("reference", "k = int(num_accepted[0])", "0 -> -1"): (
        "equivalent", "verify gets a batch of 1 (p, q, x of batch 1), so num_accepted has one entry"),
    ("reference", 'layers = target.config.n_layers if n_layers is None else check_int("n_layers", n_layers, minimum=1)',
     "1 -> 0"): (
        "equivalent", "n_layers = 0 still raises ValueError naming n_layers, from target.config.replace(n_layers=0) "
                      "(the config is a reference ModelConfig, whose __post_init__ checks n_layers >= 1) before "
                      "any parameter is built"),
}
