"""Bounded-exhaustive check of the step plan: every instance of a small universe.

Universe: 0-3 decodes (ids ``d0..d2``), 0-3 prefills (ids ``p0..p2`` in FCFS order) with 0-4
remaining prompt tokens each, budgets 1-6, chunk caps None, 1, 2, 3: 4 x (1 + 5 + 25 + 125) x 6 x
4 = 14,976 plans. Each is checked against every rule of the law (test_planner.check_law: the
token counts the law fixes and each invariant by name) and, at token-exact, equal to the
reference's plan, entry order included.

    python -m spec_tests.chunked_prefill.test_exhaustive     # counts and time on the reference
"""
from __future__ import annotations

import itertools
import time

import pytest

from spec_tests.chunked_prefill.strategies import PlanCase
from spec_tests.chunked_prefill.test_planner import check_law, plan

DECODES = ("d0", "d1", "d2")
PREFILLS = ("p0", "p1", "p2")
REMAINING = range(0, 5)
BUDGETS = range(1, 7)
CAPS = (None, 1, 2, 3)


def universe():
    for n_dec in range(len(DECODES) + 1):
        for n_pre in range(len(PREFILLS) + 1):
            for rem in itertools.product(REMAINING, repeat=n_pre):
                prefills = tuple(zip(PREFILLS, rem))
                for budget in BUDGETS:
                    for cap in CAPS:
                        yield PlanCase(DECODES[:n_dec], prefills, budget, cap)


def test_every_small_plan_obeys_the_law(impl):
    """Every plan of the universe obeys the law: budget, decode-first, FCFS, cap, work-conserving,
    and the token counts the law fixes."""
    for case in universe():
        check_law(case, plan(impl, case))


@pytest.mark.choice("plan_step: decodes beyond the budget -- the first ones run; the dict lists decodes, then prefills")
def test_every_small_plan_equals_the_reference(impl, reference):
    """Every plan of the universe equals the reference's, entry order included."""
    for case in universe():
        got, want = plan(impl, case), plan(reference, case)
        assert list(got.items()) == list(want.items()), f"plan {got} != reference {want}\n  case: {case!r}"


if __name__ == "__main__":
    from reference import chunked_prefill as ref
    start, n = time.perf_counter(), 0
    for case in universe():
        ref.plan_step(list(case.decodes), [list(p) for p in case.prefills], case.token_budget, case.chunk_size)
        n += 1
    print(f"{n} plans, {time.perf_counter() - start:.2f} s in-process")
