"""The closed forms of `best_of_n` against a seeded Monte-Carlo simulation of many tasks
(spec_tests/best_of_n/oracles.py: answers drawn with ``random.Random(seed)``, picked by the
contract's rules as written there), judged by scipy.stats' exact binomial (Clopper-Pearson)
interval.

Each example simulates TASKS tasks with a seed drawn from the example; the closed form must lie in
the interval of the simulated solved fraction at confidence 1 - ALPHA. The false-alarm rate (a
correct implementation failing): at most ALPHA per interval, one interval per example, so at most
ALPHA x (examples run) per test and run -- 1e-6 x 100 = 1e-4 for the thorough profile's 100
examples; the seeds come from the examples, so a given profile's run is deterministic.
"""
from __future__ import annotations

from hypothesis import example, given, strategies as st
from scipy import stats

from spec_tests.best_of_n.oracles import simulate_best_of_n, simulate_majority

TASKS = 2000
ALPHA = 1e-6


def _interval(solved: int, tasks: int) -> tuple[float, float]:
    ci = stats.binomtest(solved, tasks).proportion_ci(confidence_level=1 - ALPHA, method="exact")
    return ci.low, ci.high


@example(p=0.4, n=5, m=1, seed=1).via("mutant:ties_lose mutant:ties_win")
@example(p=0.4, n=6, m=3, seed=2).via("mutant:wrong_answers_lumped")
@given(p=st.sampled_from([0.1, 0.25, 0.4, 0.5, 0.7]), n=st.integers(1, 9), m=st.integers(1, 4),
       seed=st.integers(0, 2**16))
def test_majority_matches_simulation(impl, p, n, m, seed):
    """Self-consistency on simulated tasks: each of n samples correct with probability p, else
    one of m wrong answers uniformly; the fraction of tasks whose vote is correct brackets
    p_majority_correct(p, n, m) (exact binomial interval, 1 - 1e-6)."""
    solved = simulate_majority(p, n, m, TASKS, seed)
    lo, hi = _interval(solved, TASKS)
    got = impl.get("p_majority_correct")(p, n, m)
    assert lo <= got <= hi, (f"p_majority_correct({p}, {n}, {m}) = {got!r}; {TASKS} simulated tasks (seed {seed}) "
                             f"voted correctly {solved / TASKS:.4f} of the time, interval [{lo:.4f}, {hi:.4f}]")


@example(p=0.3, n=4, tpr=0.8, fpr=0.2, seed=3).via("mutant:precision_ignored")
@example(p=0.5, n=3, tpr=0.2, fpr=0.1, seed=4).via("mutant:no_fallback")
@given(p=st.sampled_from([0.05, 0.2, 0.3, 0.5, 0.8]), n=st.integers(1, 12),
       tpr=st.sampled_from([0.5, 0.8, 0.95, 1.0]), fpr=st.sampled_from([0.0, 0.05, 0.2, 0.5]),
       seed=st.integers(0, 2**16))
def test_best_of_n_matches_simulation(impl, p, n, tpr, fpr, seed):
    """Best-of-n with a binary verifier on simulated tasks: the fraction of tasks whose pick (the
    earliest accepted sample, else the first) is correct brackets p_best_of_n_correct."""
    solved = simulate_best_of_n(p, n, tpr, fpr, TASKS, seed)
    lo, hi = _interval(solved, TASKS)
    got = impl.get("p_best_of_n_correct")(p, n, tpr, fpr)
    assert lo <= got <= hi, (f"p_best_of_n_correct({p}, {n}, {tpr}, {fpr}) = {got!r}; {TASKS} simulated tasks "
                             f"(seed {seed}): {solved / TASKS:.4f} correct, interval [{lo:.4f}, {hi:.4f}]")
