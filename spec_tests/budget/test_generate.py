"""The generation loop under a thinking budget and its interplay with stopping (concept
``stopping``): which wins, each rule pinned by a worked case; random budgets, scripted models and
stop settings against the oracle loop (spec_tests/budget/model.py: the oracle forcer and a naive
stop check, ASCII vocabulary); every short script exhaustively; the model called once per step
with a fresh list; bad input.

The vocabulary: 0 ``a``, 1 ``</t>`` (end of thinking), 2 ``W`` (Wait), 3 ``w``, 4 ``F:``
(answer prefix), 5 ``b``, 6 ``<e>`` (EOS), 7 ``#`` (a stop token in some tests).
"""
from __future__ import annotations

import itertools

import pytest
from hypothesis import example, given, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from reference.budget import ThinkingBudget
from spec_tests.budget.model import run_oracle
from spec_tests.budget.strategies import budgets

VOCAB = {0: b"a", 1: b"</t>", 2: b"W", 3: b"w", 4: b"F:", 5: b"b", 6: b"<e>", 7: b"#"}
A_, END, W, W2, F, B_, EOS, HASH = range(8)
FIELDS = ("tokens", "forced", "text", "finish_reason", "stop_reason", "thinking_tokens", "waits", "forced_end")


class Script:
    """A scripted model: proposes ``script[len(generated)]`` (the last entry once past it) and
    records every call's argument."""

    def __init__(self, script):
        self.script, self.calls = list(script), []

    def __call__(self, generated):
        self.calls.append(list(generated))
        return self.script[min(len(generated), len(self.script) - 1)]


def generate(impl, script, budget, max_tokens, **stop):
    model = Script(script)
    out = impl.get("generate_with_budget")(model, budget, VOCAB, max_tokens, **stop)
    return {f: (list(v) if isinstance(v, (list, tuple)) else v) for f, v in zip(FIELDS, tuple(out))}, model


def expect(impl, script, budget, max_tokens, **stop) -> dict:
    got, model = generate(impl, script, budget, max_tokens, **stop)
    want = run_oracle(script, budget, VOCAB, max_tokens, stop.get("eos_token_id"), tuple(stop.get("stop_token_ids", ())),
                      tuple(stop.get("stop", ())))
    call = f"generate_with_budget(script {script}, {budget}, VOCAB, max_tokens={max_tokens}, {stop})"
    for f in FIELDS:
        assert got[f] == want[f], f"{call}: {f} = {got[f]!r}; expected {want[f]!r} (all: {got})"
    assert model.calls == [got["tokens"][:i] for i in range(len(got["tokens"]))], (
        f"{call}: the model was called with {model.calls}; expected once per step with the tokens so far "
        f"{[got['tokens'][:i] for i in range(len(got['tokens']))]}")
    return got


# --- which wins, one worked case each ---------------------------------------------------------------
def test_max_tokens_wins_over_the_budget(impl):
    """max_tokens ends generation by "length" even mid-thinking: no end of thinking, no answer."""
    got = expect(impl, [A_], ThinkingBudget(END, 10, 0, (), None, (F,)), 4)
    assert got["tokens"] == [A_] * 4 and got["finish_reason"] == "length" and got["thinking_tokens"] == 4
    assert not got["forced_end"] and got["text"] == "aaaa"


def test_forced_tokens_count_toward_max_tokens(impl):
    """The forced end of thinking and the answer prefix are output tokens: max_tokens counts them
    (it may cut the forced sequence)."""
    got = expect(impl, [A_], ThinkingBudget(END, 2, 0, (), None, (F, B_, B_)), 4)
    assert got["tokens"] == [A_, A_, END, F] and got["forced"] == [False, False, True, True]
    assert got["finish_reason"] == "length" and got["text"] == "aa</t>F:"


def test_waits_count_toward_max_tokens(impl):
    """A Wait's tokens are output tokens too."""
    got = expect(impl, [END], ThinkingBudget(END, None, 3, (W, W2), None, ()), 3)
    assert got["tokens"] == [W, W2, W] and got["finish_reason"] == "length" and got["waits"] == 2


@example(floor=3).via("mutant:eos_taken_for_end")
@given(floor=st.integers(1, 6))
def test_eos_below_the_floor_ends_generation(impl, floor):
    """EOS while thinking ends generation ("stop"), below the floor too: only the end of thinking
    is suppressed, never EOS, and no Wait replaces it."""
    got = expect(impl, [A_, EOS], ThinkingBudget(END, None, floor, (W,), None, ()), 20, eos_token_id=EOS)
    assert got["tokens"] == [A_, EOS] and got["finish_reason"] == "stop" and got["waits"] == 0
    assert got["text"] == "a" and got["stop_reason"] is None


def test_stop_string_completed_by_a_forced_token(impl):
    """Stopping reads forced tokens' text: a stop string completed by a Wait ends generation, cut
    before the match."""
    got = expect(impl, [A_, END], ThinkingBudget(END, None, 5, (W,), None, ()), 20, stop=("aW",))
    assert got["tokens"] == [A_, W] and got["finish_reason"] == "stop" and got["stop_reason"] == "aW"
    assert got["text"] == "" and got["forced"] == [False, True]


def test_forced_stop_token_ends_generation(impl):
    """A forced token that is a stop token (here in the answer prefix) ends generation."""
    got = expect(impl, [A_], ThinkingBudget(END, 1, 0, (), None, (HASH, F)), 20, stop_token_ids=(HASH,))
    assert got["tokens"] == [A_, END, HASH] and got["finish_reason"] == "stop" and got["stop_reason"] == HASH
    assert got["text"] == "a</t>"


def test_answer_then_eos(impl):
    """The whole s1 story: a ceiling of 3, "F:" forced after the end of thinking, the model
    answers "b" and stops."""
    got = expect(impl, [A_, A_, A_, A_, B_, B_, B_, EOS], ThinkingBudget(END, 3, 0, (), None, (F,)), 50,
                 eos_token_id=EOS)
    assert got["tokens"] == [A_, A_, A_, END, F, B_, B_, EOS] and got["forced_end"]
    assert got["forced"] == [False] * 3 + [True] * 2 + [False] * 3 and got["text"] == "aaa</t>F:bb"


# --- random and exhaustive -----------------------------------------------------------------------
stop_settings = st.fixed_dictionaries({}, optional={
    "eos_token_id": st.just(EOS),
    "stop_token_ids": st.sampled_from([(HASH,), (F,), (W2,)]),
    "stop": st.sampled_from([("aW",), ("F:b",), ("</t>a", "Ww"), ("bb",)]),
})


@example(budget=ThinkingBudget(END, 2, 0, (), None, (F,)), script=[A_, B_, B_], max_tokens=6, stop={}).via(
    "mutant:model_skipped_when_forced")
@given(budget=budgets(max_ceiling=6), script=st.lists(st.sampled_from([A_, END, W, F, B_, EOS, HASH]), min_size=1, max_size=12),
       max_tokens=st.integers(1, 16), stop=stop_settings)
def test_loop_is_the_forcer_then_stopping(impl, budget, script, max_tokens, stop):
    """Random budgets, scripted models and stop settings: every field of BudgetOutput as the
    oracle loop gives it, the model called once per step with the tokens so far."""
    if budget.end_think_id == stop.get("eos_token_id") or budget.end_think_id in stop.get("stop_token_ids", ()):
        return
    budget = ThinkingBudget(budget.end_think_id, budget.max_thinking_tokens, budget.min_thinking_tokens,
                            budget.wait_ids, budget.max_waits, budget.answer_prefix_ids)
    expect(impl, script, budget, max_tokens, **stop)


LOOP_BUDGETS = [ThinkingBudget(END, 2, 0, (), None, (F,)), ThinkingBudget(END, None, 2, (W,), 1, ()),
                ThinkingBudget(END, 3, 2, (W, W2), None, (F, B_)), ThinkingBudget(END, 0, 0, (), None, ())]
LOOP_STOPS = [dict(eos_token_id=EOS), dict(eos_token_id=EOS, stop=("aW",), stop_token_ids=(F,))]


def test_every_short_script(impl):
    """Every script of 5 proposals over {a, </t>, <e>} (243), each budget of LOOP_BUDGETS, each stop
    setting of LOOP_STOPS, max_tokens 7: the oracle loop's output (1,944 generations)."""
    for budget, stop in itertools.product(LOOP_BUDGETS, LOOP_STOPS):
        for script in itertools.product((A_, END, EOS), repeat=5):
            expect(impl, list(script), budget, 7, **stop)


def test_the_model_gets_a_fresh_list(impl):
    """The model is given a copy of the tokens generated so far: a model that changes its
    argument changes nothing of the generation."""
    def vandal(generated):
        proposal = [A_, A_, END, B_][min(len(generated), 3)]
        generated.clear()
        generated.extend([HASH] * 3)
        return proposal

    out = impl.get("generate_with_budget")(vandal, ThinkingBudget(END, 5, 0, (), None, ()), VOCAB, 5)
    assert list(out.tokens) == [A_, A_, END, B_, B_] and out.text == "aa</t>bb", f"{out}"


# --- bad input -----------------------------------------------------------------------------------
VALID = dict(model=Script([A_, END, B_, EOS]), budget=ThinkingBudget(END, 4, 0, (W,), None, (F,)), vocab=VOCAB,
             max_tokens=8, eos_token_id=EOS, stop_token_ids=(HASH,), stop=("bb",))


def _budget(**change):
    return ThinkingBudget(**{**dict(end_think_id=END, max_thinking_tokens=4, min_thinking_tokens=0, wait_ids=(W,),
                                    max_waits=None, answer_prefix_ids=(F,)), **change})


GENERATE_BAD = [
    Bad("model not callable", dict(model=[A_, END]), TypeError, ("model",)),
    Bad("model returns a str", dict(model=lambda generated: "a"), TypeError, ("model",)),
    Bad("model returns a float", dict(model=lambda generated: 0.0), TypeError, ("model",)),
    Bad("model returns a bool", dict(model=lambda generated: True), TypeError, ("model",)),
    Bad("model returns an id past the vocab", dict(model=lambda generated: 99), ValueError, ("model",)),
    Bad("model returns a negative id", dict(model=lambda generated: -1), ValueError, ("model",)),
    Bad("zero max_tokens", dict(max_tokens=0), ValueError, ("max_tokens",)),
    Bad("None max_tokens", dict(max_tokens=None), TypeError, ("max_tokens",)),
    Bad("float max_tokens", dict(max_tokens=8.0), TypeError, ("max_tokens",)),
    Bad("budget a dict", dict(budget=dict(end_think_id=END)), TypeError, ("budget",)),
    Bad("bad budget field", dict(budget=_budget(max_waits=-1)), ValueError, ("max_waits",)),
    Bad("vocab a str", dict(vocab="ab"), TypeError, ("vocab",)),
    Bad("eos_token_id not in the vocab", dict(eos_token_id=99), ValueError, ("eos_token_id",)),
    Bad("stop_token_ids not in the vocab", dict(stop_token_ids=(99,)), ValueError, ("stop_token_ids",)),
    Bad("empty stop string", dict(stop=("",)), ValueError, ("stop",)),
    Bad("end_think_id not in the vocab", dict(budget=_budget(end_think_id=99)), ValueError, ("end_think_id",)),
    Bad("wait_ids not in the vocab", dict(budget=_budget(wait_ids=(W, 99))), ValueError, ("wait_ids",)),
    Bad("answer_prefix_ids not in the vocab", dict(budget=_budget(answer_prefix_ids=(99,))), ValueError,
        ("answer_prefix_ids",)),
    Bad("end_think_id is the EOS", dict(eos_token_id=END), ValueError, ("end_think_id",)),
    Bad("end_think_id is a stop token", dict(stop_token_ids=(HASH, END)), ValueError, ("end_think_id",)),
]


@bad_cases(GENERATE_BAD)
def test_generate_rejects_bad_input(impl, bad):
    """generate_with_budget: TypeError / ValueError naming the argument (or the budget's field)."""
    assert_rejects(impl.get("generate_with_budget"), VALID, bad)


@pytest.mark.parametrize("error", [RuntimeError, KeyError])
def test_a_model_error_propagates(impl, error):
    """An exception raised by the model reaches the caller as it is."""
    def broken(generated):
        if generated:
            raise error("the model broke")
        return A_

    with pytest.raises(error, match="the model broke"):
        impl.get("generate_with_budget")(broken, ThinkingBudget(END, 4), VOCAB, 8)
