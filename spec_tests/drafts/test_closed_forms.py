"""Closed forms (05.09): tokens per target pass (1 - α^(γ+1)) / (1 - α), the speedup with draft cost
ratio c, the break-even α; the formula against the empirical mean of the reference verifier."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import example, given, strategies as st

from conformance.strategies import generator
from spec_tests.drafts.strategies import closed_form_abs

Z = 5.0   # two-sided normal tail at 5 sigma: 5.7e-7 <= 1e-6


@pytest.mark.parametrize("alpha, gamma, want", [
    (0.0, 3, 1.0), (1.0, 3, 4.0), (0.5, 1, 1.5), (0.5, 2, 1.75), (0.5, 0, 1.0), (0.8, 4, 3.3616),
])
def test_expected_tokens_examples(impl, alpha, gamma, want):
    """Worked values: 1 + α + ... + α^γ (γ + 1 at α = 1, 1 at α = 0)."""
    assert impl.get("expected_tokens_per_step")(alpha, gamma) == pytest.approx(want, rel=1e-12)


@example(alpha=0.9999999986030161, gamma=7).via(
    "boundary: the closed form rounds to 8.0 where the sum is 7.99999996 (the tolerance admits the formula's own rounding)")
@given(alpha=st.floats(0, 1), gamma=st.integers(0, 8))
def test_expected_tokens_is_geometric_sum(impl, alpha, gamma):
    """(1 - α^(γ+1)) / (1 - α) == Σ_{i<=γ} α^i (rel 1e-9, plus the cancellation the closed form
    itself carries near α = 1: strategies.closed_form_abs), never below 1 or above γ + 1."""
    got = impl.get("expected_tokens_per_step")(alpha, gamma)
    assert got == pytest.approx(sum(alpha ** i for i in range(gamma + 1)), rel=1e-9, abs=closed_form_abs(alpha))
    assert 1 - 1e-12 <= got <= gamma + 1 + 1e-12


@given(alpha=st.floats(0, 1), gamma=st.integers(0, 8), c=st.floats(0, 2))
def test_speedup(impl, alpha, gamma, c):
    """speedup = tokens per pass / (c γ + 1)."""
    want = sum(alpha ** i for i in range(gamma + 1)) / (c * gamma + 1)
    assert impl.get("speedup")(alpha, gamma, c) == pytest.approx(want, rel=1e-9, abs=closed_form_abs(alpha))


@pytest.mark.parametrize("gamma, c", [(1, 0.5), (3, 0.1), (4, 0.05), (8, 0.2), (2, 1.0)])
def test_break_even_alpha(impl, gamma, c):
    """speedup(break_even) == 1, below it speculation loses, above it wins. γ = 1: α* = c exactly."""
    a = impl.get("break_even_alpha")(gamma, c)
    s = impl.get("speedup")
    assert 0 <= a <= 1
    assert s(a, gamma, c) == pytest.approx(1, abs=1e-9)
    if a > 1e-6:
        assert s(a - 1e-6, gamma, c) < 1
    if a < 1 - 1e-6:
        assert s(a + 1e-6, gamma, c) > 1
    if gamma == 1:
        assert a == pytest.approx(c, abs=1e-9)
    assert impl.get("break_even_alpha")(gamma, 0.0) == 0


@pytest.mark.choice("break_even_alpha returns the upper end of its bisection of [0, 1]: the first midpoint with speedup >= 1")
@pytest.mark.parametrize("c", [0.5, 0.25, 0.75, 0.375])
def test_break_even_alpha_exact_on_the_bisection_grid(impl, c):
    """γ = 1: α* = c. Where c is a midpoint of the bisection of [0, 1] (a dyadic), the reference's
    bisection (lo < α* <= hi kept by `speedup(mid) < 1`) lands on it and returns it exactly."""
    assert impl.get("break_even_alpha")(1, c) == c


@pytest.mark.parametrize("p, q, gamma", [
    ([0.5, 0.25, 0.125, 0.125, 0, 0], [0.25, 0.5, 0.125, 0.125, 0, 0], 3),        # α = 0.75
    ([0.4, 0.3, 0.2, 0.1, 0, 0], [0.1, 0.2, 0.3, 0.2, 0.1, 0.1], 2),              # α = 0.6
])
def test_formula_matches_verifier_mean(impl, reference, p, q, gamma):
    """α = Σ min(p, q); drafts sampled from q (fixed seed), the reference verifier on N rows (the
    same p, q at every position): the mean number of tokens a row emits equals
    expected_tokens_per_step(α, γ) within Z standard errors, the standard deviation bounded by
    γ / 2 (the counts lie in [1, γ + 1]): false alarm <= 1e-6."""
    n = 1500
    g = generator(7)
    p = torch.tensor(p, dtype=torch.float64)
    q = torch.tensor(q, dtype=torch.float64)
    vocab = p.numel()
    alpha = float(torch.minimum(p, q).sum())
    drafts = torch.multinomial(q.expand(n * gamma, vocab), 1, replacement=True, generator=g).reshape(n, gamma)
    verify = reference.of("speculative").get("verify")
    _, accepted = verify(p.expand(n, gamma + 1, vocab), q.expand(n, gamma, vocab), drafts, generator=g)
    empirical = float((accepted + 1).double().mean())
    want = impl.get("expected_tokens_per_step")(alpha, gamma)
    assert abs(empirical - want) <= Z * (gamma / 2) / math.sqrt(n), (alpha, empirical, want)


DOCS_TABLE = {   # docs/drafts.md: c -> (break-even α at γ = 1, 2, 4, 8; speedup at α = 0.8, γ = 1, 2, 4, 8)
    0.05: ((0.05, 0.092, 0.167, 0.286), (1.71, 2.22, 2.80, 3.09)),
    0.1: ((0.1, 0.171, 0.287, 0.445), (1.64, 2.03, 2.40, 2.40)),
    0.2: ((0.2, 0.306, 0.455, 0.621), (1.50, 1.74, 1.87, 1.66)),
    0.5: ((0.5, 0.618, 0.741, 0.843), (1.20, 1.22, 1.12, 0.87)),
}


@pytest.mark.parametrize("c", list(DOCS_TABLE))
def test_docs_table(impl, c):
    """The table of docs/drafts.md, to its printed precision."""
    alphas, speedups = DOCS_TABLE[c]
    for gamma, a, s in zip((1, 2, 4, 8), alphas, speedups):
        assert impl.get("break_even_alpha")(gamma, c) == pytest.approx(a, abs=5e-4), (c, gamma)
        assert impl.get("speedup")(0.8, gamma, c) == pytest.approx(s, abs=5e-3), (c, gamma)
