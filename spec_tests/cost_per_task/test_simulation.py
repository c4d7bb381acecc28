"""The closed forms of `cost_per_task` against a seeded Monte-Carlo simulation of many tasks
(spec_tests/cost_per_task/oracles.py), judged by scipy.stats confidence intervals.

Each example simulates TASKS tasks with a seed drawn from the example; the mean attempts must lie
in the Student-t interval of the simulated attempts and pass@k in the Clopper-Pearson interval of
the simulated solve count, each at confidence 1 - ALPHA. The false-alarm rate (a correct
implementation failing): at most ALPHA per interval, two intervals per example, so at most
2 x ALPHA x (examples run) per run -- 2e-6 x 100 = 2e-4 for the thorough profile's 100 examples;
the seeds are fixed, so a given profile's run is deterministic.
"""
from __future__ import annotations

import math

from hypothesis import example, given, strategies as st
from scipy import stats

from spec_tests.cost_per_task.oracles import simulate_best_of_n, simulate_retry

TASKS = 3000
ALPHA = 1e-6


def _t_interval(xs: list[int]) -> tuple[float, float]:
    n = len(xs)
    mean = sum(xs) / n
    var = sum((x - mean) ** 2 for x in xs) / (n - 1)
    if var == 0:  # every task used the same number of attempts (k = 1, or p = 1): float rounding only
        return mean * (1 - 1e-12), mean * (1 + 1e-12)
    half = stats.t.ppf(1 - ALPHA / 2, n - 1) * math.sqrt(var / n)
    return mean - half, mean + half


def _proportion(k: int, n: int) -> tuple[float, float]:
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=1 - ALPHA, method="exact")
    return ci.low, ci.high


@example(p=0.2, k=None, seed=1).via("mutant:attempts_off_by_one")
@example(p=0.3, k=6, seed=2).via("mutant:retry_pays_all_k mutant:pass_at_k_linear")
@given(p=st.sampled_from([0.05, 0.1, 0.25, 0.5, 0.8, 0.95]), k=st.one_of(st.none(), st.integers(1, 12)),
       seed=st.integers(0, 2**16))
def test_retry_matches_simulation(impl, p, k, seed):
    """Retry until success (at most k, None: unbounded): expected_attempts lies in the 1 - 1e-6
    t-interval of the simulated attempts per task, and pass_at_k(p, k) in the exact binomial
    interval of the simulated solved fraction."""
    used, solved = simulate_retry(p, k, TASKS, seed)
    lo, hi = _t_interval(used)
    got = impl.get("expected_attempts")(p, k)
    assert lo <= got <= hi, (f"expected_attempts({p}, {k}) = {got!r}; {TASKS} simulated tasks (seed {seed}) "
                             f"used {sum(used) / TASKS:.4f} attempts on average, interval [{lo:.4f}, {hi:.4f}]")
    if k is not None:
        lo, hi = _proportion(solved, TASKS)
        got = impl.get("pass_at_k")(p, k)
        assert lo <= got <= hi, (f"pass_at_k({p}, {k}) = {got!r}; simulated solved fraction "
                                 f"{solved / TASKS:.4f}, interval [{lo:.4f}, {hi:.4f}]")


@example(p=0.3, n=4, seed=3).via("mutant:pass_at_k_linear")
@given(p=st.sampled_from([0.05, 0.1, 0.25, 0.5, 0.8]), n=st.integers(1, 10), seed=st.integers(0, 2**16))
def test_best_of_n_matches_simulation(impl, p, n, seed):
    """Best-of-n: the simulated fraction of tasks with at least one of n successes brackets
    pass_at_k(p, n) (exact binomial interval, 1 - 1e-6), and cost_per_solved_best_of_n x that
    fraction's interval brackets n x the cost per attempt."""
    solved = simulate_best_of_n(p, n, TASKS, seed)
    lo, hi = _proportion(solved, TASKS)
    got = impl.get("pass_at_k")(p, n)
    assert lo <= got <= hi, f"pass_at_k({p}, {n}) = {got!r}; simulated {solved / TASKS:.4f}, interval [{lo:.4f}, {hi:.4f}]"
    cost = impl.get("cost_per_solved_best_of_n")(1000.0, 1.0, p, n)
    assert cost * lo <= n * 0.001 * (1 + 1e-12) and n * 0.001 <= cost * hi * (1 + 1e-12), (
        f"cost_per_solved_best_of_n(1000, 1, {p}, {n}) = {cost!r}: the dollars per task ({n} x $0.001) over the "
        f"simulated solve fraction [{lo:.4f}, {hi:.4f}] gives [{n * 0.001 / hi!r}, {n * 0.001 / lo!r}]")
