"""The SARATHI step plan (course 04.05, chapter 9): decode-first, stall-free, FCFS prefill chunks
within a token budget.

The law fixes every token count of a plan (see reference/chunked_prefill.py): ``min(D, B)``
decodes of 1 token; then, with the budget ``L = B - min(D, B)`` left, prefill ``i`` in FCFS order
gets ``min(r_i, cap, L - tokens given to the prefills before it)``. :func:`law_counts` writes that
down independently of the reference; the law tests compare an implementation's counts with it and
check each rule on its own (so a failure names the rule). Which decodes run when they alone exceed
the budget, and the dict's order, are the reference's choices (first ones; decodes then prefills).
"""
from __future__ import annotations

import copy

import pytest
from hypothesis import example, given

from conformance.badinput import Bad, assert_rejects, bad_cases
from spec_tests.chunked_prefill.strategies import PlanCase, plan_cases


def law_counts(case: PlanCase) -> tuple[int, dict]:
    """(number of decodes that run, {prefill id: tokens}) as the law fixes them."""
    n_dec = min(len(case.decodes), case.token_budget)
    left, prefill = case.token_budget - n_dec, {}
    for rid, remaining in case.prefills:
        cap = remaining if case.chunk_size is None else min(remaining, case.chunk_size)
        n = min(cap, left)
        if n > 0:
            prefill[rid] = n
            left -= n
    return n_dec, prefill


def plan(impl, case: PlanCase) -> dict:
    decodes, prefills = list(case.decodes), [list(p) for p in case.prefills]
    keep = copy.deepcopy((decodes, prefills))
    args = (decodes, prefills, case.token_budget)
    out = impl.get("plan_step")(*args) if case.chunk_size is None else impl.get("plan_step")(*args, case.chunk_size)
    assert (decodes, prefills) == keep, f"plan_step modified its inputs: {keep} -> {(decodes, prefills)}"
    assert isinstance(out, dict), f"plan_step returned {type(out).__name__}, expected a dict"
    return dict(out)


def check_invariants(case: PlanCase, got: dict) -> None:
    """Each rule of the plan, checked on its own (the messages name the rule)."""
    decodes, remaining = set(case.decodes), dict(case.prefills)
    unknown = [r for r in got if r not in decodes and r not in remaining]
    assert not unknown, f"plan schedules unknown requests {unknown}: {got}\n  case: {case!r}"
    bad = {r: n for r, n in got.items() if type(n) is not int or n < 1}
    assert not bad, f"plan entries must be ints >= 1 (an unscheduled request is left out): {bad}\n  case: {case!r}"
    total = sum(got.values())
    assert total <= case.token_budget, f"plan runs {total} tokens > token_budget {case.token_budget}: {got}\n  case: {case!r}"
    dec = {r: n for r, n in got.items() if r in decodes}
    assert all(n == 1 for n in dec.values()), f"a decode runs more than 1 token: {dec}\n  case: {case!r}"
    pre = [got.get(r, 0) for r, _ in case.prefills]
    if any(pre):
        assert len(dec) == len(decodes), (
            f"decode stalled: {len(decodes) - len(dec)} decodes left out while {sum(pre)} prefill tokens run "
            f"(decode-first): {got}\n  case: {case!r}")
    caps = [r if case.chunk_size is None else min(r, case.chunk_size) for _, r in case.prefills]
    over = [(rid, n, c) for (rid, _), n, c in zip(case.prefills, pre, caps) if n > c]
    assert not over, f"a prefill gets more than min(remaining, chunk_size): (id, got, most) {over}\n  case: {case!r}"
    for j, n in enumerate(pre):
        if n:
            short = [case.prefills[i][0] for i in range(j) if pre[i] < caps[i]]
            assert not short, (f"not FCFS: prefill {case.prefills[j][0]!r} gets {n} tokens while the older "
                               f"{short} got less than they could: {got}\n  case: {case!r}")
    work = len(decodes) + sum(caps)
    assert total == min(case.token_budget, work), (
        f"budget left idle: {total} tokens run, {min(case.token_budget, work)} could (work-conserving; "
        f"progress)\n  case: {case!r}")


def check_law(case: PlanCase, got: dict) -> None:
    check_invariants(case, got)
    n_dec, prefill = law_counts(case)
    assert sum(1 for r in got if r in set(case.decodes)) == n_dec, (got, n_dec, case)
    assert {r: n for r, n in got.items() if r not in set(case.decodes)} == prefill, (
        f"prefill chunks {got} differ from the law's {prefill}\n  case: {case!r}")


_PINNED = [
    PlanCase(("d0", "d1"), (("p0", 10), ("p1", 3)), 6),                  # the budget splits: 2 + 4, p1 waits
    PlanCase((0, 1, 2), ((3, 5),), 2),                                   # decodes alone exceed the budget
    PlanCase((), (("a", 5), ("b", 5), ("c", 5)), 12, 4),                 # capped chunks: 4, 4, 4
    PlanCase(("x",), (("a", 0), ("b", 2), ("c", 9)), 8),                 # remaining 0 gets nothing
    PlanCase(("d",), (("a", 3), ("b", 8)), 9, 2),                        # a cap and FCFS: d 1, a 2, b 2
    PlanCase((7, 3, 5), ((9, 4), (1, 7)), 5),
]


@example(case=_PINNED[0]).via("mutant:prefill_before_decodes mutant:budget_off_by_one mutant:shortest_prefill_first")
@example(case=_PINNED[2]).via("mutant:chunk_cap_ignored")
@example(case=_PINNED[4]).via("boundary: a cap and FCFS together (d 1, a 2, b 2)")
@given(case=plan_cases())
def test_plan_obeys_the_law(impl, case):
    """Every plan: at most token_budget tokens; decode-first (no prefill token while a decode is
    left out); each decode 1 token; each prefill at most min(remaining, chunk_size); FCFS (a newer
    prefill runs only once every older one got all it could); work-conserving (the budget is left
    idle only when no request can use it, so a step with work runs >= 1 token): the token counts
    the law fixes."""
    check_law(case, plan(impl, case))


@pytest.mark.choice("plan_step: decodes beyond the budget -- the first ones run; the dict lists decodes, then prefills")
@example(case=_PINNED[1]).via("boundary: decodes alone exceed the budget (the first ones run)")
@example(case=_PINNED[5]).via("boundary: int request ids, decodes not sorted (the given order is kept)")
@given(case=plan_cases())
def test_plan_equals_the_reference(impl, reference, case):
    """The plan equals the reference's, entry order included: the first ``token_budget`` decodes in
    the given order, then the prefill chunks in FCFS order."""
    got, want = plan(impl, case), plan(reference, case)
    assert list(got.items()) == list(want.items()), f"plan {got} != reference {want}\n  case: {case!r}"


def test_pinned_plans(impl):
    """Worked examples of the docs (token counts are law)."""
    want = [{"d0": 1, "d1": 1, "p0": 4}, None, {"a": 4, "b": 4, "c": 4}, {"x": 1, "b": 2, "c": 5},
            {"d": 1, "a": 2, "b": 2}, None]
    for case, w in zip(_PINNED, want):
        got = plan(impl, case)
        check_law(case, got)
        if w is not None:
            assert got == w, f"{case!r}: {got} != {w}"


@given(case=plan_cases(max_decodes=6, max_prefills=5, max_remaining=30))
def test_prompts_finish_and_chunks_sum_to_the_prompt(impl, case):
    """Planning step after step (each prefill's remaining reduced by what it got; a finished one
    leaves the queue), while the decodes leave room in the budget: every decode runs in every
    step (never stalled), every prompt finishes, its chunks sum to its prompt, without a cap the
    prompts finish in FCFS order, and it takes ceil(total prompt / room) steps or fewer with a cap."""
    budget = max(case.token_budget, len(case.decodes) + 1)
    remaining = [[rid, r] for rid, r in case.prefills if r > 0]
    order = [rid for rid, _ in remaining]
    done, got_sum, steps = [], {rid: 0 for rid in order}, 0
    total = sum(r for _, r in remaining)
    room = budget - len(case.decodes)
    bound = -(-total // room) if case.chunk_size is None else total      # ceil; 1 token a step at worst
    while remaining:
        steps += 1
        assert steps <= bound, f"prompts not finished after {bound} steps: {remaining}\n  case: {case!r}"
        step_case = PlanCase(case.decodes, tuple(tuple(p) for p in remaining), budget, case.chunk_size)
        got = plan(impl, step_case)
        check_invariants(step_case, got)
        assert all(got.get(d) == 1 for d in case.decodes), f"step {steps}: a decode stalled: {got}"
        for p in remaining:
            p[1] -= got.get(p[0], 0)
            got_sum[p[0]] += got.get(p[0], 0)
        done += [p[0] for p in remaining if p[1] == 0]
        remaining = [p for p in remaining if p[1] > 0]
    if case.chunk_size is None:      # with a cap a short newer prompt may finish first
        assert done == order, f"prompts finished in the order {done}, not FCFS {order}"
    assert got_sum == {rid: r for rid, r in case.prefills if r > 0}, f"chunk sums {got_sum} != prompts {case.prefills}"


# --- bad input ---------------------------------------------------------------------------------
VALID = dict(decodes=["d0", "d1"], prefills=[["p0", 5], ["p1", 3]], token_budget=4, chunk_size=None)

BAD = [
    Bad("token_budget 0", dict(token_budget=0), ValueError, ("token_budget",)),
    Bad("token_budget -1", dict(token_budget=-1), ValueError, ("token_budget",)),
    Bad("float token_budget", dict(token_budget=4.0), TypeError, ("token_budget",)),
    Bad("bool token_budget", dict(token_budget=True), TypeError, ("token_budget",)),
    Bad("None token_budget", dict(token_budget=None), TypeError, ("token_budget",)),
    Bad("chunk_size 0", dict(chunk_size=0), ValueError, ("chunk_size",)),
    Bad("float chunk_size", dict(chunk_size=2.0), TypeError, ("chunk_size",)),
    Bad("bool chunk_size", dict(chunk_size=True), TypeError, ("chunk_size",)),
    Bad("decodes a set", dict(decodes={"d0"}), TypeError, ("decodes",)),
    Bad("decodes a str", dict(decodes="d0"), TypeError, ("decodes",)),
    Bad("decodes None", dict(decodes=None), TypeError, ("decodes",)),
    Bad("decode id a float", dict(decodes=["d0", 1.0]), TypeError, ("decodes",)),
    Bad("decode id a bool", dict(decodes=[True]), TypeError, ("decodes",)),
    Bad("decode id None", dict(decodes=[None]), TypeError, ("decodes",)),
    Bad("duplicate decode", dict(decodes=["d0", "d0"]), ValueError, ("decodes",)),
    Bad("prefills a dict", dict(prefills={"p0": 5}), TypeError, ("prefills",)),
    Bad("prefill not a pair", dict(prefills=[["p0", 5, 1]]), TypeError, ("prefills",)),
    Bad("prefill a bare id", dict(prefills=["p0"]), TypeError, ("prefills",)),
    Bad("prefill id a float", dict(prefills=[[0.5, 5]]), TypeError, ("prefills",)),
    Bad("remaining -1", dict(prefills=[["p0", 5], ["p1", -1]]), ValueError, ("prefills",)),
    Bad("remaining a float", dict(prefills=[["p0", 5.0]]), TypeError, ("prefills",)),
    Bad("remaining a bool", dict(prefills=[["p0", True]]), TypeError, ("prefills",)),
    Bad("duplicate prefill", dict(prefills=[["p0", 5], ["p0", 3]]), ValueError, ("prefills",)),
    Bad("id both decoding and prefilling", dict(prefills=[["d1", 5]]), ValueError, ("prefills",)),
]


@bad_cases(BAD)
def test_plan_rejects_bad_input(impl, bad):
    """Malformed input raises TypeError/ValueError naming the argument; the inputs are unchanged."""
    kwargs = bad.apply(copy.deepcopy(VALID))
    keep = copy.deepcopy(kwargs)
    assert_rejects(impl.get("plan_step"), kwargs, Bad(bad.id, {}, bad.error, bad.words))
    assert kwargs == keep, f"bad input {bad.id!r}: the rejected call modified its arguments"
