"""The step cost model and the simulation (course 04.05, 04.09): closed forms, the stall-free
guarantee in time, and agreement with the reference under the stated model.

The simulation's model is stated in full in reference/chunked_prefill.py, so its token times are
law -- except where the plan's choice shows: when more requests decode at once than the budget
holds, which of them run is the reference's choice. With at most ``token_budget`` requests in the
workload that never happens, and the law test compares with the reference there; the comparison
on any workload is choice-marked.
"""
from __future__ import annotations

import copy
import math

import pytest
from hypothesis import example, given, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from reference.chunked_prefill import StepCost
from spec_tests.chunked_prefill.strategies import WorkloadCase, workload_cases


def cost_of(reference, case: WorkloadCase):
    return StepCost(weights=case.weights, per_token=case.per_token, overhead=case.overhead)


def c(case: WorkloadCase, tokens: int) -> float:
    """The stated cost model, written here: overhead + max(weights, per_token * tokens)."""
    return case.overhead + max(case.weights, case.per_token * tokens)


def run(impl, reference, case: WorkloadCase):
    workload = [list(r) for r in case.requests]
    sim = impl.get("simulate_serving")(workload, case.token_budget, chunk_size=case.chunk_size, cost=cost_of(reference, case))
    assert workload == [list(r) for r in case.requests], "simulate_serving modified its workload"
    return sim


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def _index(ends, t: float) -> int:
    """The step whose end is ``t`` (token times are step ends)."""
    for s, e in enumerate(ends):
        if close(e, t):
            return s
    raise AssertionError(f"token time {t} is not the end of any step {list(ends)}")


# --- step_time ---------------------------------------------------------------------------------
@given(tokens=st.integers(1, 5000), w=st.floats(0, 1), p=st.floats(0, 1e-3), o=st.floats(0, 1e-2))
def test_step_time_is_the_roofline(impl, reference, tokens, w, p, o):
    """step_time(n, cost) = overhead + max(weights, per_token * n)."""
    got = impl.get("step_time")(tokens, StepCost(weights=w, per_token=p, overhead=o))
    assert close(got, o + max(w, p * tokens)), (got, o + max(w, p * tokens))


def test_step_time_default_cost(impl):
    """The default cost is the stated 8B-on-H100 estimate: weights 4.8e-3 s, 3.2e-5 s a token, no
    overhead (flat up to 150 tokens)."""
    step_time = impl.get("step_time")
    for n, want in ((1, 4.8e-3), (150, 4.8e-3), (151, 151 * 3.2e-5), (2048, 2048 * 3.2e-5)):
        assert close(step_time(n), want), f"step_time({n}) = {step_time(n)}, expected {want}"


# --- closed forms ------------------------------------------------------------------------------
@example(prompt=10, output=3, budget=4, cap=None, arrival=1.0).via("mutant:first_token_a_step_late")
@example(prompt=10, output=1, budget=16, cap=3, arrival=0.0).via("mutant:chunk_cap_ignored")
@given(prompt=st.integers(1, 200), output=st.integers(1, 6), budget=st.integers(1, 64),
       cap=st.one_of(st.none(), st.integers(1, 64)), arrival=st.sampled_from([0.0, 0.5, 3.25]))
def test_a_request_alone(impl, reference, prompt, output, budget, cap, arrival):
    """A request alone: its prompt runs in k = ceil(P / m) steps of m = min(budget, cap) tokens (the
    last one P - (k - 1) m), its first token comes at the end of the last, then one token per
    step_time(1): TTFT = (k - 1) c(m) + c(P - (k - 1) m), TPOT = c(1)."""
    case = WorkloadCase(((arrival, prompt, output),), budget, cap, 1.0, 0.0625, 0.5)
    sim = run(impl, reference, case)
    m = budget if cap is None else min(budget, cap)
    k = -(-prompt // m)
    ttft = (k - 1) * c(case, m) + c(case, prompt - (k - 1) * m)
    want = [arrival + ttft + j * c(case, 1) for j in range(output)]
    got = list(sim.token_times[0])
    assert len(got) == output and all(close(a, b) for a, b in zip(got, want)), f"token times {got}, expected {want}"
    assert list(sim.step_tokens) == [m] * (k - 1) + [prompt - (k - 1) * m] + [1] * (output - 1), sim.step_tokens
    assert close(sim.metrics[0].ttft, ttft), (sim.metrics[0].ttft, ttft)
    assert (sim.metrics[0].tpot is None) if output == 1 else close(sim.metrics[0].tpot, c(case, 1)), sim.metrics[0]


def test_a_long_prompt_beside_a_stream(impl, reference):
    """A stream decoding when a long prompt arrives keeps one token per step; each of its gaps is
    one step, of budget tokens at most: c(1 + chunk) while the prompt runs (decode-first), c(1)
    after. Budget 8: the prompt of 21 runs 7 + 7 + 7 tokens beside the stream."""
    case = WorkloadCase(((0.0, 1, 8), (0.5, 21, 1)), 8, None, 0.0, 0.125, 0.0)
    sim = run(impl, reference, case)
    gaps = [b - a for a, b in zip(sim.token_times[0], sim.token_times[0][1:])]
    # steps: [prompt 1] [d] [d] ... ; at t = 0.5 (after step 4 ends at 0.125 * 4) the prompt joins
    want_steps = [1, 1, 1, 1, 8, 8, 8, 1]
    assert list(sim.step_tokens) == want_steps, sim.step_tokens
    assert [round(g, 9) for g in gaps] == [0.125, 0.125, 0.125, 1.0, 1.0, 1.0, 0.125], gaps
    assert close(sim.token_times[1][0], 0.5 + 3.0), sim.token_times[1]


# --- invariants and the reference --------------------------------------------------------------
def check_invariants(case: WorkloadCase, sim) -> None:
    n = len(case.requests)
    assert len(sim.token_times) == n and len(sim.metrics) == n, (len(sim.token_times), len(sim.metrics))
    for (a, p, o), times, m in zip(case.requests, sim.token_times, sim.metrics):
        assert len(times) == o, f"a request of output_len {o} got {len(times)} tokens"
        assert all(x <= y for x, y in zip(times, times[1:])), times
        assert close(m.ttft, times[0] - a), (m.ttft, times[0] - a)
        assert (m.tpot is None) if o == 1 else close(m.tpot, (times[-1] - times[0]) / (o - 1)), m
        assert m.output_tokens == o, m
    steps = list(sim.step_tokens)
    assert all(1 <= s <= case.token_budget for s in steps), f"a step outside [1, token_budget]: {steps}"
    assert sum(steps) == sum(p + o - 1 for _, p, o in case.requests), (
        f"steps ran {sum(steps)} tokens; the prompts and decodes need {sum(p + o - 1 for _, p, o in case.requests)}")
    ends = list(sim.step_ends)
    assert len(ends) == len(steps), (len(ends), len(steps))
    start = min(a for a, _, _ in case.requests)
    for s, (e, k) in enumerate(zip(ends, steps)):
        began = e - c(case, k)
        assert began >= (ends[s - 1] if s else start) - 1e-9, f"step {s} began at {began}, before the previous ended"
    for times in sim.token_times:
        for t in times:
            _index(ends, t)


@example(case=WorkloadCase(((0.0, 2, 6), (0.0, 3, 6), (0.5, 30, 2)), 4, None, 0.25, 0.0625, 0.0)).via(
    "mutant:prefill_before_decodes mutant:budget_off_by_one")
@given(case=workload_cases())
def test_simulation_obeys_the_stated_model(impl, reference, case):
    """Any workload: every request gets output_len tokens at step ends; its metrics are
    request_metrics of its times; every step runs 1..token_budget tokens, all together the prompts
    plus output_len - 1 decodes each, and lasts step_time of its tokens. With at most token_budget
    requests, every decode runs in every step (stall-free: consecutive tokens of a request end
    consecutive steps) and the token times are the reference's (the model is law there)."""
    sim = run(impl, reference, case)
    check_invariants(case, sim)
    if len(case.requests) <= case.token_budget:
        for times in sim.token_times:
            idx = [_index(sim.step_ends, t) for t in times]
            assert all(j == i + 1 for i, j in zip(idx, idx[1:])), (
                f"a decode stalled: its tokens end steps {idx} (not consecutive)\n  case: {case!r}")
        want = run(reference, reference, case)
        assert list(sim.step_tokens) == list(want.step_tokens), (sim.step_tokens, want.step_tokens)
        for got, exp in zip(sim.token_times, want.token_times):
            assert all(close(a, b) for a, b in zip(got, exp)), (got, exp)


@pytest.mark.choice("plan_step: decodes beyond the budget -- the first ones run; the dict lists decodes, then prefills")
@given(case=workload_cases(max_requests=10, max_budget=6))
def test_simulation_equals_the_reference(impl, reference, case):
    """Any workload, more decodes than the budget included: the same steps and token times as the
    reference (which decodes run when they exceed the budget is its choice)."""
    sim, want = run(impl, reference, case), run(reference, reference, case)
    assert list(sim.step_tokens) == list(want.step_tokens), (sim.step_tokens, want.step_tokens)
    for got, exp in zip(sim.token_times, want.token_times):
        assert all(close(a, b) for a, b in zip(got, exp)), (got, exp)


def test_fcfs_by_arrival(impl, reference):
    """Prompts are served in arrival order, not workload order: the later-listed request that
    arrived first gets its first token first (budget 4, prompts of 8, no overhead)."""
    case = WorkloadCase(((1.0, 8, 1), (0.0, 8, 1), (0.0, 8, 1)), 4, None, 0.0, 0.25, 0.0)
    sim = run(impl, reference, case)
    firsts = [t[0] for t in sim.token_times]
    assert firsts[1] < firsts[2] < firsts[0], f"first tokens at {firsts}: not in arrival order (ties: workload order)"


# --- bad input ---------------------------------------------------------------------------------
SIM_VALID = dict(workload=[[0.0, 4, 2], [0.5, 3, 1]], token_budget=4, chunk_size=None, cost=StepCost())


class _NoCost:
    weights = 1.0


SIM_BAD = [
    Bad("workload a dict", dict(workload={0: (0.0, 4, 2)}), TypeError, ("workload",)),
    Bad("workload empty", dict(workload=[]), ValueError, ("workload",)),
    Bad("workload None", dict(workload=None), TypeError, ("workload",)),
    Bad("workload a generator", dict(workload=((0.0, 4, 2) for _ in range(1))), TypeError, ("workload",)),
    Bad("request a pair", dict(workload=[[0.0, 4]]), TypeError, ("workload",)),
    Bad("request a number", dict(workload=[3]), TypeError, ("workload",)),
    Bad("arrival -1", dict(workload=[[-1.0, 4, 2]]), ValueError, ("arrival",)),
    Bad("arrival nan", dict(workload=[[float("nan"), 4, 2]]), ValueError, ("arrival",)),
    Bad("arrival a str", dict(workload=[["0", 4, 2]]), TypeError, ("arrival",)),
    Bad("prompt_len 0", dict(workload=[[0.0, 0, 2]]), ValueError, ("prompt_len",)),
    Bad("prompt_len a float", dict(workload=[[0.0, 4.0, 2]]), TypeError, ("prompt_len",)),
    Bad("output_len 0", dict(workload=[[0.0, 4, 0]]), ValueError, ("output_len",)),
    Bad("output_len a bool", dict(workload=[[0.0, 4, True]]), TypeError, ("output_len",)),
    Bad("token_budget 0", dict(token_budget=0), ValueError, ("token_budget",)),
    Bad("token_budget a float", dict(token_budget=4.0), TypeError, ("token_budget",)),
    Bad("chunk_size 0", dict(chunk_size=0), ValueError, ("chunk_size",)),
    Bad("cost without fields", dict(cost=_NoCost()), TypeError, ("cost",)),
    Bad("cost.weights -1", dict(cost=StepCost(weights=-1.0)), ValueError, ("cost.weights",)),
    Bad("cost.per_token inf", dict(cost=StepCost(per_token=float("inf"))), ValueError, ("cost.per_token",)),
    Bad("cost.overhead a str", dict(cost=StepCost(overhead="0")), TypeError, ("cost.overhead",)),
]


@bad_cases(SIM_BAD)
def test_simulate_rejects_bad_input(impl, bad):
    """Malformed input to simulate_serving raises TypeError/ValueError naming the argument (the field of a
    request or of the cost); the workload is unchanged."""
    valid = copy.deepcopy(SIM_VALID)
    assert_rejects(impl.get("simulate_serving"), valid, bad)


STEP_BAD = [
    Bad("tokens 0", dict(tokens=0), ValueError, ("tokens",)),
    Bad("tokens a float", dict(tokens=2.0), TypeError, ("tokens",)),
    Bad("tokens a bool", dict(tokens=True), TypeError, ("tokens",)),
    Bad("cost without fields", dict(cost=_NoCost()), TypeError, ("cost",)),
]


@bad_cases(STEP_BAD)
def test_step_time_rejects_bad_input(impl, bad):
    """Malformed input to step_time raises TypeError/ValueError naming the argument."""
    assert_rejects(impl.get("step_time"), dict(tokens=4), bad)
