"""Cost per solved task (course 08.12): the closed forms against exact enumeration of every
success/failure sequence (exact fractions), their limits, monotonicity, hand-computed numbers and
bad input. The seeded simulation is test_simulation.py."""
from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import example, given, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from spec_tests.cost_per_task.oracles import enumerate_best_of_n, enumerate_retry

REL = 1e-9  # float evaluation of q**k for k <= 8 against exact fractions

fractions_p = st.builds(Fraction, st.integers(1, 20), st.just(20))            # p in {1/20, ..., 1}
small_k = st.integers(1, 8)
tokens = st.sampled_from([1.0, 500.0, 2048.0, 30000.0])
prices = st.sampled_from([0.05, 0.2, 1.0, 15.0, 60.0])


def _close(a, b) -> bool:
    return math.isclose(float(a), float(b), rel_tol=REL, abs_tol=0.0)


@example(p=Fraction(1, 4), k=3, t=1000.0, price=2.0).via(
    "mutant:retry_pays_all_k mutant:pass_at_k_linear mutant:retry_counts_attempted mutant:per_thousand")
@example(p=Fraction(1), k=4, t=1000.0, price=2.0).via("boundary: p = 1, the first attempt always succeeds")
@given(p=fractions_p, k=small_k, t=tokens, price=prices)
def test_retry_equals_enumeration(impl, p, k, t, price):
    """Retry until success, at most k attempts: expected_attempts(p, k) and pass_at_k(p, k) are
    E[attempts] and P(solved) summed over all 2^k outcome sequences; cost_per_solved_retry is the
    cost per attempt x E[attempts] / P(solved)."""
    attempts, solved = enumerate_retry(p, k)
    got = impl.get("expected_attempts")(float(p), k)
    assert _close(got, attempts), f"expected_attempts({float(p)!r}, {k}) = {got!r}; enumeration: {float(attempts)!r}"
    got = impl.get("pass_at_k")(float(p), k)
    assert _close(got, solved), f"pass_at_k({float(p)!r}, {k}) = {got!r}; enumeration: {float(solved)!r}"
    want = Fraction(t) * Fraction(price) / 10**6 * attempts / solved
    got = impl.get("cost_per_solved_retry")(t, price, float(p), k)
    assert _close(got, want), f"cost_per_solved_retry({t}, {price}, {float(p)!r}, {k}) = {got!r}; enumeration: {float(want)!r}"


@example(p=Fraction(1, 4), n=3, t=1000.0, price=2.0).via("mutant:best_of_n_pays_one mutant:pass_at_k_linear")
@given(p=fractions_p, n=small_k, t=tokens, price=prices)
def test_best_of_n_equals_enumeration(impl, p, n, t, price):
    """Best-of-n with a verifier: every sequence pays n attempts and solves the task when any
    attempt succeeds; cost_per_solved_best_of_n = n x cost per attempt / P(solved)."""
    paid, solved = enumerate_best_of_n(p, n)
    want = Fraction(t) * Fraction(price) / 10**6 * paid / solved
    got = impl.get("cost_per_solved_best_of_n")(t, price, float(p), n)
    assert _close(got, want), f"cost_per_solved_best_of_n({t}, {price}, {float(p)!r}, {n}) = {got!r}; enumeration: {float(want)!r}"


@example(p=0.25).via("mutant:attempts_off_by_one")
@given(p=st.floats(1e-3, 1.0))
def test_unbounded_retry(impl, p):
    """Never giving up: expected_attempts(p) = 1/p (the geometric distribution's mean, the successful
    attempt included) and cost_per_solved_retry(t, price, p) = cost per attempt / p."""
    got = impl.get("expected_attempts")(p)
    assert math.isclose(got, 1 / p, rel_tol=1e-12), f"expected_attempts({p!r}) = {got!r}; the geometric mean is 1/p = {1 / p!r}"
    got = impl.get("cost_per_solved_retry")(1000.0, 2.0, p)
    assert math.isclose(got, 0.002 / p, rel_tol=1e-12), f"cost_per_solved_retry(1000, 2, {p!r}) = {got!r}; expected 0.002/p"


@example(p=0.3, k=5).via("mutant:retry_pays_all_k mutant:retry_counts_attempted")
@given(p=st.floats(1e-3, 1.0), k=st.integers(1, 200))
def test_retry_cost_is_c_over_p_for_every_k(impl, p, k):
    """Retry until success costs cost_per_attempt / p per solved task whatever the cap k: a cap
    saves the attempts it does not make and loses the tasks it does not solve in the same proportion."""
    got = impl.get("cost_per_solved_retry")(2048.0, 0.5, p, k)
    want = 2048.0 * 0.5 / 1e6 / p
    assert math.isclose(got, want, rel_tol=1e-9), f"cost_per_solved_retry(2048, 0.5, {p!r}, {k}) = {got!r}; expected c/p = {want!r}"


@example(p=0.3).via("mutant:best_of_n_pays_one")
@given(p=st.floats(1e-3, 1.0))
def test_limits(impl, p):
    """k = 1: pass@1 = p, one attempt, and both strategies cost c/p. p = 1: pass@k = 1, one attempt,
    retry costs c, best-of-n costs n x c."""
    c = impl.get("cost_per_attempt")(1000.0, 3.0)
    assert _close(c, 0.003), f"cost_per_attempt(1000, 3) = {c!r}, expected 0.003"
    assert impl.get("pass_at_k")(p, 1) == pytest.approx(p, rel=1e-12)
    assert impl.get("expected_attempts")(p, 1) == pytest.approx(1.0, rel=1e-12)
    assert impl.get("cost_per_solved_retry")(1000.0, 3.0, p, 1) == pytest.approx(0.003 / p, rel=1e-9)
    assert impl.get("cost_per_solved_best_of_n")(1000.0, 3.0, p, 1) == pytest.approx(0.003 / p, rel=1e-9)
    for k in (1, 2, 7, 50):
        assert impl.get("pass_at_k")(1.0, k) == 1.0
        assert impl.get("expected_attempts")(1.0, k) == 1.0
        assert impl.get("cost_per_solved_retry")(1000.0, 3.0, 1.0, k) == pytest.approx(0.003, rel=1e-12)
        assert impl.get("cost_per_solved_best_of_n")(1000.0, 3.0, 1.0, k) == pytest.approx(0.003 * k, rel=1e-12)


@example(p=0.4, k=3).via("boundary: k p past 1, where pass@k must still rise with k and stay <= 1")
@given(p=st.floats(0.01, 0.99), k=st.integers(1, 60))
def test_monotonicity(impl, p, k):
    """pass@k rises with k and p and stays in (0, 1]; expected attempts rise with the cap; best-of-n
    per solved task costs at least retry's c/p and more with every extra parallel attempt
    (for p < 1)."""
    pk = impl.get("pass_at_k")
    a, b = pk(p, k), pk(p, k + 1)
    assert 0 < a <= b <= 1, f"pass_at_k({p!r}, {k}) = {a!r}, pass_at_k({p!r}, {k + 1}) = {b!r}"
    assert pk(min(1.0, p + 0.01), k) >= a
    e = impl.get("expected_attempts")
    assert e(p, k) <= e(p, k + 1) * (1 + 1e-12) and e(p, k) <= 1 / p * (1 + 1e-12)
    bo = impl.get("cost_per_solved_best_of_n")
    retry = impl.get("cost_per_solved_retry")(1000.0, 1.0, p)
    assert bo(1000.0, 1.0, p, k) >= retry * (1 - 1e-12)
    assert bo(1000.0, 1.0, p, k + 1) > bo(1000.0, 1.0, p, k) * (1 - 1e-12)


def test_hand_computed_numbers(impl):
    """The comparison docs/cost_per_task.md works by hand (exact fractions; not the course's numbers:
    lesson 08.12's text in the repository states none). Small model: 2,000 tokens at $0.20/M, p = 0.3:
    $0.0004 an attempt, retry $1/750 ~ $0.001333 per solved task, best-of-8 $0.0032 / (1 - 0.7^8)
    ~ $0.003396. Large model: 1,000 tokens at $10/M, p = 0.8: $0.01 an attempt, one call $0.0125
    per solved task (and 80 % solved). Mutants: per_thousand, best_of_n_pays_one, pass_at_k_linear."""
    assert _close(impl.get("cost_per_attempt")(2000.0, 0.2), Fraction(2, 5000))
    assert _close(impl.get("cost_per_solved_retry")(2000.0, 0.2, 0.3), Fraction(1, 750))
    assert _close(impl.get("cost_per_solved_retry")(2000.0, 0.2, 0.3, 10), Fraction(1, 750))
    want = Fraction(32, 10000) / (1 - Fraction(7, 10) ** 8)
    got = impl.get("cost_per_solved_best_of_n")(2000.0, 0.2, 0.3, 8)
    assert _close(got, want), f"best-of-8: {got!r}, expected {float(want)!r}"
    assert _close(impl.get("cost_per_solved_retry")(1000.0, 10.0, 0.8, 1), Fraction(1, 80))
    assert _close(impl.get("pass_at_k")(0.3, 8), 1 - Fraction(7, 10) ** 8)


# --- bad input -------------------------------------------------------------------------------
def _money() -> list[Bad]:
    return [Bad(f"{kind} {name}", {name: value}, error, (name,))
            for name in ("tokens_per_attempt", "price_per_million")
            for kind, value, error in (("negative", -1.0, ValueError), ("nan", float("nan"), ValueError),
                                       ("inf", float("inf"), ValueError), ("str", "1", TypeError),
                                       ("bool", True, TypeError), ("None", None, TypeError))]


P_BAD = [
    Bad("zero p", dict(p=0.0), ValueError, ("p",)),
    Bad("negative p", dict(p=-0.1), ValueError, ("p",)),
    Bad("p above one", dict(p=1.0000001), ValueError, ("p",)),
    Bad("p a percentage", dict(p=30), ValueError, ("p",)),
    Bad("nan p", dict(p=float("nan")), ValueError, ("p",)),
    Bad("str p", dict(p="0.3"), TypeError, ("p",)),
    Bad("bool p", dict(p=True), TypeError, ("p",)),
    Bad("None p", dict(p=None), TypeError, ("p",)),
]


def _count(name: str, none_ok: bool = False) -> list[Bad]:
    rows = [Bad(f"zero {name}", {name: 0}, ValueError, (name,)),
            Bad(f"negative {name}", {name: -2}, ValueError, (name,)),
            Bad(f"float {name}", {name: 2.0}, TypeError, (name,)),
            Bad(f"bool {name}", {name: True}, TypeError, (name,))]
    if not none_ok:
        rows.append(Bad(f"None {name}", {name: None}, TypeError, (name,)))
    return rows


@bad_cases(_money())
def test_cost_per_attempt_rejects_bad_input(impl, bad):
    """tokens_per_attempt and price_per_million finite reals >= 0 (a bool is not one)."""
    assert_rejects(impl.get("cost_per_attempt"), dict(tokens_per_attempt=1000.0, price_per_million=2.0), bad)


@bad_cases(P_BAD + _count("k"))
def test_pass_at_k_rejects_bad_input(impl, bad):
    """p a real in (0, 1] (a probability, not a percentage); k an int >= 1."""
    assert_rejects(impl.get("pass_at_k"), dict(p=0.3, k=4), bad)


@bad_cases(P_BAD + _count("max_attempts", none_ok=True))
def test_expected_attempts_rejects_bad_input(impl, bad):
    """p a real in (0, 1]; max_attempts an int >= 1 or None."""
    assert_rejects(impl.get("expected_attempts"), dict(p=0.3, max_attempts=4), bad)


@bad_cases(_money() + P_BAD + _count("max_attempts", none_ok=True))
def test_cost_per_solved_retry_rejects_bad_input(impl, bad):
    """As cost_per_attempt and expected_attempts."""
    assert_rejects(impl.get("cost_per_solved_retry"),
                   dict(tokens_per_attempt=1000.0, price_per_million=2.0, p=0.3, max_attempts=4), bad)


@bad_cases(_money() + P_BAD + _count("n"))
def test_cost_per_solved_best_of_n_rejects_bad_input(impl, bad):
    """As cost_per_attempt and pass_at_k, the count named n."""
    assert_rejects(impl.get("cost_per_solved_best_of_n"),
                   dict(tokens_per_attempt=1000.0, price_per_million=2.0, p=0.3, n=4), bad)
