"""The selection functions of `best_of_n` (course 08.06-08.07): majority vote, verifier-weighted
vote, best-of-N by score and a process reward model's step scores folded into one.

The tie rule (the contract): the earliest sample wins. It is pinned exhaustively on small domains
(every answer sequence of length 1-5 over {None, 0, 1, 2}: 1,364 votes; every weighted sequence of
length 1-3 over answers {None, 0, 1} and weights {0, 1/4, 1/2, 1}: 1,884; every score sequence of
length 1-5 over {0, 1/2, 1}: 363; every step-score sequence of length 1-4 over {0, 1/2, 1} with
each aggregate: 360), each against the naive rule of oracles.py (exact fractions, comparisons with
==, no dictionaries), then by metamorphic properties on random inputs and by bad-input tables.
"""
from __future__ import annotations

import itertools
from fractions import Fraction

import pytest
from hypothesis import example, given, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from spec_tests.best_of_n.oracles import fold_steps, select, vote

ANSWERS = (None, 0, 1, 2)
WEIGHTS = (0.0, 0.25, 0.5, 1.0)          # dyadic: every sum is exact, so ties are the law's
SCORES = (0.0, 0.5, 1.0)


def _same(got, want) -> bool:
    """Equal and of the same type (the object returned is the first occurrence)."""
    return got == want and type(got) is type(want)


# --- bounded-exhaustive ------------------------------------------------------------------------
def test_every_short_vote(impl):
    """majority_vote of every sequence of 1-5 answers over {None, 0, 1, 2} is the naive rule's:
    most votes, ties to the earliest first occurrence, None casts no vote, None when no answer."""
    fn = impl.get("majority_vote")
    for n in range(1, 6):
        for seq in itertools.product(ANSWERS, repeat=n):
            got, want = fn(list(seq)), vote(list(seq))
            assert _same(got, want), f"majority_vote({list(seq)}) = {got!r}; most votes, earliest on a tie: {want!r}"


def test_every_short_weighted_vote(impl):
    """weighted_vote of every sequence of 1-3 (answer, weight) pairs, answers {None, 0, 1},
    weights {0, 1/4, 1/2, 1}: the largest sum of weights, ties (exact: dyadic sums) to the
    earliest first occurrence, None skipped whatever its weight."""
    fn = impl.get("weighted_vote")
    for n in range(1, 4):
        for pairs in itertools.product(itertools.product(ANSWERS[:3], WEIGHTS), repeat=n):
            answers, weights = [a for a, _ in pairs], [w for _, w in pairs]
            got, want = fn(answers, weights), vote(answers, weights)
            assert _same(got, want), (f"weighted_vote({answers}, {weights}) = {got!r}; the largest sum of weights, "
                                      f"earliest on a tie: {want!r}")


def test_every_short_score_selection(impl):
    """best_of_n_select of every sequence of 1-5 scores over {0, 1/2, 1}: the index of the highest,
    the smallest index on a tie."""
    fn = impl.get("best_of_n_select")
    for n in range(1, 6):
        for scores in itertools.product(SCORES, repeat=n):
            got, want = fn(list(scores)), select(scores)
            assert type(got) is int and got == want, (f"best_of_n_select({list(scores)}) = {got!r}; the highest "
                                                      f"score's smallest index: {want}")


def test_every_short_process_score(impl):
    """process_score of every sequence of 1-4 step scores over {0, 1/2, 1} with each aggregate:
    min, the product, the last step (exact: dyadic)."""
    fn = impl.get("process_score")
    for n in range(1, 5):
        for steps in itertools.product(SCORES, repeat=n):
            for aggregate in ("min", "prod", "last"):
                got, want = fn(list(steps), aggregate), fold_steps(steps, aggregate)
                assert isinstance(got, float) and got == want, (
                    f"process_score({list(steps)}, {aggregate!r}) = {got!r}; expected {float(want)!r}")
    assert fn([0.5, 1.0, 0.25]) == 0.25, "process_score's default aggregate is 'min'"


# --- the tie rule and the answers' identity ----------------------------------------------------
@example(answers=[1, 2, 2, 1]).via("mutant:tie_to_latest")
@example(answers=[None, None, 3]).via("mutant:none_is_a_vote")
@example(answers=[None]).via("boundary: no sample has an answer")
@given(answers=st.lists(st.one_of(st.none(), st.integers(0, 3), st.sampled_from(["a", "b"])), min_size=1, max_size=9))
def test_vote_is_the_rule(impl, answers):
    """majority_vote on random answers (ints, strs, None) equals the naive rule, and equals
    weighted_vote with every weight 1."""
    want = vote(answers)
    got = impl.get("majority_vote")(answers)
    assert _same(got, want), f"majority_vote({answers}) = {got!r}; expected {want!r}"
    got = impl.get("weighted_vote")(answers, [1.0] * len(answers))
    assert _same(got, want), f"weighted_vote({answers}, [1.0] * {len(answers)}) = {got!r}; the plain vote: {want!r}"


def test_equal_answers_are_one_answer(impl):
    """Answers are compared as dict keys (== and hash): 1, 1.0 and True are one answer, and the
    object returned is its first occurrence; a tuple answer is one answer."""
    mv, wv = impl.get("majority_vote"), impl.get("weighted_vote")
    for answers, want in (([1.0, 1, True], 1.0), ([2, 1, 1.0], 1), ([True, 2, 1, 2], True), ([(1, 2), (1, 2), 3], (1, 2)),
                          (["x", "y", "y", "x", "x"], "x")):
        got = mv(answers)
        assert _same(got, want), f"majority_vote({answers}) = {got!r}; expected {want!r} (the first occurrence)"
        got = wv(answers, [0.5] * len(answers))
        assert _same(got, want), f"weighted_vote({answers}, 0.5 each) = {got!r}; expected {want!r}"


@example(answers=[0, 1, 2, 1, 0], seed=0).via("boundary: a two-way tie, kept by every relation")
@given(answers=st.lists(st.one_of(st.none(), st.integers(0, 4)), min_size=1, max_size=10), seed=st.integers(0, 2**16))
def test_vote_metamorphic(impl, answers, seed):
    """Relabelling the answers relabels the winner; the answers repeated twice, or with None
    samples inserted anywhere, have the same winner."""
    import random
    rng = random.Random(seed)
    fn = impl.get("majority_vote")
    base = fn(answers)
    labels = list(range(5))
    rng.shuffle(labels)
    relabelled = [None if a is None else f"ans{labels[a]}" for a in answers]
    got = fn(relabelled)
    want = None if base is None else f"ans{labels[base]}"
    assert got == want, f"majority_vote({relabelled}) = {got!r}; relabelling {answers} (winner {base!r}) gives {want!r}"
    got = fn(answers + answers)
    assert got == base, f"majority_vote of {answers} twice = {got!r}; once: {base!r}"
    padded = list(answers)
    for _ in range(rng.randint(1, 3)):
        padded.insert(rng.randint(0, len(padded)), None)
    got = fn(padded)
    assert got == base, f"majority_vote({padded}) = {got!r}; without the None samples: {base!r}"


@example(pairs=[(0, 6), (1, 2), (1, 2)]).via("mutant:weights_ignored mutant:weighted_max_not_sum")
@example(pairs=[(0, 2), (1, 4), (0, 2)]).via("mutant:tie_to_latest")
@example(pairs=[(None, 8), (1, 2)]).via("mutant:none_is_a_vote")
@given(pairs=st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 3)), st.integers(0, 8)), min_size=1, max_size=10))
def test_weighted_vote_is_the_rule(impl, pairs):
    """weighted_vote on random answers and weights k/8 (exact sums): the naive rule."""
    answers, weights = [a for a, _ in pairs], [k / 8 for _, k in pairs]
    got, want = impl.get("weighted_vote")(answers, weights), vote(answers, weights)
    assert _same(got, want), f"weighted_vote({answers}, {weights}) = {got!r}; expected {want!r}"


@example(scores=[0.5, 0.9, 0.9]).via("mutant:select_ties_to_last")
@example(scores=[-2.0, -1.0, -3.0]).via("boundary: negative scores (a reward model's logits)")
@given(scores=st.lists(st.integers(-4, 4), min_size=1, max_size=12))
def test_select_is_the_rule(impl, scores):
    """best_of_n_select on random scores (reward-model logits may be negative): the highest, the
    smallest index on a tie; scaling by 2 and shifting by an integer (exact) change nothing."""
    fn = impl.get("best_of_n_select")
    floats = [float(s) for s in scores]
    got = fn(floats)
    assert got == select(floats), f"best_of_n_select({floats}) = {got!r}; expected {select(floats)}"
    for other in ([2.0 * s for s in floats], [s + 7.0 for s in floats], tuple(floats)):
        assert fn(other) == got, f"best_of_n_select({other!r}) = {fn(other)!r}; for {floats}: {got}"


@example(steps=[0.5, 0.25, 1.0]).via("mutant:prod_is_mean mutant:min_is_last")
@given(steps=st.lists(st.integers(0, 16), min_size=1, max_size=8))
def test_process_score_is_the_rule(impl, steps):
    """process_score with step scores k/16: min, product (within 1e-12 relative: the order of the
    multiplications is the reference's choice), last."""
    fn = impl.get("process_score")
    xs = [k / 16 for k in steps]
    for aggregate in ("min", "last"):
        got = fn(xs, aggregate)
        assert got == fold_steps(xs, aggregate), f"process_score({xs}, {aggregate!r}) = {got!r}"
    got, want = fn(xs, "prod"), fold_steps(xs, "prod")
    assert abs(got - want) <= 1e-12 * want, f"process_score({xs}, 'prod') = {got!r}; the product is {float(want)!r}"


# --- the reference's choices (token-exact only) -------------------------------------------------
@pytest.mark.choice("a weighted vote sums each answer's weights as floats in sample order")
def test_weighted_sums_in_sample_order(impl):
    """1e16 + 1 + 1 in sample order is 1e16 (each 1 is lost to rounding), less than 1e16 + 2, so
    "b" wins; an exact sum would tie and give "a" (earliest)."""
    got = impl.get("weighted_vote")(["a", "a", "a", "b"], [1e16, 1.0, 1.0, 1e16 + 2])
    assert got == "b", f"weighted_vote: {got!r}; in sample order 'a' sums to 1e16 < 1e16 + 2"


@pytest.mark.choice("process_score's product multiplies the step scores in step order")
def test_product_in_step_order(impl):
    steps = [0.1, 0.3, 0.7, 0.9, 0.11]
    want = 1.0
    for s in steps:
        want *= s
    got = impl.get("process_score")(steps, "prod")
    assert got == want, f"process_score({steps}, 'prod') = {got!r}; in step order: {want!r}"


# --- bad input ---------------------------------------------------------------------------------
def _sample_list(name: str) -> list[Bad]:
    return [Bad(f"{name} a str", {name: "abc"}, TypeError, (name,)),
            Bad(f"{name} a set", {name: {1, 2}}, TypeError, (name,)),
            Bad(f"{name} None", {name: None}, TypeError, (name,)),
            Bad(f"empty {name}", {name: []}, ValueError, (name,)),
            Bad(f"empty tuple {name}", {name: ()}, ValueError, (name,))]


def _real_list(name: str, *, negative_ok: bool, unit: bool = False) -> list[Bad]:
    rows = [Bad(f"nan in {name}", {name: [0.5, float("nan")]}, ValueError, (name,)),
            Bad(f"inf in {name}", {name: [float("inf"), 0.5]}, ValueError, (name,)),
            Bad(f"str in {name}", {name: [0.5, "1"]}, TypeError, (name,)),
            Bad(f"bool in {name}", {name: [True, 0.5]}, TypeError, (name,)),
            Bad(f"None in {name}", {name: [0.5, None]}, TypeError, (name,))]
    if not negative_ok:
        rows.append(Bad(f"negative in {name}", {name: [0.5, -0.25]}, ValueError, (name,)))
    if unit:
        rows.append(Bad(f"above one in {name}", {name: [0.5, 1.5]}, ValueError, (name,)))
    return rows


ANSWERS_BAD = _sample_list("answers") + [
    Bad("unhashable answer", dict(answers=[1, [2]]), TypeError, ("answers",)),
    Bad("dict answer", dict(answers=[{"x": 1}, 1]), TypeError, ("answers",)),
]


@bad_cases(ANSWERS_BAD)
def test_majority_vote_rejects_bad_input(impl, bad):
    """answers: a non-empty list or tuple of hashable answers (None allowed)."""
    assert_rejects(impl.get("majority_vote"), dict(answers=[1, 2]), bad)


WEIGHTED_BAD = [Bad(b.id, {**b.change, "weights": [0.5, 0.5]}, b.error, b.words) for b in ANSWERS_BAD] + [
    b for b in _sample_list("weights") if "empty" not in b.id] + _real_list("weights", negative_ok=False) + [
    Bad("more weights than answers", dict(weights=[0.5, 0.5, 0.5]), ValueError, ("weights",)),
    Bad("fewer weights than answers", dict(weights=[0.5]), ValueError, ("weights",)),
    Bad("empty weights", dict(weights=[]), ValueError, ("weights",)),
]


@bad_cases(WEIGHTED_BAD)
def test_weighted_vote_rejects_bad_input(impl, bad):
    """answers as majority_vote's; weights: one finite real >= 0 per answer."""
    assert_rejects(impl.get("weighted_vote"), dict(answers=[1, 2], weights=[0.5, 0.25]), bad)


@bad_cases(_sample_list("scores") + _real_list("scores", negative_ok=True))
def test_best_of_n_select_rejects_bad_input(impl, bad):
    """scores: a non-empty list or tuple of finite reals (negative allowed)."""
    assert_rejects(impl.get("best_of_n_select"), dict(scores=[0.5, 0.25]), bad)


PROCESS_BAD = _sample_list("step_scores") + _real_list("step_scores", negative_ok=False, unit=True) + [
    Bad("unknown aggregate", dict(aggregate="mean"), ValueError, ("aggregate",)),
    Bad("aggregate in capitals", dict(aggregate="MIN"), ValueError, ("aggregate",)),
    Bad("aggregate None", dict(aggregate=None), TypeError, ("aggregate",)),
    Bad("aggregate a callable", dict(aggregate=min), TypeError, ("aggregate",)),
]


@bad_cases(PROCESS_BAD)
def test_process_score_rejects_bad_input(impl, bad):
    """step_scores: a non-empty list or tuple of reals in [0, 1]; aggregate one of "min", "prod", "last"."""
    assert_rejects(impl.get("process_score"), dict(step_scores=[0.5, 0.25], aggregate="prod"), bad)


def test_inputs_not_modified(impl):
    """The selection functions read their lists and leave them as they were."""
    answers, weights, scores = [2, None, 1, 2], [0.5, 1.0, 0.25, 0.25], [0.25, 0.75, 0.75]
    impl.get("majority_vote")(answers)
    impl.get("weighted_vote")(answers, weights)
    impl.get("best_of_n_select")(scores)
    impl.get("process_score")(scores, "prod")
    assert (answers, weights, scores) == ([2, None, 1, 2], [0.5, 1.0, 0.25, 0.25], [0.25, 0.75, 0.75])


def test_fractions_as_weights(impl):
    """A Fraction and a numpy float are real numbers: accepted (the sums as floats)."""
    import numpy as np
    assert impl.get("weighted_vote")(["a", "b", "b"], [Fraction(3, 4), np.float64(0.5), 0.5]) == "b"
    assert impl.get("best_of_n_select")([np.float32(0.5), Fraction(1, 3), 2]) == 2
