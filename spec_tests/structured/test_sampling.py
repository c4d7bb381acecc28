"""Sampling under the mask: the masked distribution is the renormalised restriction of
softmax(logits) (computed here in float64 with numpy, independently), it is what the sampling
contract (reference/sampling.py's ``sampling_probs``) gives for ``mask_logits``' output, every
draw is allowed, the draws follow it (chi-square), and the reference's draw (inverse CDF) at
token-exact."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings, strategies as st

from conformance.stats import lumped
from spec_tests.structured.vocab import tiny_vocab

INVERSE_CDF = "the token for a uniform u is the inverse CDF in token-id order of float64 constrained_probs"
TORCH_RAND = "the generator is consumed as one torch.rand(batch, float64) per call (generate_constrained: per step)"
ONE_MINUS = 1.0 - 2.0 ** -53
ALPHA = 1e-6


def restriction(logits: torch.Tensor, mask: torch.Tensor) -> np.ndarray:
    """p_t / sum_{allowed} p over the allowed tokens, 0 elsewhere (float64, numpy)."""
    x = logits.double().numpy()
    keep = np.broadcast_to(mask.numpy(), x.shape)
    x = np.where(keep, x, -np.inf)
    x = x - x.max(axis=1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=1, keepdims=True)


@st.composite
def cases(draw, batch_max: int = 4, vocab_max: int = 12):
    batch, vocab = draw(st.integers(1, batch_max)), draw(st.integers(1, vocab_max))
    seed = draw(st.integers(0, 2**31))
    g = torch.Generator().manual_seed(seed)
    dtype = draw(st.sampled_from([torch.float32, torch.float64, torch.bfloat16]))
    logits = (torch.randn(batch, vocab, generator=g, dtype=torch.float64) * draw(st.sampled_from([0.5, 3.0, 20.0])))
    shared = draw(st.booleans())                                                        # one mask for all rows
    mask = torch.rand(1 if shared else batch, vocab, generator=g) < draw(st.sampled_from([0.2, 0.5, 0.9]))
    rows = torch.arange(mask.shape[0])
    mask[rows, torch.randint(vocab, (mask.shape[0],), generator=g)] = True               # one allowed per row
    if draw(st.booleans()):
        logits[~mask.expand(batch, vocab) & (torch.rand(batch, vocab, generator=g) < 0.3)] = float("-inf")
    if shared:
        mask = mask[0]
    return logits.to(dtype), mask


@example(case=(torch.tensor([[2.0, 1.0, 0.0, -1.0]]), torch.tensor([False, True, True, False]))).via(
    "mutant:probs_not_renormalised")
@given(case=cases())
def test_probs_are_the_renormalised_restriction(impl, case):
    """constrained_probs(logits, mask): float64, exactly 0 off the mask, equal to p_t / sum_allowed p
    (1e-12 relative), rows summing to 1; the same as the sampling contract's distribution of
    mask_logits(logits, mask) (reference.sampling.sampling_probs, default parameters)."""
    from reference.sampling import sampling_probs
    logits, mask = case
    want = restriction(logits, mask)
    got = impl.get("constrained_probs")(logits, mask)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float64 and got.shape == logits.shape
    got = got.numpy()
    keep = np.broadcast_to(mask.numpy(), got.shape)
    assert (got[~keep] == 0).all(), "a token off the mask has positive probability"
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300)
    masked = impl.get("mask_logits")(logits, mask)
    assert masked.dtype == logits.dtype and masked.shape == logits.shape
    ref = sampling_probs(masked.double()).numpy()
    np.testing.assert_allclose(ref, want, rtol=1e-12, atol=1e-300)


@example(case=(torch.tensor([[0.5, -1.0, 2.0]]), torch.tensor([True, False, True]))).via("mutant:mask_logits_zero")
@given(case=cases())
def test_mask_logits(impl, case):
    """mask_logits: a new tensor, the logits' dtype and shape; -inf exactly where the mask is False,
    the logit (bit for bit) where it is True; the input is not modified."""
    logits, mask = case
    before = logits.clone()
    out = impl.get("mask_logits")(logits, mask)
    keep = mask.expand(logits.shape)
    assert out.dtype == logits.dtype and out.shape == logits.shape
    assert torch.equal(logits, before), "mask_logits modified its input"
    assert bool((out[~keep] == float("-inf")).all()), "a disallowed entry is not -inf"
    assert torch.equal(out[keep], logits[keep]), "an allowed entry changed"
    one = impl.get("mask_logits")(logits[0], mask if mask.dim() == 1 else mask[0])
    assert one.shape == logits[0].shape, "mask_logits takes a single row (vocab,) too"


@given(case=cases(), us=st.lists(st.sampled_from([0.0, 0.25, 0.5, 0.999, ONE_MINUS]), min_size=4, max_size=4))
def test_every_draw_is_allowed(impl, case, us):
    """For any uniforms, including 0 and the largest float64 below 1, constrained_sample returns
    int64 (batch,) ids with positive constrained probability."""
    logits, mask = case
    batch = logits.shape[0]
    u = torch.tensor((us * batch)[:batch], dtype=torch.float64)
    tokens = impl.get("constrained_sample")(logits, mask, None, uniforms=u)
    assert tokens.dtype == torch.int64 and tokens.shape == (batch,)
    p = restriction(logits, mask)
    for r, t in enumerate(tokens.tolist()):
        assert p[r, t] > 0, f"row {r}, u = {float(u[r])!r}: drew token {t}, which has probability 0 (mask {mask.tolist()})"


@pytest.mark.choice(INVERSE_CDF)
@given(case=cases(), u=st.floats(0.0, 1.0, exclude_max=True))
def test_draw_is_the_inverse_cdf(impl, case, u):
    """Token-exact: the token for u is the smallest t with C_t > u * C_last (C the float64 cumulative
    sum of the restriction in token-id order), unless u * C_last is within 1e-9 of a step."""
    logits, mask = case
    p = restriction(logits, mask)
    batch = p.shape[0]
    tokens = impl.get("constrained_sample")(logits, mask, uniforms=torch.full((batch,), u, dtype=torch.float64))
    for r in range(batch):
        c = np.cumsum(p[r])
        target = u * c[-1]
        if np.min(np.abs(c - target)) < 1e-9:
            continue
        want = int(np.argmax(c > target)) if (c > target).any() else int(np.nonzero(p[r])[0][-1])
        assert int(tokens[r]) == want, f"row {r}, u = {u!r}: drew {int(tokens[r])}, the inverse CDF gives {want}"


def test_draws_follow_the_restriction_chi_square(impl):
    """Statistical: 20,000 draws (a seeded torch.Generator, rows tiled) of a 10-token row whose mask
    keeps 6 tokens: none off the mask, and a chi-square test of the counts against the
    restriction (cells lumped to expect >= 5) at false-alarm rate 1e-6 (one fixed seed).
    Power: the mutant probs_not_renormalised (same support, wrong weights)."""
    from scipy import stats
    logits = torch.tensor([[1.5, 0.2, -0.3, 2.0, 0.9, -1.2, 0.0, 1.1, -0.5, 0.4]])
    mask = torch.tensor([True, False, True, True, False, True, False, True, True, False])
    n = 20_000
    gen = torch.Generator().manual_seed(20260607)
    tokens = impl.get("constrained_sample")(logits.expand(n, -1).contiguous(), mask, gen)
    counts = torch.bincount(tokens, minlength=10).double()
    assert counts[~mask].sum() == 0, f"draws off the mask: {counts.tolist()}"
    q = restriction(logits, mask)[0]
    obs, exp = lumped(counts[mask].tolist(), (q[mask.numpy()] * n).tolist())
    pvalue = stats.chisquare(obs, exp).pvalue
    assert pvalue >= ALPHA, f"the draws do not follow the restriction: p-value {pvalue:.3g}; counts {counts.tolist()}, expected {(q * n).round().tolist()}"


@pytest.mark.choice(TORCH_RAND)
def test_generator_is_consumed_as_torch_rand(impl):
    """Token-exact: sample(..., generator=g) == sample(..., uniforms=torch.rand(batch, float64) from a
    generator in g's state), and g ends in the state that draw leaves."""
    logits = torch.randn(5, 9, generator=torch.Generator().manual_seed(1))
    mask = torch.rand(5, 9, generator=torch.Generator().manual_seed(2)) < 0.6
    mask[:, 3] = True
    g1, g2 = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    a = impl.get("constrained_sample")(logits, mask, g1)
    u = torch.rand(5, generator=g2, dtype=torch.float64)
    b = impl.get("constrained_sample")(logits, mask, uniforms=u)
    assert torch.equal(a, b)
    assert torch.equal(g1.get_state(), g2.get_state()), "the generator was not consumed as one torch.rand(batch, float64)"


def test_generation_is_deterministic_in_its_uniforms(impl):
    """generate_constrained with uniforms: the same uniforms give the same tokens; the matcher is
    left where generation stopped (finished after EOS); max_tokens = 0 draws nothing."""
    vocab, eos = tiny_vocab()
    grammar = impl.get("compile_regex")("(ab)+")

    def logits_fn(tokens):
        return torch.linspace(-1, 1, len(vocab), dtype=torch.float32)

    u = torch.tensor([0.3, 0.9, 0.1, 0.6, 0.5, 0.2, 0.8, 0.4], dtype=torch.float64)
    runs = []
    for _ in range(2):
        m = impl.get("TokenMatcher")(grammar, list(vocab), eos)
        runs.append(impl.get("generate_constrained")(m, logits_fn, 8, uniforms=u))
    assert runs[0] == runs[1], f"the same uniforms gave {runs[0]} and {runs[1]}"
    text = b"".join(vocab[t] for t in runs[0] if t != eos)
    assert text.startswith(b"ab") and text == b"ab" * (len(text) // 2), f"generated {text!r}, not in (ab)+ prefixes"
    if runs[0] and runs[0][-1] == eos:
        assert m.is_finished()
    m = impl.get("TokenMatcher")(grammar, list(vocab), eos)
    assert impl.get("generate_constrained")(m, logits_fn, 0, uniforms=torch.zeros(0, dtype=torch.float64)) == []
    assert not m.is_finished() and mask_at_start(m, vocab)


def mask_at_start(m, vocab) -> bool:
    mask = m.allowed_mask().tolist()
    return mask[vocab.index(b"a")] and mask[vocab.index(b"ab")] and not mask[vocab.index(b"b")]


@settings(deadline=None)
@example(pattern="a{3}|b", seed=5).via("mutant:generate_ignores_mask")
@given(pattern=st.sampled_from(["(ab)+", "a{3}|b", "[ab]a?b?", ".{1,2}", "(a|b.)?b?"]),
       seed=st.integers(0, 10**6))
def test_generation_stops_at_eos_inside_the_language(impl, pattern, seed):
    """generate_constrained on the tiny vocabulary with random logits (EOS favoured): the drawn text
    plus EOS is in the language (Python's re.fullmatch), at most one EOS and only last."""
    import re
    vocab, eos = tiny_vocab()
    m = impl.get("TokenMatcher")(impl.get("compile_regex")(pattern), list(vocab), eos)

    def logits_fn(tokens):
        x = torch.randn(len(vocab), generator=torch.Generator().manual_seed(seed + len(tokens)))
        x[eos] += 2.0
        return x
    tokens = impl.get("generate_constrained")(m, logits_fn, 30, torch.Generator().manual_seed(seed))
    assert eos not in tokens[:-1]
    text = b"".join(vocab[t] for t in tokens if t != eos)
    if tokens and tokens[-1] == eos:
        assert re.fullmatch(pattern, text.decode("utf-8"), re.ASCII), f"{pattern!r}: generated {text!r} then EOS"
