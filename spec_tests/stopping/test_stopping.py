"""Stopping (course 01.06): EOS, min/max tokens, stop token ids, stop strings across token
boundaries, and streamed text held back while a stop string may be forming.

The oracle is written here, independently of reference/stopping.py: it decodes with a brute-force
test of which trailing bytes can still become a character (strict UTF-8 decoding of every possible
continuation), scans every start position of the decoded text for every stop string, and derives
each streamed piece from the definition (the earliest position whose suffix is a proper prefix of
a stop string). Every implementation must make the same decisions, step by step.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import pytest
from hypothesis import example, given, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from spec_tests.stopping.strategies import StopCase, stop_cases



# --- the oracle -----------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _can_still_complete(tail: bytes) -> bool:
    """True if some 1-3 further bytes turn ``tail`` into exactly one well-formed character
    (strict decoding decides; only the next byte's value matters, later ones may be 0x80)."""
    for nxt in range(0x80, 0xC0):
        for more in range(3):
            try:
                if len((tail + bytes([nxt]) + b"\x80" * more).decode("utf-8")) == 1:
                    return True
            except UnicodeDecodeError:
                pass
    return False


def oracle_text(data: bytes) -> str:
    """UTF-8, errors="replace", without a trailing incomplete character."""
    for k in (1, 2, 3):
        if len(data) >= k and _can_still_complete(data[-k:]):
            return data[:-k].decode("utf-8", errors="replace")
    return data.decode("utf-8", errors="replace")


@dataclass
class Run:
    steps: list          # (emitted, finished, reason) per appended token
    texts: list          # checker.text after each step
    finished: bool
    finish_reason: str | None
    stop_reason: object
    num_tokens: int


def oracle_run(case: StopCase) -> Run:
    steps, texts = [], []
    data, prev, shown = b"", "", 0

    def finish(n, final, reason, stop_reason):
        steps.append((final[shown:], True, reason))
        texts.append(final)
        return Run(steps, texts, True, reason, stop_reason, n)

    for n, tok in enumerate(case.tokens, start=1):
        may_stop = n > case.min_tokens
        is_eos = tok == case.eos_token_id and not case.ignore_eos
        if may_stop and (is_eos or tok in case.stop_token_ids):
            return finish(n, prev, "stop", None if is_eos else tok)
        data += case.vocab[tok]
        text = oracle_text(data)
        assert text.startswith(prev), "oracle: decoding must only append"
        if may_stop:
            hits = [(i + len(s), -len(s), i, s) for s in case.stop for i in range(len(text))
                    if text[i:i + len(s)] == s and i + len(s) > len(prev)]
            if hits:
                end, _, i, s = min(hits)
                return finish(n, text[:end] if case.include_stop_str_in_output else text[:i], "stop", s)
        if n == case.max_tokens:
            return finish(n, text, "length", None)
        safe = len(text)
        if not case.include_stop_str_in_output:
            safe = next((i for i in range(len(text))
                         if any(len(s) > len(text) - i and s.startswith(text[i:]) for s in case.stop)), len(text))
        assert safe >= shown, "oracle: the safe prefix only grows"
        steps.append((text[shown:safe], False, None))
        texts.append(text)
        shown, prev = safe, text
    return Run(steps, texts, False, None, None, len(case.tokens))


def drive(impl, case: StopCase, vocab=None) -> Run:
    """Feed ``case.tokens`` to the implementation until it finishes."""
    params = case.params(impl.get("stopping.StopParams"))
    checker = impl.get("stopping.StopChecker")(params, case.vocab if vocab is None else vocab)
    steps, texts = [], []
    for tok in case.tokens:
        s = checker.append(tok)
        steps.append((s.emitted, s.finished, s.reason))
        texts.append(checker.text)
        if s.finished:
            break
    return Run(steps, texts, checker.finished, checker.finish_reason, checker.stop_reason, checker.num_tokens)


def _assert_same(got: Run, want: Run, case: StopCase, what: str = "oracle"):
    for i, (g, w) in enumerate(zip(got.steps, want.steps)):
        assert g == w, f"token {i + 1} (id {case.tokens[i]}): step {g!r} != {what} {w!r}\n  {case!r}"
        assert got.texts[i] == want.texts[i], (
            f"token {i + 1}: text {got.texts[i]!r} != {what} {want.texts[i]!r}\n  {case!r}")
    assert len(got.steps) == len(want.steps), f"took {len(got.steps)} tokens, {what} {len(want.steps)}\n  {case!r}"
    assert (got.finished, got.finish_reason, got.stop_reason, got.num_tokens) == (
        want.finished, want.finish_reason, want.stop_reason, want.num_tokens), case


# Pinned cases: each is one rule of the contract, and what the mutants get wrong.
SPANNING = StopCase(vocab=(b"Hel", b"lo wor", b"ld"), tokens=(0, 1, 2), stop=("o w",))
SPLIT_EURO = StopCase(vocab=(b"a", b"\xe2", b"\x82", b"\xac", b"b"), tokens=(0, 1, 2, 3, 4), stop=("\u20ac",))
EOS_IN_MIN = StopCase(vocab=(b"a", b"<e>"), tokens=(1, 0, 1, 0), eos_token_id=1, min_tokens=1)
INCLUDE = StopCase(vocab=(b"ab", b"cde", b"f"), tokens=(0, 1, 2), stop=("bc",), include_stop_str_in_output=True)
EXCLUDE_TAIL = StopCase(vocab=(b"xa", b"bcy", b"z"), tokens=(0, 1, 2), stop=("abc",))
PARTIAL_THEN_MISS = StopCase(vocab=(b"a", b"b", b"c"), tokens=(0, 1, 0, 2), stop=("abd", "bb"))
LENGTH_VS_STOP = StopCase(vocab=(b"a", b"b"), tokens=(0, 1, 0), stop=("ab",), max_tokens=2)
EARLIEST_END = StopCase(vocab=(b"abcd",), tokens=(0,), stop=("abcd", "bc", "c"))


@example(case=SPANNING)
@example(case=SPLIT_EURO)
@example(case=EOS_IN_MIN)
@example(case=INCLUDE)
@example(case=EXCLUDE_TAIL)
@example(case=PARTIAL_THEN_MISS)
@example(case=LENGTH_VS_STOP)
@example(case=EARLIEST_END)
@given(case=stop_cases())
def test_matches_naive_oracle(impl, case):
    """Every step (emitted piece, finished, reason), the text after every step, finish_reason,
    stop_reason and the number of tokens consumed equal the oracle's."""
    _assert_same(drive(impl, case), oracle_run(case), case)


@given(case=stop_cases())
def test_same_decisions_as_reference(impl, reference, case):
    """Differential: the same steps, texts and reasons as the reference."""
    _assert_same(drive(impl, case), drive(reference, case), case, what="reference")


@example(case=SPANNING)
@example(case=PARTIAL_THEN_MISS)
@given(case=stop_cases())
def test_stream_is_safe_and_complete(impl, case):
    """The emitted pieces concatenate to a prefix of the text at every step and to the final text
    at the end; nothing emitted can still become the start of a stop string (strings excluded)."""
    params = case.params(impl.get("stopping.StopParams"))
    checker = impl.get("stopping.StopChecker")(params, case.vocab)
    shown = ""
    for tok in case.tokens:
        step = checker.append(tok)
        shown += step.emitted
        text = checker.text
        assert text.startswith(shown), f"emitted {shown!r} is not a prefix of the text {text!r}\n  {case!r}"
        if step.finished:
            assert shown == text, f"emitted {shown!r} != final text {text!r}\n  {case!r}"
            break
        if not case.include_stop_str_in_output:
            for p in range(len(shown)):
                leak = [s for s in case.stop if len(s) > len(text) - p and s.startswith(text[p:])]
                assert not leak, (f"emitted {shown!r}, but text[{p}:] = {text[p:]!r} may still become "
                                  f"the stop string {leak[0]!r}\n  {case!r}")


@example(case=SPANNING)
@example(case=SPLIT_EURO)
@example(case=EXCLUDE_TAIL)
@given(case=stop_cases(special=False))
def test_decision_independent_of_tokenization(impl, case):
    """Metamorphic: with only stop strings deciding, feeding the same bytes one byte per token
    gives the same final text, finish reason and stop string."""
    whole = drive(impl, case)
    data = b"".join(case.vocab[t] for t in case.tokens)
    byte_case = replace(case, vocab=tuple(bytes([b]) for b in range(256)), tokens=tuple(data))
    bytewise = drive(impl, byte_case)
    assert (bytewise.texts[-1], bytewise.finish_reason, bytewise.stop_reason) == (
        whole.texts[-1], whole.finish_reason, whole.stop_reason), case


def test_course_examples(impl):
    """Readable instances of the contract (docs/stopping.md walks through them)."""
    P, C = impl.get("stopping.StopParams"), impl.get("stopping.StopChecker")
    vocab = {0: b"Hel", 1: b"lo wor", 2: b"ld", 3: b"</s>"}
    c = C(P(stop=["o w"]), vocab)
    steps = [tuple(c.append(t)) for t in (0, 1)]
    assert steps == [("Hel", False, None), ("l", True, "stop")]   # "o w" spans tokens 1-2
    assert (c.text, c.finish_reason, c.stop_reason) == ("Hell", "stop", "o w")
    c = C(P(stop="o w", include_stop_str_in_output=True), vocab)
    c.append(0)
    assert tuple(c.append(1)) == ("lo w", True, "stop") and c.text == "Hello w"  # "or" dropped
    c = C(P(eos_token_id=3, min_tokens=1, max_tokens=3), vocab)
    assert [tuple(c.append(t)) for t in (3, 0, 3)] == [("</s>", False, None), ("Hel", False, None),
                                                     ("", True, "stop")]
    assert (c.text, c.stop_reason, c.num_tokens) == ("</s>Hel", None, 3)
    c = C(P(eos_token_id=3, ignore_eos=True, stop_token_ids=[2], max_tokens=2), vocab)
    assert [tuple(c.append(t)) for t in (3, 3)] == [("</s>", False, None), ("</s>", True, "length")]
    c = C(P(stop_token_ids=[2]), vocab)
    assert tuple(c.append(2)) == ("", True, "stop") and c.stop_reason == 2 and c.text == ""


# --- state machine: implementation and reference side by side --------------------------------
class StopMachine(RuleBasedStateMachine):
    impl = None
    ref = None

    @initialize(case=stop_cases())
    def start(self, case):
        self.case = case
        self.a = self.impl.get("stopping.StopChecker")(case.params(self.impl.get("stopping.StopParams")), case.vocab)
        self.b = self.ref.get("stopping.StopChecker")(case.params(self.ref.get("stopping.StopParams")), case.vocab)
        self.shown = ""

    def _state(self, c):
        return (c.text, c.num_tokens, c.finished, c.finish_reason, c.stop_reason)

    @rule(data=st.data())
    def append_token(self, data):
        tok = data.draw(st.integers(0, len(self.case.vocab) - 1), label="token_id")
        if self.b.finished:
            before = self._state(self.a)
            with pytest.raises(ValueError):
                self.a.append(tok)
            assert self._state(self.a) == before, "a failed append after finishing changed the state"
            return
        got, want = self.a.append(tok), self.b.append(tok)
        assert (got.emitted, got.finished, got.reason) == tuple(want), (self.case, tok)
        self.shown += got.emitted

    @rule(data=st.data())
    def append_unknown_token(self, data):
        tok = data.draw(st.one_of(st.integers(max_value=-1), st.integers(min_value=len(self.case.vocab))),
                        label="unknown token_id")
        before = self._state(self.a)
        with pytest.raises(ValueError, match="token_id"):
            self.a.append(tok)
        assert self._state(self.a) == before, f"append({tok}) raised but changed the state"

    @invariant()
    def same_state_as_reference(self):
        assert self._state(self.a) == self._state(self.b), self.case

    @invariant()
    def emitted_is_a_safe_prefix(self):
        text = self.a.text
        assert text.startswith(self.shown)
        if self.a.finished:
            assert self.shown == text
        elif not self.case.include_stop_str_in_output:
            for p in range(len(self.shown)):
                assert not any(len(s) > len(text) - p and s.startswith(text[p:]) for s in self.case.stop)


def test_state_machine(impl, reference):
    """Random appends (valid, unknown, after finishing) against the reference, with invariants."""
    machine = type("StopMachineFor", (StopMachine,), {"impl": impl, "ref": reference})
    run_state_machine_as_test(machine, settings=settings(stateful_step_count=30))


# --- bad input -------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs,exc,name", [
    (dict(max_tokens=-1), ValueError, "max_tokens"),
    (dict(max_tokens=0), ValueError, "max_tokens"),
    (dict(max_tokens=2.0), TypeError, "max_tokens"),
    (dict(min_tokens=-1), ValueError, "min_tokens"),
    (dict(min_tokens=4, max_tokens=3), ValueError, "min_tokens"),
    (dict(stop=("ab", "")), ValueError, "stop"),
    (dict(stop=""), ValueError, "stop"),
    (dict(stop=("ab", 3)), TypeError, "stop"),
    (dict(eos_token_id=-1), ValueError, "eos_token_id"),
    (dict(stop_token_ids=(1, "x")), TypeError, "stop_token_ids"),
    (dict(ignore_eos="yes"), TypeError, "ignore_eos"),
])
def test_params_reject_bad_input(impl, kwargs, exc, name):
    with pytest.raises(exc, match=name):
        impl.get("stopping.StopParams")(**kwargs)


@pytest.mark.parametrize("kwargs,vocab,exc,name", [
    (dict(eos_token_id=7), [b"a"], ValueError, "eos_token_id"),
    (dict(stop_token_ids=(0, 9)), [b"a"], ValueError, "stop_token_ids"),
    (dict(), {0: "a"}, TypeError, "vocab"),
    (dict(), "ab", TypeError, "vocab"),
])
def test_checker_rejects_bad_input(impl, kwargs, vocab, exc, name):
    with pytest.raises(exc, match=name):
        impl.get("stopping.StopChecker")(impl.get("stopping.StopParams")(**kwargs), vocab)


@given(case=stop_cases(), data=st.data())
def test_bad_appends_change_nothing(impl, case, data):
    """Unknown or non-int ids raise (naming token_id) and leave the checker as it was: the run
    with bad appends interleaved equals the clean run; appending after finishing raises too."""
    P, C = impl.get("stopping.StopParams"), impl.get("stopping.StopChecker")
    vocab = {i: b for i, b in enumerate(case.vocab)}
    frozen = dict(vocab)
    checker = C(case.params(P), vocab)
    steps = []
    for tok in case.tokens:
        if data.draw(st.booleans(), label="interleave a bad id"):
            bad = data.draw(st.sampled_from([-1, len(vocab), 10**9, "0", 1.0, None]), label="bad id")
            state = (checker.text, checker.num_tokens, checker.finished)
            with pytest.raises((ValueError, TypeError), match="token_id"):
                checker.append(bad)
            assert (checker.text, checker.num_tokens, checker.finished) == state
        s = checker.append(tok)
        steps.append((s.emitted, s.finished, s.reason))
        if s.finished:
            state = (checker.text, checker.num_tokens, checker.finish_reason, checker.stop_reason)
            with pytest.raises(ValueError):
                checker.append(tok)
            assert (checker.text, checker.num_tokens, checker.finish_reason, checker.stop_reason) == state
            break
    assert steps == oracle_run(case).steps, case
    assert vocab == frozen, "StopChecker modified the vocab it was given"
