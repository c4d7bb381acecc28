"""Oracles of `best_of_n` written from the contract's words, never from the reference's code:
naive selection rules (comparisons with ``==``, no dictionaries), exact enumeration of every
sample sequence (exact fractions), the multinomial sum over vote counts, and a seeded Monte-Carlo
simulation of many tasks."""
from __future__ import annotations

import functools
import itertools
import math
import random
from fractions import Fraction

# --- selection rules ---------------------------------------------------------------------------


def vote(answers, weights=None):
    """The contract's vote, naively: for every answer (not None) the sum of the weights (exact
    fractions; 1 each without weights) of the samples equal to it; the largest sum wins; among
    equal sums the answer occurring first; the object returned is that first occurrence."""
    weights = [1] * len(answers) if weights is None else weights
    best_index, best_total = None, None
    for i, a in enumerate(answers):
        if a is None:
            continue
        if any(b is not None and b == a for b in answers[:i]):
            continue                                   # not this answer's first occurrence
        total = sum((Fraction(w) for b, w in zip(answers, weights) if b is not None and b == a), Fraction(0))
        if best_total is None or total > best_total:
            best_index, best_total = i, total
    return None if best_index is None else answers[best_index]


def select(scores) -> int:
    """The smallest index among the highest scores."""
    top = max(scores)
    return min(i for i, s in enumerate(scores) if s == top)


def fold_steps(steps, aggregate):
    """process_score's value, exact for dyadic step scores (a Fraction)."""
    steps = [Fraction(s) for s in steps]
    if aggregate == "min":
        return sorted(steps)[0]
    if aggregate == "last":
        return steps[-1]
    return math.prod(steps, start=Fraction(1))


# --- majority vote: exact probability ----------------------------------------------------------


@functools.lru_cache(maxsize=None)
def majority_wins_by_enumeration(n: int, m: int) -> tuple[int, ...]:
    """For each number c of correct samples, how many of the (m + 1)^n answer sequences (answer
    0 correct, 1..m wrong) with c zeros the vote (:func:`vote`, the tie rule as written) resolves
    to 0."""
    wins = [0] * (n + 1)
    for seq in itertools.product(range(m + 1), repeat=n):
        if vote(list(seq)) == 0:
            wins[seq.count(0)] += 1
    return tuple(wins)


def p_majority_by_enumeration(p: Fraction, n: int, m: int) -> Fraction:
    """Every answer sequence weighted by its probability p^c ((1 - p)/m)^(n - c)."""
    wrong = (1 - p) / m
    return sum((w * p ** c * wrong ** (n - c) for c, w in enumerate(majority_wins_by_enumeration(n, m))), Fraction(0))


def compositions(total: int, parts: int):
    """Every tuple of ``parts`` ints >= 0 summing to ``total``."""
    if parts == 1:
        yield (total,)
        return
    for first in range(total + 1):
        for rest in compositions(total - first, parts - 1):
            yield (first,) + rest


def p_majority_by_counts(p: Fraction, n: int, m: int) -> Fraction:
    """The multinomial sum over vote counts (c, w_1, ..., w_m): n! / (c! w_1! ... w_m!) p^c
    ((1 - p)/m)^(n - c) times the correct answer's share (1 if c beats every w_i, 1/(1 + j) if j
    of them tie with c at the top, 0 if one beats c)."""
    wrong = (1 - p) / m
    total = Fraction(0)
    for counts in compositions(n, m + 1):
        c, ws = counts[0], counts[1:]
        top = max(ws)
        if c == 0 or top > c:
            continue
        share = Fraction(1, 1 + sum(1 for w in ws if w == c))
        ways = math.factorial(n)
        for k in counts:
            ways //= math.factorial(k)
        total += ways * p ** c * wrong ** (n - c) * share
    return total


# --- best-of-n with a binary verifier: exact probability ---------------------------------------


def p_best_of_n_by_enumeration(p: Fraction, n: int, tpr: Fraction, fpr: Fraction) -> Fraction:
    """Every sequence of n (correct?, accepted?) outcomes with its probability; the pick is
    :func:`select` of the verifier's scores (1 accepted, 0 rejected)."""
    cell = {(True, True): p * tpr, (True, False): p * (1 - tpr),
            (False, True): (1 - p) * fpr, (False, False): (1 - p) * (1 - fpr)}
    total = Fraction(0)
    for seq in itertools.product(cell, repeat=n):
        prob = math.prod((cell[o] for o in seq), start=Fraction(1))
        if prob and seq[select([1 if acc else 0 for _, acc in seq])][0]:
            total += prob
    return total


# --- seeded simulation -------------------------------------------------------------------------


def simulate_majority(p: float, n: int, m: int, tasks: int, seed: int) -> int:
    """Tasks (of ``tasks``) whose vote over n sampled answers is the correct answer 0."""
    rng = random.Random(seed)
    solved = 0
    for _ in range(tasks):
        answers = [0 if rng.random() < p else 1 + rng.randrange(m) for _ in range(n)]
        solved += vote(answers) == 0
    return solved


def simulate_best_of_n(p: float, n: int, tpr: float, fpr: float, tasks: int, seed: int) -> int:
    """Tasks whose pick (the earliest accepted sample, else the first) is correct."""
    rng = random.Random(seed)
    solved = 0
    for _ in range(tasks):
        correct = [rng.random() < p for _ in range(n)]
        scores = [1 if rng.random() < (tpr if ok else fpr) else 0 for ok in correct]
        solved += correct[select(scores)]
    return solved
