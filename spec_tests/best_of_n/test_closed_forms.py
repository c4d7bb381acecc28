"""The closed forms of `best_of_n` (course 08.06-08.07) against exact enumeration of every sample
sequence (exact fractions, the tie rule applied as written), against the multinomial sum over
vote counts, and against the implementation's own selection functions; their limits, symmetries,
monotonicity, hand-computed numbers and bad input. The seeded simulation is test_simulation.py.
"""
from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest
from hypothesis import example, given, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from spec_tests.best_of_n.oracles import (p_best_of_n_by_enumeration, p_majority_by_counts,
                                          p_majority_by_enumeration)

REL = 1e-9   # float evaluation of the sums against exact fractions

grid = st.builds(Fraction, st.integers(0, 20), st.just(20))       # p in {0, 1/20, ..., 1}
rates = st.builds(Fraction, st.integers(0, 10), st.just(10))      # tpr, fpr in {0, 0.1, ..., 1}


def _close(got, want: Fraction) -> bool:
    return math.isclose(got, float(want), rel_tol=REL, abs_tol=1e-15)


# --- majority vote ------------------------------------------------------------------------------
@example(p=Fraction(2, 5), n=3, m=2).via("mutant:ties_win mutant:ties_lose")
@example(p=Fraction(2, 5), n=4, m=3).via("mutant:wrong_answers_lumped")
@example(p=Fraction(0), n=3, m=1).via("boundary: p = 0, the correct answer never appears")
@example(p=Fraction(1), n=5, m=3).via("boundary: p = 1, every sample is correct")
@given(p=grid, n=st.integers(1, 6), m=st.integers(1, 3))
def test_majority_equals_enumeration(impl, p, n, m):
    """p_majority_correct(p, n, m) is the probability, summed over all (m + 1)^n answer sequences
    (exact fractions), that the vote as the contract states it (most votes, the earliest first
    occurrence on a tie) is the correct answer."""
    want = p_majority_by_enumeration(p, n, m)
    got = impl.get("p_majority_correct")(float(p), n, m)
    assert _close(got, want), (f"p_majority_correct({float(p)!r}, {n}, {m}) = {got!r}; every answer sequence "
                               f"weighted by its probability gives {float(want)!r}")


@example(p=Fraction(1, 2), n=9, m=2).via("mutant:ties_win mutant:wrong_answers_lumped")
@given(p=grid, n=st.integers(1, 16), m=st.integers(1, 4))
def test_majority_equals_multinomial_sum(impl, p, n, m):
    """p_majority_correct equals the multinomial sum over the vote counts (c, w_1, ..., w_m), the
    correct answer's share 1, 1/(1 + j) or 0 (module docstring), exact fractions."""
    want = p_majority_by_counts(p, n, m)
    got = impl.get("p_majority_correct")(float(p), n, m)
    assert _close(got, want), f"p_majority_correct({float(p)!r}, {n}, {m}) = {got!r}; the multinomial sum: {float(want)!r}"


def test_majority_closed_form_describes_the_vote(impl):
    """The closed form is the implementation's own majority_vote's success probability: every
    answer sequence of n <= 4 samples over m <= 2 wrong answers is voted by the implementation,
    and the probabilities of those it resolves to the correct answer sum to p_majority_correct
    (p = 3/10)."""
    vote, closed = impl.get("majority_vote"), impl.get("p_majority_correct")
    p = Fraction(3, 10)
    for n in range(1, 5):
        for m in (1, 2):
            total = Fraction(0)
            for seq in itertools.product(range(m + 1), repeat=n):
                if vote(list(seq)) == 0:
                    c = seq.count(0)
                    total += p ** c * ((1 - p) / m) ** (n - c)
            got = closed(0.3, n, m)
            assert _close(got, total), (f"p_majority_correct(0.3, {n}, {m}) = {got!r}; the implementation's own "
                                        f"majority_vote picks the correct answer with probability {float(total)!r}")


@example(p=0.3, m=4).via("mutant:ties_win mutant:ties_lose")
@given(p=st.floats(0.0, 1.0), m=st.integers(1, 6))
def test_majority_one_and_two_samples(impl, p, m):
    """One sample: p. Two samples: p too (both correct, or one correct and one wrong, a tie the
    earliest-sample rule resolves each way half the time)."""
    fn = impl.get("p_majority_correct")
    for n in (1, 2):
        got = fn(p, n, m)
        assert math.isclose(got, p, rel_tol=1e-12, abs_tol=1e-15), f"p_majority_correct({p!r}, {n}, {m}) = {got!r}; expected p"


def test_majority_limits_and_symmetry(impl):
    """p = 0 -> 0 and p = 1 -> 1 for every n, m; two answers (m = 1) are symmetric:
    P(p) + P(1 - p) = 1 (swap the labels), so P(1/2) = 1/2; with two answers an even n is no
    better than n - 1 (Condorcet's jury with fair ties)."""
    fn = impl.get("p_majority_correct")
    for n in range(1, 9):
        for m in (1, 2, 5):
            assert fn(0.0, n, m) == 0.0, f"p_majority_correct(0, {n}, {m}) = {fn(0.0, n, m)!r}"
            assert math.isclose(fn(1.0, n, m), 1.0, rel_tol=1e-12), f"p_majority_correct(1, {n}, {m}) = {fn(1.0, n, m)!r}"
        for p in (0.1, 0.35, 0.5, 0.8):
            a, b = fn(p, n, 1), fn(1 - p, n, 1)
            assert math.isclose(a + b, 1.0, rel_tol=1e-12), f"p_majority_correct({p}, {n}, 1) + ({1 - p}, {n}, 1) = {a + b!r}"
        if n % 2 == 0:
            assert math.isclose(fn(0.7, n, 1), fn(0.7, n - 1, 1), rel_tol=1e-12), f"two answers, n = {n} vs {n - 1}"


def test_majority_monotone_on_the_grid(impl):
    """On p in {0, 1/10, ..., 1}, n <= 10, m <= 4: more likely correct samples, or the wrong votes
    spread over more wrong answers, never lower the chance (measured on this grid, which the
    test pins; not claimed beyond it)."""
    fn = impl.get("p_majority_correct")
    for n in range(1, 11):
        for m in range(1, 5):
            row = [fn(k / 10, n, m) for k in range(11)]
            assert all(a <= b * (1 + 1e-12) + 1e-15 for a, b in zip(row, row[1:])), f"not rising in p: n={n}, m={m}: {row}"
            wider = [fn(k / 10, n, m + 1) for k in range(11)]
            assert all(a <= b * (1 + 1e-12) + 1e-15 for a, b in zip(row, wider)), f"m={m} -> {m + 1} lowered it: n={n}"


def test_majority_grows_past_the_best_wrong_answer(impl):
    """Self-consistency's claim (08.06): when the correct answer is the single most likely one,
    majority voting converges to it: p = 0.4 against three wrong answers of 0.2 each climbs from
    0.4 at n = 1 to 0.84 at n = 31 and above 0.95 at n = 61; when a wrong answer is more likely
    (p = 0.3 against one wrong answer of 0.7) it sinks towards 0."""
    fn = impl.get("p_majority_correct")
    assert fn(0.4, 61, 3) > 0.95 and fn(0.4, 61, 3) > fn(0.4, 31, 3) > fn(0.4, 9, 3) > fn(0.4, 1, 3)
    assert fn(0.3, 31, 1) < 0.02 < fn(0.3, 1, 1)


# --- best-of-n with a verifier -----------------------------------------------------------------
@example(p=Fraction(3, 10), n=3, tpr=Fraction(9, 10), fpr=Fraction(2, 10)).via(
    "mutant:no_fallback mutant:precision_ignored")
@example(p=Fraction(1, 2), n=2, tpr=Fraction(0), fpr=Fraction(0)).via("boundary: nothing is ever accepted")
@example(p=Fraction(1, 2), n=3, tpr=Fraction(1), fpr=Fraction(1)).via("boundary: everything is accepted")
@given(p=grid, n=st.integers(1, 5), tpr=rates, fpr=rates)
def test_best_of_n_equals_enumeration(impl, p, n, tpr, fpr):
    """p_best_of_n_correct(p, n, tpr, fpr) is the probability, summed over all 4^n sequences of
    (correct?, accepted?) outcomes (exact fractions), that the earliest accepted sample -- the
    first sample when none is accepted -- is correct."""
    want = p_best_of_n_by_enumeration(p, n, tpr, fpr)
    got = impl.get("p_best_of_n_correct")(float(p), n, float(tpr), float(fpr))
    assert _close(got, want), (f"p_best_of_n_correct({float(p)!r}, {n}, tpr={float(tpr)!r}, fpr={float(fpr)!r}) = "
                               f"{got!r}; every outcome sequence gives {float(want)!r}")


def test_best_of_n_closed_form_describes_the_selection(impl):
    """The closed form is the implementation's own best_of_n_select's success probability: every
    sequence of n <= 4 (correct?, accepted?) outcomes, scored 1 (accepted) or 0, selected by the
    implementation (tpr = 0.8, fpr = 0.3, p = 0.4)."""
    select, closed = impl.get("best_of_n_select"), impl.get("p_best_of_n_correct")
    p, tpr, fpr = Fraction(2, 5), Fraction(4, 5), Fraction(3, 10)
    cell = {(True, True): p * tpr, (True, False): p * (1 - tpr), (False, True): (1 - p) * fpr,
            (False, False): (1 - p) * (1 - fpr)}
    for n in range(1, 5):
        total = Fraction(0)
        for seq in itertools.product(cell, repeat=n):
            if seq[select([1.0 if acc else 0.0 for _, acc in seq])][0]:
                total += math.prod((cell[o] for o in seq), start=Fraction(1))
        got = closed(0.4, n, 0.8, 0.3)
        assert _close(got, total), (f"p_best_of_n_correct(0.4, {n}, 0.8, 0.3) = {got!r}; the implementation's "
                                    f"best_of_n_select picks a correct sample with probability {float(total)!r}")


@example(p=0.3, n=8).via("boundary: the worked pass@8 of cost_per_task (0.942)")
@given(p=st.floats(0.0, 1.0), n=st.integers(1, 64))
def test_perfect_verifier_is_pass_at_n(impl, p, n):
    """With a perfect verifier (the defaults tpr = 1, fpr = 0) best-of-n succeeds when any sample
    is correct: 1 - (1 - p)^n (cost_per_task's pass@k, written here independently)."""
    got = impl.get("p_best_of_n_correct")(p, n)
    want = 1 - (1 - p) ** n
    assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-15), f"p_best_of_n_correct({p!r}, {n}) = {got!r}; pass@n = {want!r}"


@example(p=0.3, n=5, rate=0.6).via("mutant:no_fallback")
@given(p=st.floats(0.0, 1.0), n=st.integers(1, 40), rate=st.floats(0.0, 1.0))
def test_uninformative_verifier_gives_p(impl, p, n, rate):
    """A verifier whose verdict does not depend on correctness (tpr = fpr) picks a sample
    independent of whether it is correct: p, whatever n."""
    got = impl.get("p_best_of_n_correct")(p, n, rate, rate)
    assert math.isclose(got, p, rel_tol=1e-9, abs_tol=1e-12), f"p_best_of_n_correct({p!r}, {n}, {rate!r}, {rate!r}) = {got!r}; expected p"


@example(p=0.3, tpr=0.9, fpr=0.2).via("mutant:precision_ignored")
@given(p=st.floats(0.05, 0.95), tpr=st.floats(0.05, 1.0), fpr=st.floats(0.0, 1.0))
def test_verifier_precision_caps_best_of_n(impl, p, tpr, fpr):
    """As n grows best-of-n tends to the verifier's precision on this task, a / (a + b) (a = p tpr,
    b = (1 - p) fpr): a verifier that accepts wrong answers caps it below 1; n = 1 gives p."""
    fn = impl.get("p_best_of_n_correct")
    a, b = p * tpr, (1 - p) * fpr
    r = 1 - a - b
    n = 1 if r <= 0 else max(1, min(10**6, math.ceil(40 / max(a + b, 1e-12))))
    got = fn(p, n, tpr, fpr)
    assert math.isclose(got, a / (a + b), rel_tol=1e-6, abs_tol=1e-12), (
        f"p_best_of_n_correct({p!r}, {n}, {tpr!r}, {fpr!r}) = {got!r}; the precision a/(a+b) = {a / (a + b)!r}")
    one = fn(p, 1, tpr, fpr)
    assert math.isclose(one, p, rel_tol=1e-9, abs_tol=1e-15), (
        f"p_best_of_n_correct({p!r}, 1, {tpr!r}, {fpr!r}) = {one!r}; one sample is picked whatever the verifier says: p")


def test_best_of_n_monotone(impl):
    """A better verifier (higher tpr, lower fpr) never hurts; more samples never hurt when the
    verifier's precision beats p (grid p, tpr, fpr in tenths, n <= 8)."""
    fn = impl.get("p_best_of_n_correct")
    tenths = [k / 10 for k in range(11)]
    for p in tenths[1:-1]:
        for n in range(1, 9):
            for fpr in tenths:
                row = [fn(p, n, tpr, fpr) for tpr in tenths]
                assert all(x <= y + 1e-12 for x, y in zip(row, row[1:])), f"not rising in tpr: p={p}, n={n}, fpr={fpr}"
            for tpr in tenths:
                row = [fn(p, n, tpr, fpr) for fpr in tenths]
                assert all(x >= y - 1e-12 for x, y in zip(row, row[1:])), f"not falling in fpr: p={p}, n={n}, tpr={tpr}"
        for tpr, fpr in ((0.9, 0.1), (0.6, 0.3), (1.0, 0.5)):
            if p * tpr / (p * tpr + (1 - p) * fpr) > p:
                row = [fn(p, n, tpr, fpr) for n in range(1, 9)]
                assert all(x <= y + 1e-12 for x, y in zip(row, row[1:])), f"not rising in n: p={p}, {tpr}, {fpr}: {row}"


# --- hand-computed numbers ----------------------------------------------------------------------
def test_hand_computed_numbers(impl):
    """The numbers docs/best_of_n.md works by hand (the course outline states none). Majority of 3
    at p = 0.4 against two wrong answers of 0.3 each: three or two correct votes win (0.064 + 0.288);
    one correct vote wins only a three-way tie (the two wrong votes differ: 3 x 0.4 x 2 x 0.3^2),
    a third of the time (0.072): 0.424 = 53/125, above one sample's 0.4. Best-of-4 at p = 0.3 with
    a verifier of accuracy 0.9 (tpr 0.9, fpr 0.1): a = 0.27, b = 0.07, r = 0.66:
    0.27 (1 - 0.66^4) / 0.34 + 0.66^3 x 0.03 = 0.6520608 (pass@4 would be 0.7599)."""
    got = impl.get("p_majority_correct")(0.4, 3, 2)
    assert _close(got, Fraction(53, 125)), f"p_majority_correct(0.4, 3, 2) = {got!r}, expected 0.424"
    want = Fraction(27, 100) * (1 - Fraction(66, 100) ** 4) / Fraction(34, 100) + Fraction(66, 100) ** 3 * Fraction(3, 100)
    got = impl.get("p_best_of_n_correct")(0.3, 4, 0.9, 0.1)
    assert _close(got, want), f"p_best_of_n_correct(0.3, 4, 0.9, 0.1) = {got!r}, expected {float(want)!r}"


# --- bad input ---------------------------------------------------------------------------------
def _probability(name: str) -> list[Bad]:
    return [Bad(f"negative {name}", {name: -0.1}, ValueError, (name,)),
            Bad(f"{name} above one", {name: 1.0000001}, ValueError, (name,)),
            Bad(f"{name} a percentage", {name: 40}, ValueError, (name,)),
            Bad(f"nan {name}", {name: float("nan")}, ValueError, (name,)),
            Bad(f"str {name}", {name: "0.4"}, TypeError, (name,)),
            Bad(f"bool {name}", {name: True}, TypeError, (name,)),
            Bad(f"None {name}", {name: None}, TypeError, (name,))]


def _count(name: str) -> list[Bad]:
    return [Bad(f"zero {name}", {name: 0}, ValueError, (name,)),
            Bad(f"negative {name}", {name: -1}, ValueError, (name,)),
            Bad(f"float {name}", {name: 3.0}, TypeError, (name,)),
            Bad(f"bool {name}", {name: True}, TypeError, (name,)),
            Bad(f"None {name}", {name: None}, TypeError, (name,))]


@bad_cases(_probability("p") + _count("n") + _count("m"))
def test_p_majority_correct_rejects_bad_input(impl, bad):
    """p a real in [0, 1]; n, m ints >= 1."""
    assert_rejects(impl.get("p_majority_correct"), dict(p=0.4, n=3, m=2), bad)


@bad_cases(_probability("p") + _count("n") + _probability("tpr") + _probability("fpr"))
def test_p_best_of_n_correct_rejects_bad_input(impl, bad):
    """p, tpr, fpr reals in [0, 1]; n an int >= 1."""
    assert_rejects(impl.get("p_best_of_n_correct"), dict(p=0.4, n=3, tpr=0.9, fpr=0.1), bad)


@pytest.mark.parametrize("p", [0, 1, Fraction(1, 3)])
def test_exact_numbers_accepted(impl, p):
    """An int or a Fraction is a real number: p = 0, 1, 1/3 are accepted."""
    got = impl.get("p_majority_correct")(p, 3, 2)
    assert math.isclose(got, float(p_majority_by_counts(Fraction(p), 3, 2)), rel_tol=REL, abs_tol=1e-15)
    got = impl.get("p_best_of_n_correct")(p, 3, 1, 0)
    assert math.isclose(got, 1 - (1 - float(p)) ** 3, rel_tol=REL, abs_tol=1e-15)
