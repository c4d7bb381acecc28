"""The idle fraction of static batching (04.01-04.02): closed forms, exact.

A static batch of output lengths L_1..L_B holds B slots for max L steps: idle = 1 - sum L / (B max L).
Over many batches of iid lengths: idle_B = 1 - E[L] / E[max of B]. The closed forms are checked
against independent exact computations (enumeration of every length tuple; the defining series of
E[max] for the geometric, summed exactly to a bound on its tail), and the simulation against the
closed form by a t-test over independent seeds (stated false-alarm rate).
"""
from __future__ import annotations

from fractions import Fraction

import pytest
import torch
from hypothesis import example, given, settings, strategies as st
from scipy import stats

from reference.batching import LengthDistribution
from spec_tests.batching.oracles import expected_max_by_enumeration, geometric_expected_max_partial

lengths_lists = st.lists(st.integers(1, 50), min_size=1, max_size=12)


@example(lengths=[1, 3]).via("boundary: unequal lengths, 1 - 4/6 = 1/3 exactly (a float or an E[max] formula shows)")
@given(lengths=lengths_lists)
def test_idle_fraction_of_a_batch_is_exact(impl, lengths):
    """idle_fraction(L) = 1 - sum L / (B max L), an exact Fraction."""
    got = impl.get("idle_fraction")(lengths)
    assert isinstance(got, Fraction), f"idle_fraction returned {type(got).__name__}, not a Fraction"
    assert got == 1 - Fraction(sum(lengths), len(lengths) * max(lengths)), (lengths, got)


def test_idle_fraction_known_values(impl):
    """Equal lengths waste nothing; [1, 3] wastes 2 of 6 slots; one request wastes nothing."""
    f = impl.get("idle_fraction")
    assert f([4, 4, 4]) == 0 and f([1, 3]) == Fraction(1, 3) and f([7]) == 0 and f([1, 1, 1, 9]) == Fraction(2, 3)


@pytest.mark.parametrize("n", [1, 2, 3, 5])
@pytest.mark.parametrize("b", [1, 2, 3, 4])
def test_uniform_closed_form_by_enumeration(impl, n, b):
    """Uniform on {1..n}: E[L] = (n+1)/2 and E[max of B] equal the exact averages over all n^B
    length tuples, and idle_B = 1 - E[L]/E[max]."""
    d = LengthDistribution("uniform", n)
    e_max = expected_max_by_enumeration(n, b)
    assert impl.get("mean_length")(d) == Fraction(n + 1, 2)
    assert impl.get("expected_max_length")(d, b) == e_max, (n, b)
    assert impl.get("expected_idle_fraction")(d, b) == 1 - Fraction(n + 1, 2) / e_max


@pytest.mark.parametrize("p", [Fraction(1), Fraction(1, 2), Fraction(1, 4), Fraction(2, 7), 0.125])
@pytest.mark.parametrize("b", [1, 2, 3, 5])
def test_geometric_closed_form_by_series(impl, p, b):
    """Geometric(p) on {1, 2, ...}: E[L] = 1/p, and the finite inclusion-exclusion sum for E[max of B]
    lies within the exact tail bound of the defining series sum_k P(max > k)."""
    d = LengthDistribution("geometric", p)
    pf = Fraction(p)
    assert impl.get("mean_length")(d) == 1 / pf
    got = impl.get("expected_max_length")(d, b)
    assert isinstance(got, Fraction), f"expected_max_length returned {type(got).__name__}, not a Fraction"
    partial, tail = geometric_expected_max_partial(pf, b, 200)
    assert partial <= got <= partial + tail, (p, b, float(got), float(partial), float(tail))
    assert impl.get("expected_idle_fraction")(d, b) == 1 - (1 / pf) / got


def test_known_closed_form_values(impl):
    """Worked values: uniform {1,2}, B=2: E[max] = 7/4, idle 1/7; geometric(1/2), B=2: E[max] =
    2 + 2 - 4/3 = 8/3, idle 1/4; constant lengths and B = 1 waste nothing."""
    e = impl.get("expected_idle_fraction")
    assert e(LengthDistribution("uniform", 2), 2) == Fraction(1, 7)
    assert impl.get("expected_max_length")(LengthDistribution("geometric", Fraction(1, 2)), 2) == Fraction(8, 3)
    assert e(LengthDistribution("geometric", Fraction(1, 2)), 2) == Fraction(1, 4)
    for d in (LengthDistribution("constant", 7), LengthDistribution("uniform", 9), LengthDistribution("geometric", 0.3)):
        assert e(d, 1) == 0, d
    assert e(LengthDistribution("constant", 7), 16) == 0


@given(n=st.integers(1, 30), b=st.integers(1, 30))
@settings(max_examples=30)
def test_idle_fraction_grows_with_batch_size(impl, n, b):
    """E[max of B] is nondecreasing in B, so the idle fraction is too, and stays in [0, 1 - E[L]/max]."""
    d = LengthDistribution("uniform", n)
    f = impl.get("expected_idle_fraction")
    lo, hi = f(d, b), f(d, b + 1)
    assert 0 <= lo <= hi <= 1 - Fraction(n + 1, 2) / n, (n, b, lo, hi)


# Simulation vs closed form: K = 20 independent seeds, each an estimate over N batches; a one-sample
# t-test of the K estimates against the closed form, two-sided, rejected at p < 1e-6 (the stated
# per-check false-alarm rate; the ratio estimator's O(1/N) bias is far below its spread at N = 400).
ALPHA, K, N = 1e-6, 20, 400
SIM_CASES = [("uniform", 8, 4), ("uniform", 3, 2), ("geometric", Fraction(1, 5), 8), ("geometric", 0.5, 3)]


@pytest.mark.parametrize("kind,param,b", SIM_CASES)
def test_simulation_reproduces_the_closed_form(impl, kind, param, b):
    """simulate_idle_fraction's estimates over 20 seeds are consistent with expected_idle_fraction
    (the reference's closed form, checked exactly above): t-test, false-alarm rate 1e-6; and each
    estimate is a fraction of slots in [0, 1)."""
    from reference.batching import expected_idle_fraction
    d = LengthDistribution(kind, param)
    sim = impl.get("simulate_idle_fraction")
    est = [sim(d, b, N, torch.Generator().manual_seed(1000 + s)) for s in range(K)]
    assert all(0 <= e < 1 for e in est), est
    target = float(expected_idle_fraction(d, b))
    p = stats.ttest_1samp(est, target).pvalue
    assert p >= ALPHA, (f"simulated idle fractions (mean {sum(est) / K:.5f} over {K} seeds of {N} batches) "
                        f"are inconsistent with the closed form {target:.5f}: t-test p = {p:.2e} < {ALPHA}")


def test_simulation_of_constant_lengths_wastes_nothing(impl):
    """Constant lengths: every simulated batch is full, idle exactly 0."""
    assert impl.get("simulate_idle_fraction")(LengthDistribution("constant", 5), 4, 10, torch.Generator()) == 0


def test_simulation_is_seeded(impl):
    """The same generator seed gives the same estimate, another seed another one; the global RNG is
    untouched."""
    sim, d = impl.get("simulate_idle_fraction"), LengthDistribution("uniform", 10)
    state = torch.get_rng_state()
    a = sim(d, 4, 50, torch.Generator().manual_seed(1))
    assert a == sim(d, 4, 50, torch.Generator().manual_seed(1)) != sim(d, 4, 50, torch.Generator().manual_seed(2))
    assert torch.equal(state, torch.get_rng_state()), "simulate_idle_fraction touched the global RNG"
