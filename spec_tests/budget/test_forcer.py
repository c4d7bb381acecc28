"""The budget forcer (course 08.04, s1's budget forcing): one token per step, the model's proposal
in, the appended token out. Random budgets and proposal streams against the contract's rules
(spec_tests/budget/model.py's oracle, written from the docstring) and the law as predicates; the
forced steps' independence of the proposal; s1's two uses worked by hand; a state machine driving
the implementation, the reference and the oracle side by side with rejected calls interleaved; and
the bad-input tables. The exhaustive short streams are test_exhaustive.py.
"""
from __future__ import annotations

import pytest
from hypothesis import example, given, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from conformance.badinput import Bad, assert_rejects, bad_cases
from conformance.stateful import run_as_test
from reference.budget import ThinkingBudget
from spec_tests.budget.model import OBSERVABLES, Oracle, law_problems, observe
from spec_tests.budget.strategies import budgets, proposals

X, E, W, W2, A, B = 0, 1, 2, 3, 4, 5


def run(impl, budget, props) -> tuple[list, list]:
    forcer = impl.get("BudgetForcer")(budget)
    steps = [tuple(forcer.step(p)) for p in props]
    return [t for t, _ in steps], [f for _, f in steps]


@example(budget=ThinkingBudget(E, 3, 0, (), None, (A, B)), props=[X] * 8).via(
    "mutant:ceiling_off_by_one mutant:no_answer_prefix")
@example(budget=ThinkingBudget(E, 8, 3, (W,), 1, ()), props=[E, E, X]).via("mutant:one_wait_too_many")
@example(budget=ThinkingBudget(E, 8, 3, (W,), 2, ()), props=[X, E, X, E, X]).via("mutant:wait_at_floor")
@example(budget=ThinkingBudget(E, 8, 4, (W, W2), None, ()), props=[X, E, X, X, X]).via("mutant:wait_not_counted")
@example(budget=ThinkingBudget(E, None, 0, (), None, (A,)), props=[X, E, X, E]).via(
    "mutant:prefix_after_natural_end")
@example(budget=ThinkingBudget(E, 0, 0, (), None, (A,)), props=[E, X, X]).via("boundary: a ceiling of 0, no thinking at all")
@given(budget=budgets(), props=proposals)
def test_steps_are_the_rules(impl, budget, props):
    """Random budgets and proposal streams: every step's (token, forced) and every observable as
    the contract's rules make them; the whole run lawful (the ceiling, Waits only for a proposed
    end below the floor, at most max_waits, the forced end then the answer prefix)."""
    forcer, oracle = impl.get("BudgetForcer")(budget), Oracle.of(budget)
    appended, forced = [], []
    for i, p in enumerate(props):
        got, want = tuple(forcer.step(p)), oracle.step(p)
        assert got == want, f"BudgetForcer({budget}), proposals {props[:i + 1]}: step({p}) = {got}; expected {want} after {appended}"
        got = observe(forcer)
        assert got == oracle.observe(), f"BudgetForcer({budget}) after proposals {props[:i + 1]}: {OBSERVABLES} = {got}; expected {oracle.observe()}"
        appended.append(want[0])
        forced.append(want[1])
    problems = law_problems(budget, props, appended, forced)
    assert not problems, f"BudgetForcer({budget}) on {props}: {problems}"


@example(budget=ThinkingBudget(E, 2, 0, (), None, (A, B)), props=[X, X, X, X, X], other=E).via(
    "mutant:ceiling_yields_to_end")
@given(budget=budgets(), props=proposals, other=st.sampled_from([X, E, W, A]))
def test_forced_steps_ignore_the_proposal(impl, budget, props, other):
    """At a step where next_forced is not None the proposal does not matter: replacing every
    such proposal by another token appends the same tokens, and the token appended is
    next_forced."""
    forcer = impl.get("BudgetForcer")(budget)
    changed = []
    for p in props:
        ahead = forcer.next_forced
        step = tuple(forcer.step(p))
        if ahead is not None:
            assert step == (ahead, True), f"BudgetForcer({budget}): next_forced was {ahead}, step({p}) appended {step}"
            changed.append(other)
        else:
            changed.append(p)
    assert run(impl, budget, changed) == run(impl, budget, props), (
        f"BudgetForcer({budget}): proposals {changed} (forced steps' proposals replaced by {other}) appended other tokens than {props}")


@example(budget=ThinkingBudget(E, 8, 3, (W,), None, ()), props=[X, E, X, E],
         ids=[10, 11, 12, 13, 14, 15]).via("mutant:end_id_hard_coded")
@given(budget=budgets(), props=proposals,
       ids=st.lists(st.integers(0, 2**17), min_size=6, max_size=6, unique=True))
def test_token_ids_are_only_names(impl, budget, props, ids):
    """Relabelling every token id by a bijection (the end of thinking, the Waits, the answer
    prefix and the proposals; ids up to 2**17, a real vocabulary's range) relabels the appended
    tokens the same way and leaves the forced flags as they were: no id is special but the ones the
    budget names (a forcer that hard-codes the end of thinking's id fails)."""
    f = ids.__getitem__
    moved = ThinkingBudget(f(budget.end_think_id), budget.max_thinking_tokens, budget.min_thinking_tokens,
                           tuple(map(f, budget.wait_ids)), budget.max_waits, tuple(map(f, budget.answer_prefix_ids)))
    tokens, forced = run(impl, budget, props)
    got_tokens, got_forced = run(impl, moved, [f(p) for p in props])
    assert (got_tokens, got_forced) == ([f(t) for t in tokens], forced), (
        f"BudgetForcer({moved}) on {[f(p) for p in props]}: appended {got_tokens} {got_forced}; the same run "
        f"under the ids {dict(enumerate(ids))} appended {[f(t) for t in tokens]} {forced}")


def test_s1_budget_forcing_by_hand(impl):
    """s1's two uses, worked by hand (docs/budget.md). Ceiling 4, answer prefix "Final Answer:"
    (A, B): a model that never stops thinks x x x x, then E A B are forced and its tokens follow.
    Floor 4, Wait = W, at most 2 Waits: proposals x E x E x E x give x W x W x E x: the first two
    early ends become Waits, the third (4 thinking tokens, the floor reached) ends thinking."""
    tokens, forced = run(impl, ThinkingBudget(E, 4, 0, (), None, (A, B)), [X] * 9)
    assert tokens == [X, X, X, X, E, A, B, X, X] and forced == [False] * 4 + [True] * 3 + [False] * 2, (tokens, forced)
    tokens, forced = run(impl, ThinkingBudget(E, None, 4, (W,), 2, ()), [X, E, X, E, X, E, X])
    assert tokens == [X, W, X, W, X, E, X], f"floor 4, two Waits: appended {tokens}"
    assert forced == [False, True, False, True, False, False, False], forced
    tokens, _ = run(impl, ThinkingBudget(E, None, 4, (W,), 1, ()), [X, E, X, E, X])
    assert tokens == [X, W, X, E, X], f"floor 4, one Wait: the second early end is the model's: {tokens}"


@example(n=5).via("mutant:wait_not_counted")
@given(n=st.integers(1, 12))
def test_waits_until_the_floor(impl, n):
    """max_waits None: a model that always proposes the end is answered with Waits until the floor;
    with a 2-token Wait the thinking reaches the floor in ceil(floor / 2) Waits."""
    forcer = impl.get("BudgetForcer")(ThinkingBudget(E, None, n, (W, W2), None, ()))
    tokens = [forcer.step(E).token_id for _ in range(2 * n + 2)]
    waits = -(-n // 2)
    assert tokens[:2 * waits] == [W, W2] * waits and tokens[2 * waits] == E, f"floor {n}: appended {tokens}"
    assert forcer.waits == waits and forcer.thinking_tokens == 2 * waits and forcer.phase == "answer"


def test_wait_ending_at_the_ceiling(impl):
    """A Wait started one below the floor may end exactly at the ceiling (floor + len - 1 =
    ceiling): the end of thinking is then forced at once."""
    tokens, forced = run(impl, ThinkingBudget(E, 4, 3, (W, W2), None, (A,)), [X, X, E, X, X, X])
    assert tokens == [X, X, W, W2, E, A] and forced == [False, False, True, True, True, True], (tokens, forced)


def test_lists_are_copied(impl):
    """The forcer keeps copies of the budget's lists: a caller changing them afterwards changes
    nothing."""
    wait, prefix = [W], [A]
    forcer = impl.get("BudgetForcer")(ThinkingBudget(E, 3, 2, wait, None, prefix))
    wait[0], prefix[0] = 5, 5
    wait.append(5)
    assert [forcer.step(p).token_id for p in (E, X, X, X, X)] == [W, X, X, E, A]


# --- the state machine -----------------------------------------------------------------------------
BAD_TOKENS = [(-1, ValueError), (-7, ValueError), ("1", TypeError), (1.0, TypeError), (None, TypeError),
              (True, TypeError), (False, TypeError)]


class ForcerMachine(RuleBasedStateMachine):
    impl = ref = None

    @initialize(budget=budgets())
    def setup(self, budget):
        self.budget = budget
        self.a = self.impl.get("BudgetForcer")(budget)
        self.b = self.ref.get("BudgetForcer")(budget)
        self.oracle = Oracle.of(budget)
        self.log: list[str] = []

    def where(self) -> str:
        return f"BudgetForcer({self.budget}) after {self.log[-10:]}"

    @rule(p=st.sampled_from([X, E, W, W2, A, B, 9]))
    def step(self, p):
        got, ref, want = tuple(self.a.step(p)), tuple(self.b.step(p)), self.oracle.step(p)
        assert ref == want, f"test bug: the reference's step({p}) = {ref}, the oracle's {want}"
        assert got == want, f"{self.where()}: step({p}) = {got}; expected {want}"
        self.log.append(f"step({p}) -> {got}")

    @rule(bad=st.sampled_from(BAD_TOKENS))
    def bad_step(self, bad):
        token, error = bad
        before = observe(self.a)
        with pytest.raises(error, match="token_id"):
            self.a.step(token)
        assert observe(self.a) == before, f"{self.where()}: the rejected step({token!r}) changed {before} -> {observe(self.a)}"
        self.log.append(f"step({token!r}) rejected")

    @invariant()
    def same_observables(self):
        if not hasattr(self, "a"):
            return
        got, want = observe(self.a), self.oracle.observe()
        assert got == want, f"{self.where()}: {OBSERVABLES} = {got}; expected {want}"
        ceiling = self.budget.max_thinking_tokens
        assert ceiling is None or got[1] <= ceiling, f"{self.where()}: {got[1]} thinking tokens > {ceiling}"


def test_state_machine(impl, reference):
    """Random steps and rejected steps on random budgets: the implementation, the reference and the
    oracle in step; a rejected step (bad token_id) changes nothing, the queued forced tokens
    included (seen at the next steps)."""
    machine = type("ForcerMachineFor", (ForcerMachine,), {"impl": impl, "ref": reference})
    steps = 50 if settings.get_current_profile_name() == "thorough" else 25
    run_as_test(machine, settings=settings(stateful_step_count=steps))


# --- bad input -----------------------------------------------------------------------------------
BUDGET_VALID = dict(end_think_id=1, max_thinking_tokens=6, min_thinking_tokens=2, wait_ids=(2,), max_waits=2,
                    answer_prefix_ids=(4,))


def _ints(name: str, none_ok: bool) -> list[Bad]:
    rows = [Bad(f"negative {name}", {name: -1}, ValueError, (name,)),
            Bad(f"float {name}", {name: 2.0}, TypeError, (name,)),
            Bad(f"bool {name}", {name: True}, TypeError, (name,)),
            Bad(f"str {name}", {name: "2"}, TypeError, (name,))]
    if not none_ok:
        rows.append(Bad(f"None {name}", {name: None}, TypeError, (name,)))
    return rows


def _id_list(name: str) -> list[Bad]:
    return [Bad(f"{name} a str", {name: "W"}, TypeError, (name,)),
            Bad(f"{name} an int", {name: 2}, TypeError, (name,)),
            Bad(f"{name} None", {name: None}, TypeError, (name,)),
            Bad(f"negative id in {name}", {name: (2, -1)}, ValueError, (name,)),
            Bad(f"str id in {name}", {name: (2, "x")}, TypeError, (name,)),
            Bad(f"bool id in {name}", {name: (True,)}, TypeError, (name,))]


BUDGET_BAD = (_ints("end_think_id", none_ok=False) + _ints("max_thinking_tokens", none_ok=True)
              + _ints("min_thinking_tokens", none_ok=False) + _ints("max_waits", none_ok=True)
              + _id_list("wait_ids") + _id_list("answer_prefix_ids") + [
    Bad("floor above the ceiling", dict(max_thinking_tokens=1, min_thinking_tokens=2), ValueError,
        ("min_thinking_tokens", "max_thinking_tokens")),
    Bad("a Wait holding the end of thinking", dict(wait_ids=(2, 1)), ValueError, ("wait_ids", "end_think_id")),
    Bad("a floor without a Wait", dict(wait_ids=()), ValueError, ("wait_ids",)),
    Bad("a floor of 1 without a Wait", dict(min_thinking_tokens=1, wait_ids=()), ValueError, ("wait_ids",)),
    Bad("a Wait that does not fit under the ceiling", dict(max_thinking_tokens=5, min_thinking_tokens=5,
                                                           wait_ids=(2, 3)), ValueError, ("wait_ids",)),
    Bad("a Wait that does not fit, floor 1", dict(max_thinking_tokens=1, min_thinking_tokens=1, wait_ids=(2, 3)),
        ValueError, ("wait_ids",)),
    Bad("budget a dict", dict(budget=dict(end_think_id=1)), TypeError, ("budget",)),
    Bad("budget None", dict(budget=None), TypeError, ("budget",)),
    Bad("budget an int", dict(budget=1), TypeError, ("budget",)),
])


@bad_cases(BUDGET_BAD)
def test_forcer_rejects_bad_budgets(impl, bad):
    """BudgetForcer(budget): TypeError / ValueError naming the budget's field (or ``budget``)."""
    Forcer = impl.get("BudgetForcer")
    build = object()

    def make(budget=build, **fields):
        return Forcer(ThinkingBudget(**fields) if budget is build else budget)

    assert_rejects(make, BUDGET_VALID, bad)


STEP_BAD = [Bad(f"token_id {v!r}", dict(token_id=v), error, ("token_id",)) for v, error in BAD_TOKENS]


@bad_cases(STEP_BAD)
def test_step_rejects_bad_token_ids(impl, bad):
    """step(token_id) mid-Wait (a forced token queued): TypeError for a non-int (a bool is not one),
    ValueError for a negative id, naming ``token_id``; the state is unchanged, so the run goes on
    as if the call never happened."""
    forcer = impl.get("BudgetForcer")(ThinkingBudget(E, 8, 5, (W, W2), None, (A,)))
    assert [forcer.step(p).token_id for p in (X, E)] == [X, W]
    assert_rejects(forcer.step, dict(token_id=X), bad, state=lambda: observe(forcer))
    assert [tuple(forcer.step(p)) for p in (E, X, E)] == [(W2, True), (X, False), (W, True)]
