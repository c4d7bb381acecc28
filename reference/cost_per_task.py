"""Cost per solved task (course 08.12): the number a reasoning product is judged on is not the cost
per million tokens (06.11) but the cost of a task actually solved, and it settles whether a small
model sampled many times beats one call to a large one.

The models (stated exactly; they are the contract). Each attempt at a task costs
c = ``tokens_per_attempt`` x ``price_per_million`` / 1e6 dollars and succeeds independently with
probability p (``p`` in (0, 1]); q = 1 - p.

* **Retry until success** (a perfect checker -- unit tests, a verifier -- tells success from
  failure): attempt, and stop at the first success or after k = ``max_attempts`` attempts
  (``None``: unbounded). Attempts N = min(geometric, k):
      E[N] = (1 - q^k) / p          (1 / p when unbounded)
      P(solved) = 1 - q^k           (1 when unbounded)
      cost per solved task = c x E[N] / P(solved) = c / p, whatever k.
* **Best-of-n with a verifier** (n attempts in parallel, all paid, a perfect verifier picks a
  correct one if any): P(solved) = pass@n = 1 - q^n; cost per task n x c;
      cost per solved task = n x c / (1 - q^n)  (>= c / p: the parallel attempts after a success are
      wasted).
* k = 1 (one call) is both: c / p.

"Cost per solved task" is the expected cost over the expected number of solved tasks (the long-run
dollars spent per task solved over many tasks), not the expectation of a ratio.

Choices the law leaves open: none beyond the definitions above; results are floats.
"""
from __future__ import annotations

from reference._checks import check_int, check_real

__all__ = ["cost_per_attempt", "pass_at_k", "expected_attempts", "cost_per_solved_retry",
           "cost_per_solved_best_of_n"]  # the contract
__optional__ = []  # checked when an implementation provides them

TOKENS_PER_MILLION = 1_000_000


def _p(p) -> float:
    p = check_real("p", p, minimum=0.0, maximum=1.0)
    if p == 0:
        raise ValueError("p must be in (0, 1], got 0.0: a task never solved has no cost per solved task")
    return p


def cost_per_attempt(tokens_per_attempt: float, price_per_million: float) -> float:
    """Dollars of one attempt: ``tokens_per_attempt * price_per_million / 1e6`` (a float).

    Bad input: ``tokens_per_attempt`` or ``price_per_million`` not a real number (a bool is not
    one) -> TypeError naming it; negative or not finite -> ValueError naming it."""
    tokens = check_real("tokens_per_attempt", tokens_per_attempt, minimum=0.0)
    price = check_real("price_per_million", price_per_million, minimum=0.0)
    return tokens * price / TOKENS_PER_MILLION


def pass_at_k(p: float, k: int) -> float:
    """The probability that at least one of ``k`` independent attempts, each succeeding with
    probability ``p``, succeeds: ``1 - (1 - p)**k`` (a float; 1 at p = 1; p at k = 1).

    Bad input: ``p`` not a real -> TypeError; outside (0, 1] or not finite -> ValueError naming
    ``p``. ``k`` not an int (a bool is not one) -> TypeError; < 1 -> ValueError naming ``k``."""
    p = _p(p)
    k = check_int("k", k, minimum=1)
    return 1.0 - (1.0 - p) ** k


def expected_attempts(p: float, max_attempts: int | None = None) -> float:
    """The expected number of attempts of retry-until-success, stopping at the first success or
    after ``max_attempts`` (None: never giving up): ``(1 - (1 - p)**k) / p``, ``1 / p`` unbounded
    (a float; 1 at p = 1 or k = 1).

    Bad input: ``p`` as :func:`pass_at_k`; ``max_attempts`` not an int or None -> TypeError;
    < 1 -> ValueError naming ``max_attempts``."""
    p = _p(p)
    k = check_int("max_attempts", max_attempts, minimum=1, allow_none=True)
    if k is None:
        return 1.0 / p
    return (1.0 - (1.0 - p) ** k) / p


def cost_per_solved_retry(tokens_per_attempt: float, price_per_million: float, p: float,
                          max_attempts: int | None = None) -> float:
    """Expected dollars per solved task of retry-until-success (at most ``max_attempts``, None:
    unbounded): ``cost_per_attempt * expected_attempts(p, max_attempts) / P(solved)``, which is
    ``cost_per_attempt / p`` for every ``max_attempts`` (a float).

    Bad input: as :func:`cost_per_attempt` and :func:`expected_attempts`."""
    c = cost_per_attempt(tokens_per_attempt, price_per_million)
    attempts = expected_attempts(p, max_attempts)
    solved = 1.0 if max_attempts is None else pass_at_k(p, max_attempts)
    return c * attempts / solved


def cost_per_solved_best_of_n(tokens_per_attempt: float, price_per_million: float, p: float, n: int) -> float:
    """Expected dollars per solved task of best-of-``n`` with a perfect verifier: ``n`` attempts
    always paid, the task solved when any succeeds: ``n * cost_per_attempt / pass_at_k(p, n)``
    (a float; ``cost_per_attempt / p`` at n = 1).

    Bad input: as :func:`cost_per_attempt` and :func:`pass_at_k` (``n`` named ``n``)."""
    c = cost_per_attempt(tokens_per_attempt, price_per_million)
    p = _p(p)
    n = check_int("n", n, minimum=1)
    return n * c / pass_at_k(p, n)
