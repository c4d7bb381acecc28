"""Best-of-N, self-consistency and verifiers (course 08.06-08.07): spend the budget sideways
instead of deep -- sample N answers to one prompt and pick one -- and put a second model, a
verifier or reward model, in the request path to score them.

Three ways to pick one of N sampled answers (the selection functions):

* **Self-consistency** (majority vote, 08.06): :func:`majority_vote` returns the answer given
  most often. It needs no verifier, only answers that can be compared (the extracted final
  answer, not the reasoning).
* **Verifier-weighted vote** (08.07, scoring the final answer): :func:`weighted_vote` sums a
  score per sample over the samples giving each answer and returns the answer of the largest sum.
* **Best-of-N by score** (08.07): :func:`best_of_n_select` returns the index of the sample with
  the highest score. The score of an outcome reward model scores the final answer; a process
  reward model scores each step and :func:`process_score` folds the step scores into one.

The tie rule (every selection function): **the earliest sample wins**. A vote returns, among the
answers tied for the most votes (the largest sum), the one whose first occurrence comes first in
``answers``; :func:`best_of_n_select` returns the smallest index among the highest scores. For
i.i.d. samples this is, in distribution, a fair coin among the tied answers (every order of the
samples is equally likely, so each tied answer is equally likely to occur first): the closed
forms below are the same as for a uniformly random tie-break.

Answers are compared as dictionary keys (``==`` and ``hash``: ``1``, ``1.0`` and ``True`` are one
answer); the object returned is the answer's first occurrence in ``answers``. ``None`` means *no
answer was extracted* from that sample: it casts no vote; when no sample has an answer the vote
returns ``None``.

Closed forms (the toy tasks of the course, every sample i.i.d.):

* :func:`p_majority_correct`\\ ``(p, n, m)``: each sample's answer is the correct one with
  probability ``p`` and each of ``m`` wrong answers with probability ``(1 - p) / m``. The
  probability that :func:`majority_vote` of ``n`` samples is the correct answer is
  ``sum over the vote counts (c, w_1, ..., w_m) of Multinomial(n; p, q/m, ..., q/m)`` times the
  correct answer's share: 1 if ``c`` is larger than every ``w_i``, ``1 / (1 + j)`` if ``c`` equals
  the largest ``w_i`` and ``j`` wrong answers have ``c`` votes, 0 if some ``w_i > c`` (``c = 0``
  never wins: some wrong answer has a vote). ``m = 1`` is the two-answer case (Condorcet's jury).
  At ``n = 1`` and ``n = 2`` it is ``p`` (two votes split 1-1 is a coin flip).
* :func:`p_best_of_n_correct`\\ ``(p, n, tpr, fpr)``: each sample is correct with probability
  ``p``; a binary verifier accepts (score 1) a correct sample with probability ``tpr`` and a wrong
  one with probability ``fpr``, independently, and rejects (score 0) otherwise; the selection is
  :func:`best_of_n_select` of the scores: the earliest accepted sample, or the first sample when
  none is accepted. With ``a = p tpr``, ``b = (1 - p) fpr`` and ``r = 1 - a - b``:
  ``P = a (1 - r^n) / (a + b) + r^(n - 1) p (1 - tpr)`` (the first term is 0 when ``a + b = 0``).
  A perfect verifier (``tpr = 1, fpr = 0``) gives pass@n ``= 1 - (1 - p)^n``; a verifier that
  accepts wrong answers (``fpr > 0``) caps it at its precision ``a / (a + b)`` as n grows. A
  verifier of accuracy ``alpha`` on both classes is ``tpr = alpha, fpr = 1 - alpha``.

Bad input (``TypeError`` for the wrong kind, ``ValueError`` for an illegal value, each naming the
argument; nothing is modified): ``answers``/``scores``/``weights``/``step_scores`` not a list or
tuple (a str is not one) or empty; an unhashable answer; a score, weight or step score not a real
number (a bool is not one), not finite, a negative weight, a step score outside [0, 1];
``weights`` of another length than ``answers``; ``aggregate`` not one of "min", "prod", "last";
``p``, ``tpr``, ``fpr`` not reals in [0, 1]; ``n``, ``m`` not ints >= 1. Arguments are checked in
the order of the signature (``answers`` before ``weights``), so a call with several bad arguments
names the first.

Choices the law leaves open (checked at token-exact only, ``@pytest.mark.choice``): a vote's sums
and ``process_score``'s product are float additions / multiplications in sample (step) order,
so which answer wins a near-tie of float sums, and the last bits of a product, are the
reference's; the closed forms are floats within 1e-9 relative of the exact value.
"""
from __future__ import annotations

import math
from collections.abc import Hashable
from fractions import Fraction

from reference._checks import check_int, check_real

__all__ = ["majority_vote", "weighted_vote", "best_of_n_select", "process_score",
           "p_majority_correct", "p_best_of_n_correct"]  # the contract
__optional__ = []  # checked when an implementation provides them

AGGREGATES = ("min", "prod", "last")  # how process_score folds a process reward model's step scores


def _samples(name: str, values) -> list:
    """``values`` as a non-empty list; TypeError / ValueError naming ``name``."""
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"{name} must be a list or tuple, got {type(values).__name__}")
    if len(values) == 0:
        raise ValueError(f"{name} must not be empty: there is nothing to select from")
    return list(values)


def _reals(name: str, values, *, minimum: float | None = None, maximum: float | None = None) -> list[float]:
    """``values`` as a non-empty list of finite floats in [minimum, maximum], naming ``name``."""
    values = _samples(name, values)
    out = []
    for i, v in enumerate(values):
        try:
            out.append(check_real(f"{name}[{i}]", v, minimum=minimum, maximum=maximum))
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{name}: {exc}") from None
    return out


def _answers(answers) -> list:
    answers = _samples("answers", answers)
    for i, a in enumerate(answers):
        if not isinstance(a, Hashable):
            raise TypeError(f"answers[{i}] must be hashable (answers are compared as dict keys), got {type(a).__name__}")
    return answers


def _vote(answers: list, weights: list) -> Hashable | None:
    """The answer of the largest total weight (sums in sample order); ties to the earliest first
    occurrence; None when every answer is None."""
    totals: dict = {}
    for answer, w in zip(answers, weights):
        if answer is None:
            continue
        totals[answer] = totals.get(answer, 0.0) + w   # a dict keeps the first occurrence's key
    best, best_total = None, None
    for answer, total in totals.items():              # first-occurrence order
        if best_total is None or total > best_total:
            best, best_total = answer, total
    return best


def majority_vote(answers: list | tuple) -> Hashable | None:
    """Self-consistency: the answer given by the most samples (``None`` entries cast no vote).
    Ties: the tied answer whose first occurrence is earliest. ``None`` when no sample has an
    answer. The object returned is the answer's first occurrence.

    Bad input: ``answers`` not a list or tuple -> TypeError; empty -> ValueError; an unhashable
    answer -> TypeError; each naming ``answers``."""
    answers = _answers(answers)
    return _vote(answers, [1] * len(answers))


def weighted_vote(answers: list | tuple, weights: list | tuple) -> Hashable | None:
    """Verifier-weighted vote: the answer whose samples' weights (a verifier's scores) sum highest,
    summed in sample order; ``None`` answers are skipped whatever their weight. Ties (equal
    sums): the earliest first occurrence, as :func:`majority_vote`, which it equals when every
    weight is 1. ``None`` when no sample has an answer.

    Bad input: ``answers`` as :func:`majority_vote`; ``weights`` not a list or tuple, of another
    length than ``answers``, holding a non-real (a bool), a negative or non-finite weight ->
    TypeError / ValueError naming ``weights``."""
    answers = _answers(answers)
    weights = _reals("weights", weights, minimum=0.0)
    if len(weights) != len(answers):
        raise ValueError(f"weights must have one weight per answer: {len(weights)} weights for {len(answers)} answers")
    return _vote(answers, weights)


def best_of_n_select(scores: list | tuple) -> int:
    """Best-of-N by score: the index of the highest score (an int in ``range(len(scores))``).
    Ties: the smallest index (the earliest sample).

    Bad input: ``scores`` not a list or tuple -> TypeError; empty -> ValueError; a score that
    is not a real number (a bool is not one) -> TypeError; NaN or infinite -> ValueError; each
    naming ``scores``."""
    scores = _reals("scores", scores)
    best = 0
    for i in range(1, len(scores)):
        if scores[i] > scores[best]:
            best = i
    return best


def process_score(step_scores: list | tuple, aggregate: str = "min") -> float:
    """One score for a solution from a process reward model's per-step scores (each the
    probability that the step is correct, in [0, 1]): ``"min"`` the weakest step, ``"prod"`` the
    product in step order (every step correct, if independent), ``"last"`` the final step's
    score. A float.

    Bad input: ``step_scores`` not a list or tuple, empty, holding a non-real or a value outside
    [0, 1] -> TypeError / ValueError naming ``step_scores``; ``aggregate`` not a str ->
    TypeError, not one of "min", "prod", "last" -> ValueError naming ``aggregate``."""
    steps = _reals("step_scores", step_scores, minimum=0.0, maximum=1.0)
    if not isinstance(aggregate, str):
        raise TypeError(f"aggregate must be a str, got {type(aggregate).__name__}")
    if aggregate not in AGGREGATES:
        raise ValueError(f"aggregate must be one of {AGGREGATES}, got {aggregate!r}")
    if aggregate == "min":
        return min(steps)
    if aggregate == "last":
        return steps[-1]
    product = 1.0
    for s in steps:
        product *= s
    return product


def _probability(name: str, value) -> float:
    return check_real(name, value, minimum=0.0, maximum=1.0)


def _wrong_share(wrong_votes: int, c: int, m: int) -> float:
    """E[the correct answer's share] given it has ``c`` votes and the other ``wrong_votes`` votes
    fall independently and uniformly on ``m`` wrong answers: 1 if every wrong answer has fewer
    than ``c`` votes, 1/(1 + j) if ``j`` of them have exactly ``c`` and none more, else 0.

    Counts the vote sequences exactly (integers): ``ways[u][j]`` = sequences of the votes placed
    so far on the wrong answers processed so far, ``u`` votes used, ``j`` answers at ``c``."""
    if c == 0:
        return 0.0
    ways = {(0, 0): 1}
    for _ in range(m):
        nxt: dict = {}
        for (used, ties), count in ways.items():
            for k in range(min(c, wrong_votes - used) + 1):      # this answer's votes: at most c
                key = (used + k, ties + (k == c))
                nxt[key] = nxt.get(key, 0) + count * math.comb(wrong_votes - used, k)
        ways = nxt
    shared = sum(Fraction(count, 1 + ties) for (used, ties), count in ways.items() if used == wrong_votes)
    return float(shared / m ** wrong_votes)


def p_majority_correct(p: float, n: int, m: int) -> float:
    """The probability that :func:`majority_vote` of ``n`` i.i.d. samples is the correct answer
    when each sample is correct with probability ``p`` and otherwise one of ``m`` wrong answers,
    each equally likely (module docstring: the multinomial sum, ties shared as the earliest-sample
    rule shares them). A float; ``p`` at ``n = 1`` and ``n = 2``; 0 at ``p = 0``, 1 at ``p = 1``.

    Bad input: ``p`` not a real in [0, 1] -> TypeError / ValueError naming ``p``; ``n``, ``m`` not
    ints >= 1 -> TypeError / ValueError naming them."""
    p = _probability("p", p)
    n = check_int("n", n, minimum=1)
    m = check_int("m", m, minimum=1)
    total = 0.0
    for c in range(n + 1):
        weight = math.comb(n, c) * p ** c * (1.0 - p) ** (n - c)
        if weight:
            total += weight * _wrong_share(n - c, c, m)
    return total


def p_best_of_n_correct(p: float, n: int, tpr: float = 1.0, fpr: float = 0.0) -> float:
    """The probability that :func:`best_of_n_select` of ``n`` i.i.d. samples' verifier scores
    picks a correct sample, each sample correct with probability ``p`` and scored 1 (accepted) by
    a binary verifier with probability ``tpr`` if correct and ``fpr`` if wrong, else 0: the
    earliest accepted sample, or the first when none is accepted (module docstring:
    ``a (1 - r^n) / (a + b) + r^(n - 1) p (1 - tpr)``). A float; pass@n ``1 - (1 - p)^n`` with
    the defaults (a perfect verifier).

    Bad input: ``p``, ``tpr``, ``fpr`` not reals in [0, 1] -> TypeError / ValueError naming them;
    ``n`` not an int >= 1 -> TypeError / ValueError naming ``n``."""
    p = _probability("p", p)
    n = check_int("n", n, minimum=1)
    tpr = _probability("tpr", tpr)
    fpr = _probability("fpr", fpr)
    accept_right = p * tpr                  # a: correct and accepted
    accept_wrong = (1.0 - p) * fpr          # b: wrong and accepted
    reject = max(0.0, 1.0 - accept_right - accept_wrong)
    some = 0.0
    if accept_right + accept_wrong > 0:     # some sample accepted: the first accepted one is picked
        some = accept_right / (accept_right + accept_wrong) * (1.0 - reject ** n)
    none = reject ** (n - 1) * p * (1.0 - tpr)   # none accepted: the first sample, correct but rejected
    return some + none
