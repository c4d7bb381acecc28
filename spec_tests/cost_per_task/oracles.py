"""Oracles of `cost_per_task` that never use the closed forms: exact enumeration of every
success/failure sequence of k attempts (exact fractions), and a seeded Monte-Carlo simulation of
many tasks with scipy.stats confidence intervals."""
from __future__ import annotations

import itertools
import random
from fractions import Fraction


def enumerate_retry(p: Fraction, k: int) -> tuple[Fraction, Fraction]:
    """(E[attempts], P(solved)) of retry-until-success, at most k attempts: every one of the 2^k
    outcome sequences of k attempts, with its probability; the attempts used are up to and
    including the first success (all k if none)."""
    attempts = solved = Fraction(0)
    for seq in itertools.product((True, False), repeat=k):
        prob = Fraction(1)
        for ok in seq:
            prob *= p if ok else 1 - p
        used = seq.index(True) + 1 if True in seq else k
        attempts += prob * used
        solved += prob if True in seq else 0
    return attempts, solved


def enumerate_best_of_n(p: Fraction, n: int) -> tuple[Fraction, Fraction]:
    """(attempts paid, P(solved)) of best-of-n: every sequence pays n; solved when any succeeds."""
    solved = Fraction(0)
    for seq in itertools.product((True, False), repeat=n):
        prob = Fraction(1)
        for ok in seq:
            prob *= p if ok else 1 - p
        solved += prob if any(seq) else 0
    return Fraction(n), solved


def simulate_retry(p: float, k: int | None, tasks: int, seed: int) -> tuple[list[int], int]:
    """Per task the attempts used (retry until success, at most k) and the number of tasks solved."""
    rng = random.Random(seed)
    used, solved = [], 0
    for _ in range(tasks):
        n = 0
        while True:
            n += 1
            if rng.random() < p:
                solved += 1
                break
            if k is not None and n == k:
                break
        used.append(n)
    return used, solved


def simulate_best_of_n(p: float, n: int, tasks: int, seed: int) -> int:
    """The number of tasks of which at least one of n attempts succeeded."""
    rng = random.Random(seed)
    return sum(any(rng.random() < p for _ in range(n)) for _ in range(tasks))
