"""Why speculation loses at large batch (05.11): the roofline cost model's closed-form limits,
its monotonicity in the batch, the break-even batch and the break-even α at a given batch."""
from __future__ import annotations

import pytest
from hypothesis import example, given, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from spec_tests.drafts.strategies import closed_form_abs

alphas = st.floats(0, 1)
gammas = st.integers(1, 8)
costs = st.floats(0, 1)
ridges = st.floats(1, 1000)


def _tokens(alpha, gamma):
    return sum(alpha ** i for i in range(gamma + 1))


def _model(alpha, gamma, c, batch, ridge):
    """The cost model written out: plain B tokens per max(1, B/R); speculative B E tokens per
    c γ max(1, B/R) + max(1, B (γ+1)/R)."""
    plain = max(1.0, batch / ridge)
    spec = c * gamma * plain + max(1.0, batch * (gamma + 1) / ridge)
    # throughput ratio (B E / spec) / (B / plain): B cancels (and must, for tiny B in float64)
    return _tokens(alpha, gamma) * plain / spec


@example(alpha=0.8, gamma=4, c=0.05, ridge=295.0).via("mutant:verify_always_one_step")
@given(alpha=alphas, gamma=gammas, c=costs, ridge=ridges)
def test_limits(impl, alpha, gamma, c, ridge):
    """Memory-bound (B (γ+1) <= ridge): batch_speedup == speedup(α, γ, c), the 05.09 formula.
    Compute-bound (B >= ridge): E / (cγ + γ + 1) <= 1 -- speculation cannot win."""
    bs = impl.get("batch_speedup")
    small = ridge / (gamma + 1)
    for b in (0.0, 1.0 if 1.0 <= small else small, small):
        assert bs(alpha, gamma, c, b, ridge=ridge) == pytest.approx(impl.get("speedup")(alpha, gamma, c), rel=1e-9)
    for b in (ridge, 2 * ridge, 1e6 * ridge):
        got = bs(alpha, gamma, c, b, ridge=ridge)
        assert got == pytest.approx(_tokens(alpha, gamma) / (c * gamma + gamma + 1), rel=1e-9,
                                    abs=closed_form_abs(alpha))
        assert got <= 1 + 1e-12


@example(alpha=0.8, gamma=4, c=0.05, ridge=295.0, frac=2.0).via("mutant:draft_cost_flat")
@given(alpha=alphas, gamma=gammas, c=costs, ridge=ridges, frac=st.floats(0, 3))
def test_matches_cost_model(impl, alpha, gamma, c, ridge, frac):
    """At any batch: the stated roofline model, written out (rel 1e-9)."""
    b = frac * ridge
    got = impl.get("batch_speedup")(alpha, gamma, c, b, ridge=ridge)
    assert got == pytest.approx(_model(alpha, gamma, c, b, ridge), rel=1e-9, abs=closed_form_abs(alpha))


@given(alpha=alphas, gamma=gammas, c=costs, ridge=ridges)
def test_speedup_never_grows_with_batch(impl, alpha, gamma, c, ridge):
    """Non-increasing in the batch (checked on a grid from 0 to 2 ridge)."""
    bs = impl.get("batch_speedup")
    values = [bs(alpha, gamma, c, ridge * i / 40, ridge=ridge) for i in range(81)]
    assert all(b <= a * (1 + 1e-12) for a, b in zip(values, values[1:])), values


@example(alpha=0.8, gamma=4, c=0.05, ridge=295.0).via("mutant:break_even_batch_no_gamma")
@given(alpha=alphas, gamma=gammas, c=costs, ridge=ridges)
def test_break_even_batch(impl, alpha, gamma, c, ridge):
    """break_even_batch B*: speedup 1 at B* (> 1 just below, <= 1 above) when speculation wins at
    small batch; 0 when it never wins (memory-bound speedup <= 1)."""
    bs = impl.get("batch_speedup")
    star = impl.get("break_even_batch")(alpha, gamma, c, ridge=ridge)
    if impl.get("speedup")(alpha, gamma, c) <= 1 + 1e-9:
        if _tokens(alpha, gamma) - c * gamma < 1 - 1e-9:
            assert star == 0, star
        return
    assert ridge / (gamma + 1) * (1 - 1e-9) <= star <= ridge * (1 + 1e-9)
    assert bs(alpha, gamma, c, star, ridge=ridge) == pytest.approx(1, rel=1e-9)
    assert bs(alpha, gamma, c, star * (1 - 1e-6), ridge=ridge) > 1
    assert bs(alpha, gamma, c, star * (1 + 1e-6) + 1e-9, ridge=ridge) <= 1 + 1e-12


@pytest.mark.parametrize("alpha, gamma, c", [(0.0, 1, 0.0), (0.0, 4, 0.0), (0.5, 1, 0.5), (1.0, 1, 1.0),
                                             (0.5, 2, 0.375)])
def test_break_even_batch_tie_is_zero(impl, alpha, gamma, c):
    """E - c gamma exactly 1 (each value exact in float64): speculation only ties at small batch
    (speedup 1), never wins, so there is no batch below which it wins: break_even_batch is 0."""
    assert impl.get("batch_speedup")(alpha, gamma, c, 0.0) == pytest.approx(1, rel=1e-12)
    assert impl.get("break_even_batch")(alpha, gamma, c) == 0


@pytest.mark.parametrize("gamma, c, ridge", [(1, 0.1, 295.0), (4, 0.05, 295.0), (8, 0.2, 100.0)])
def test_break_even_alpha_grows_with_batch(impl, gamma, c, ridge):
    """The break-even α at batch B (bisection on batch_speedup): equal to break_even_alpha(γ, c)
    while memory-bound, larger in the middle regime, and no α < 1 breaks even once B >= ridge."""
    bs = impl.get("batch_speedup")

    def alpha_star(b):
        lo, hi = 0.0, 1.0
        if bs(1.0, gamma, c, b, ridge=ridge) < 1:
            return None
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if bs(mid, gamma, c, b, ridge=ridge) < 1 else (lo, mid)
        return hi

    memory = alpha_star(ridge / (gamma + 1) / 2)
    assert memory == pytest.approx(impl.get("break_even_alpha")(gamma, c), abs=1e-9)
    middle = alpha_star(ridge * (0.5 + 0.5 / (gamma + 1)))
    assert middle is not None and middle > memory + 1e-6
    assert alpha_star(2 * ridge) is None


def test_worked_values(impl):
    """H100-like ridge 295, α = 0.8, γ = 4, c = 0.05: 2.80x at batch 1, 1.15x at 128, 0.65x at 512
    (compute-bound); speculation stops paying at batch 186.5."""
    bs = impl.get("batch_speedup")
    assert bs(0.8, 4, 0.05, 1) == pytest.approx(3.3616 / 1.2, rel=1e-9)
    assert bs(0.8, 4, 0.05, 128) == pytest.approx(3.3616 / (0.2 + 640 / 295), rel=1e-9)
    assert bs(0.8, 4, 0.05, 512) == pytest.approx(3.3616 / 5.2, rel=1e-9)
    assert impl.get("break_even_batch")(0.8, 4, 0.05) == pytest.approx(295 * (3.3616 - 0.2) / 5, rel=1e-9)


BAD = [
    Bad("alpha above 1", dict(alpha=1.5), ValueError, ("alpha",)),
    Bad("gamma float", dict(gamma=2.0), TypeError, ("gamma",)),
    Bad("c negative", dict(c=-0.1), ValueError, ("c",)),
    Bad("batch negative", dict(batch=-1), ValueError, ("batch",)),
    Bad("batch inf", dict(batch=float("inf")), ValueError, ("batch",)),
    Bad("batch a string", dict(batch="64"), TypeError, ("batch",)),
    Bad("ridge zero", dict(ridge=0.0), ValueError, ("ridge",)),
    Bad("ridge negative", dict(ridge=-5.0), ValueError, ("ridge",)),
    Bad("ridge None", dict(ridge=None), TypeError, ("ridge",)),
]


@bad_cases(BAD)
def test_batch_speedup_rejects_bad_input(impl, bad):
    """batch_speedup: α in [0, 1], γ >= 0, c >= 0 finite, batch a finite real >= 0, ridge > 0."""
    assert_rejects(impl.get("batch_speedup"), dict(alpha=0.8, gamma=4, c=0.05, batch=64, ridge=295.0), bad)


@bad_cases([b for b in BAD if not b.id.startswith("batch")])
def test_break_even_batch_rejects_bad_input(impl, bad):
    """break_even_batch: α in [0, 1], γ >= 0, c >= 0 finite, ridge > 0."""
    assert_rejects(impl.get("break_even_batch"), dict(alpha=0.8, gamma=4, c=0.05, ridge=295.0), bad)
