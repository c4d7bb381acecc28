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
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from conformance.stateful import run_as_test
from conformance.badinput import Bad, assert_rejects, bad_cases
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
    params = case.params(impl.get("StopParams"))
    checker = impl.get("StopChecker")(params, case.vocab if vocab is None else vocab)
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


# Pinned cases: each is one rule of the contract; the comment names the mutants
# (spec_tests/stopping/mutants.py) that get it wrong and that it catches.
SPANNING = StopCase(vocab=(b"Hel", b"lo w", b"orld"), tokens=(0, 1, 2), stop=("o wo",))  # missed_across_boundary
SPLIT_EURO = StopCase(vocab=(b"a", b"\xe2", b"\x82", b"\xac", b"b"), tokens=(0, 1, 2, 3, 4), stop=("\u20ac",))  # no_pending_utf8
EOS_IN_MIN = StopCase(vocab=(b"a", b"<e>"), tokens=(1, 0, 1, 0), eos_token_id=1, min_tokens=1)  # eos_ignores_min_tokens, min_tokens_off_by_one
INCLUDE = StopCase(vocab=(b"ab", b"cde", b"f"), tokens=(0, 1, 2), stop=("bc",), include_stop_str_in_output=True)  # include_flag_ignored, holds_back_when_included
EXCLUDE_TAIL = StopCase(vocab=(b"xa", b"bcy", b"z"), tokens=(0, 1, 2), stop=("abc",))  # endswith_only, includes_excluded_stop
PARTIAL_THEN_MISS = StopCase(vocab=(b"a", b"b", b"c"), tokens=(0, 1, 0, 2), stop=("abd", "bb"))  # holds_fixed_window, leaks_partial_stop
LENGTH_VS_STOP = StopCase(vocab=(b"a", b"b"), tokens=(0, 1, 0), stop=("ab",), max_tokens=2)  # length_beats_stop
EARLIEST_END = StopCase(vocab=(b"abcd",), tokens=(0,), stop=("abcd", "bc", "c"))  # first_in_list_order, tie_prefers_shortest
# Boundaries.
EOS_AND_STOP_ID = StopCase(vocab=(b"a", b"<e>"), tokens=(0, 1, 0), eos_token_id=1, stop_token_ids=(1,))  # stop_ids_before_eos
IGNORED_EOS_STOP_ID = StopCase(vocab=(b"a", b"<e>"), tokens=(0, 1, 0), eos_token_id=1, ignore_eos=True,
                               stop_token_ids=(1,))  # ignore_eos_skips_stop_ids
MATCH_AT_START = StopCase(vocab=(b"ab", b"c"), tokens=(0, 1), stop=("ab",))  # match_at_start_missed
MIN_EQ_MAX = StopCase(vocab=(b"a", b"<e>"), tokens=(1, 1, 1), eos_token_id=1, min_tokens=2, max_tokens=2)  # min_tokens_off_by_one
MAX_ONE = StopCase(vocab=(b"ab", b"c"), tokens=(0, 1), max_tokens=1)  # max_tokens_one_late
HELD_ACROSS = StopCase(vocab=(b"xa", b"b", b"d"), tokens=(0, 1, 2), stop=("abc",))  # leaks_partial_stop
TWENTY = StopCase(vocab=(b"a",), tokens=(0,) * 20, max_tokens=20)  # default_max_tokens_16 (max_tokens omitted)


@example(case=EOS_AND_STOP_ID).via("mutant:stop_ids_before_eos")
@example(case=IGNORED_EOS_STOP_ID).via("mutant:ignore_eos_skips_stop_ids")
@example(case=MATCH_AT_START).via("mutant:match_at_start_missed")
@example(case=MIN_EQ_MAX).via("mutant:min_tokens_off_by_one mutant:max_tokens_one_late")
@example(case=MAX_ONE).via("mutant:max_tokens_one_late")
@example(case=HELD_ACROSS).via("mutant:leaks_partial_stop mutant:holds_fixed_window")
@example(case=SPANNING).via("mutant:missed_across_boundary")
@example(case=SPLIT_EURO).via("mutant:no_pending_utf8")
@example(case=EOS_IN_MIN).via("mutant:eos_ignores_min_tokens mutant:min_tokens_off_by_one")
@example(case=INCLUDE).via("mutant:include_flag_ignored mutant:holds_back_when_included")
@example(case=EXCLUDE_TAIL).via("mutant:endswith_only mutant:includes_excluded_stop")
@example(case=PARTIAL_THEN_MISS).via("mutant:holds_fixed_window mutant:leaks_partial_stop")
@example(case=LENGTH_VS_STOP).via("mutant:length_beats_stop")
@example(case=EARLIEST_END).via("mutant:first_in_list_order mutant:tie_prefers_shortest")
@given(case=stop_cases())
def test_matches_naive_oracle(impl, case):
    """Every step (emitted piece, finished, reason), the text after every step, finish_reason,
    stop_reason and the number of tokens consumed equal the oracle's."""
    _assert_same(drive(impl, case), oracle_run(case), case)


@given(case=stop_cases())
def test_same_decisions_as_reference(impl, reference, case):
    """Differential: the same steps, texts and reasons as the reference."""
    _assert_same(drive(impl, case), drive(reference, case), case, what="reference")


@example(case=HELD_ACROSS).via("mutant:leaks_partial_stop")
@example(case=PARTIAL_THEN_MISS).via("mutant:leaks_partial_stop")
@given(case=stop_cases())
def test_stream_is_safe_and_complete(impl, case):
    """The emitted pieces concatenate to a prefix of the text at every step and to the final text
    at the end; nothing emitted can still become the start of a stop string (strings excluded)."""
    params = case.params(impl.get("StopParams"))
    checker = impl.get("StopChecker")(params, case.vocab)
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


@example(case=SPANNING).via("mutant:endswith_only")
@example(case=EXCLUDE_TAIL).via("mutant:endswith_only mutant:match_at_start_missed")
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
    P, C = impl.get("StopParams"), impl.get("StopChecker")
    vocab = {0: b"Hel", 1: b"lo wor", 2: b"ld", 3: b"</s>"}
    c = C(P(stop=["llo w"]), vocab)
    steps = [tuple(c.append(t)) for t in (0, 1)]
    # "llo w" begins in token 0 ("l" is held back: it may begin the stop string) and ends in 1
    assert steps == [("He", False, None), ("", True, "stop")]
    assert (c.text, c.finish_reason, c.stop_reason) == ("He", "stop", "llo w")
    c = C(P(stop="llo w", include_stop_str_in_output=True), vocab)
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


def test_overlapping_occurrence_after_min_tokens(impl):
    """An occurrence that overlaps an older one (complete at a token <= min_tokens, so it does
    not count) still stops when it ends in a later token: occurrences are searched overlapping.
    Mutant: non_overlapping_search."""
    P, C = impl.get("StopParams"), impl.get("StopChecker")
    for stop, first, second, final in (("aa", b"aa", b"a", "a"), ("aba", b"aba", b"ba", "ab")):
        c = C(P(min_tokens=1, stop=stop), {0: first, 1: second})
        c.append(0)
        step = c.append(1)
        assert step.finished and (c.text, c.finish_reason, c.stop_reason) == (final, "stop", stop), (
            stop, tuple(step), c.text, c.stop_reason)


def test_length_finish_drops_the_pending_tail(impl):
    """Rule 1: when generation finishes, pending bytes (a UTF-8 character still incomplete) are
    dropped, never turned into U+FFFD -- also at a length finish, where the last token itself
    leaves the tail pending ("a", then the first two bytes of the three-byte euro sign). Mutant:
    pending_replaced_at_length."""
    P, C = impl.get("StopParams"), impl.get("StopChecker")
    for stop in ((), ("zz",)):
        c = C(P(max_tokens=2, stop=stop), {0: b"a", 1: "\u20ac".encode()[:2]})
        c.append(0)
        step = c.append(1)
        assert step.finished and c.finish_reason == "length", (stop, tuple(step))
        assert c.text == "a", (stop, c.text)


# --- defaults --------------------------------------------------------------------------------
# The documented defaults of StopParams (reference/stopping.py): what omitting an argument means.
PARAMS_DEFAULTS = dict(max_tokens=None, min_tokens=0, eos_token_id=None, ignore_eos=False,
                       stop_token_ids=(), stop=(), include_stop_str_in_output=False)


@example(case=TWENTY, omit=frozenset({"max_tokens"})).via("mutant:default_max_tokens_16")
@example(case=EOS_IN_MIN, omit=frozenset({"ignore_eos"})).via("mutant:ignore_eos_default_true")
@given(case=stop_cases(), omit=st.frozensets(st.sampled_from(sorted(PARAMS_DEFAULTS)), min_size=1))
def test_omitted_arguments_mean_the_defaults(impl, case, omit):
    """StopParams with some arguments omitted behaves, step by step, as the oracle with those
    arguments at their documented defaults, and holds the defaults as its fields. Mutants:
    default_max_tokens_16, ignore_eos_default_true."""
    P = impl.get("StopParams")
    defaulted = replace(case, **{k: PARAMS_DEFAULTS[k] for k in omit})
    params = P(**{k: getattr(case, k) for k in PARAMS_DEFAULTS if k not in omit})
    for k in omit:
        got = getattr(params, k)
        assert got == PARAMS_DEFAULTS[k] and type(got) is type(PARAMS_DEFAULTS[k]), (
            f"StopParams without {k} holds {k}={got!r}, documented default {PARAMS_DEFAULTS[k]!r}")
    checker = impl.get("StopChecker")(params, case.vocab)
    steps = []
    for tok in case.tokens:
        step = checker.append(tok)
        steps.append((step.emitted, step.finished, step.reason))
        if step.finished:
            break
    want = oracle_run(defaulted)
    assert steps == want.steps and (checker.finish_reason, checker.stop_reason) == (
        want.finish_reason, want.stop_reason), f"omitted {sorted(omit)}: {steps} != {want.steps}\n  {case!r}"


def test_no_limit_by_default(impl):
    """StopParams() stops on nothing: 2,000 tokens stream through unchanged, nothing held back
    (there is no stop string), never finished. Mutant: default_max_tokens_16."""
    checker = impl.get("StopChecker")(impl.get("StopParams")(), [b"ab", b"\xe2\x82\xac"])
    shown = []
    for i in range(2000):
        step = checker.append(i % 2)
        assert not step.finished, f"StopParams() finished at token {i + 1} ({step.reason})"
        shown.append(step.emitted)
    assert "".join(shown) == checker.text == "ab\u20ac" * 1000 and checker.num_tokens == 2000
    assert (checker.finished, checker.finish_reason, checker.stop_reason) == (False, None, None)


# --- state machine: implementation and reference side by side --------------------------------
class StopMachine(RuleBasedStateMachine):
    impl = None
    ref = None

    @initialize(case=stop_cases())
    def start(self, case):
        self.case = case
        self.a = self.impl.get("StopChecker")(case.params(self.impl.get("StopParams")), case.vocab)
        self.b = self.ref.get("StopChecker")(case.params(self.ref.get("StopParams")), case.vocab)
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
    run_as_test(machine, settings=settings(stateful_step_count=30))


# --- bad input -------------------------------------------------------------------------------
PARAMS_VALID = dict(max_tokens=4, min_tokens=1, eos_token_id=0, stop_token_ids=(1,), stop=("ab",))
PARAMS_BAD = [
    Bad("negative max_tokens", dict(max_tokens=-1), ValueError, ("max_tokens",)),
    Bad("zero max_tokens", dict(max_tokens=0), ValueError, ("max_tokens",)),
    # min_tokens 0 too: otherwise the row is rejected for min_tokens > max_tokens whatever the check
    Bad("zero max_tokens, min_tokens 0", dict(max_tokens=0, min_tokens=0), ValueError, ("max_tokens",)),
    Bad("float max_tokens", dict(max_tokens=2.0), TypeError, ("max_tokens",)),
    Bad("bool max_tokens", dict(max_tokens=True), TypeError, ("max_tokens",)),
    Bad("negative min_tokens", dict(min_tokens=-1), ValueError, ("min_tokens",)),
    Bad("None min_tokens", dict(min_tokens=None), TypeError, ("min_tokens",)),
    Bad("min_tokens above max_tokens", dict(min_tokens=5), ValueError, ("min_tokens", "max_tokens")),
    Bad("negative eos_token_id", dict(eos_token_id=-1), ValueError, ("eos_token_id",)),
    Bad("str eos_token_id", dict(eos_token_id="0"), TypeError, ("eos_token_id",)),
    Bad("str ignore_eos", dict(ignore_eos="yes"), TypeError, ("ignore_eos",)),
    Bad("int include_stop_str_in_output", dict(include_stop_str_in_output=1), TypeError,
        ("include_stop_str_in_output",)),
    Bad("str in stop_token_ids", dict(stop_token_ids=(1, "x")), TypeError, ("stop_token_ids",)),
    Bad("negative stop token id", dict(stop_token_ids=(1, -2)), ValueError, ("stop_token_ids",)),
    Bad("stop token id -1", dict(stop_token_ids=(1, -1)), ValueError, ("stop_token_ids",)),
    Bad("stop_token_ids a string", dict(stop_token_ids="12"), TypeError, ("stop_token_ids",)),
    Bad("empty stop string in a list", dict(stop=("ab", "")), ValueError, ("stop",)),
    Bad("empty stop string", dict(stop=""), ValueError, ("stop",)),
    Bad("int in stop", dict(stop=("ab", 3)), TypeError, ("stop",)),
    Bad("stop an int", dict(stop=3), TypeError, ("stop",)),
    Bad("stop None", dict(stop=None), TypeError, ("stop",)),
    Bad("stop bytes", dict(stop=b"ab"), TypeError, ("stop",)),
    Bad("float min_tokens", dict(min_tokens=1.0), TypeError, ("min_tokens",)),
    Bad("bool min_tokens", dict(min_tokens=False), TypeError, ("min_tokens",)),
    Bad("float eos_token_id", dict(eos_token_id=0.0), TypeError, ("eos_token_id",)),
    Bad("bool eos_token_id", dict(eos_token_id=True), TypeError, ("eos_token_id",)),
    Bad("None ignore_eos", dict(ignore_eos=None), TypeError, ("ignore_eos",)),
    Bad("stop_token_ids an int", dict(stop_token_ids=1), TypeError, ("stop_token_ids",)),
    Bad("stop_token_ids None", dict(stop_token_ids=None), TypeError, ("stop_token_ids",)),
    Bad("bool in stop_token_ids", dict(stop_token_ids=(True,)), TypeError, ("stop_token_ids",)),
    Bad("min_tokens above max_tokens 1", dict(max_tokens=1, min_tokens=2), ValueError, ("min_tokens", "max_tokens")),
]


@bad_cases(PARAMS_BAD)
def test_params_reject_bad_input(impl, bad):
    """StopParams: ValueError for an illegal value, TypeError for the wrong kind, naming the argument."""
    assert_rejects(impl.get("StopParams"), PARAMS_VALID, bad)


def test_params_hold_copies_as_tuples(impl):
    """StopParams is a value (contract): ``stop`` and ``stop_token_ids`` are held as tuples,
    copies of the sequences given, so a caller who changes its lists afterwards changes neither
    the params nor a checker built from them. Scratch bug: keeping the caller's list (the
    normalisation of ``stop_token_ids`` dropped) -- a later ``ids.append(0)`` makes token 0 stop."""
    P, C = impl.get("StopParams"), impl.get("StopChecker")
    ids, stops = [1], ["ab"]
    params = P(stop_token_ids=ids, stop=stops)
    assert (params.stop_token_ids, params.stop) == ((1,), ("ab",)) and type(params.stop_token_ids) is tuple \
        and type(params.stop) is tuple, (
        f"StopParams(stop_token_ids=[1], stop=['ab']) holds {params.stop_token_ids!r}, {params.stop!r}: want tuples")
    checker = C(params, [b"a", b"<s>", b"c"])
    ids.append(0)
    stops.append("c")
    assert (params.stop_token_ids, params.stop) == ((1,), ("ab",)), (
        f"changing the lists given changed the params: {params.stop_token_ids!r}, {params.stop!r}")
    assert [tuple(checker.append(t)) for t in (0, 2)] == [("", False, None), ("ac", False, None)], (
        "a checker stopped on a token id / stop string added to the caller's lists after StopParams was built")
    assert tuple(checker.append(1)) == ("", True, "stop") and checker.stop_reason == 1


CHECKER_VALID = dict(vocab=[b"a", b"b", b"<e>"], eos_token_id=2, stop_token_ids=(1,), stop=("ab",))
CHECKER_BAD = [
    Bad("eos_token_id not in the vocab", dict(eos_token_id=7), ValueError, ("eos_token_id",)),
    Bad("stop_token_ids not in the vocab", dict(stop_token_ids=(0, 9)), ValueError, ("stop_token_ids",)),
    Bad("str token in the vocab", dict(vocab={0: b"a", 1: "b", 2: b"<e>"}), TypeError, ("vocab",)),
    Bad("vocab a string", dict(vocab="ab<", eos_token_id=None, stop_token_ids=()), TypeError, ("vocab",)),
    Bad("vocab an int", dict(vocab=3, eos_token_id=None, stop_token_ids=()), TypeError, ("vocab",)),
    Bad("str token id in the vocab", dict(vocab={0: b"a", "1": b"b", 2: b"<e>"}), TypeError, ("vocab",)),
    Bad("params not a StopParams", dict(params=dict(stop=("ab",))), TypeError, ("params",)),
    Bad("params None", dict(params=None), TypeError, ("params",)),
    Bad("vocab None", dict(vocab=None, eos_token_id=None, stop_token_ids=()), TypeError, ("vocab",)),
    Bad("vocab bytes", dict(vocab=b"ab<", eos_token_id=None, stop_token_ids=()), TypeError, ("vocab",)),
    Bad("str token in a list vocab", dict(vocab=[b"a", "b", b"<e>"]), TypeError, ("vocab",)),
]


@bad_cases(CHECKER_BAD)
def test_checker_rejects_bad_input(impl, bad):
    """StopChecker(params, vocab): TypeError naming ``vocab``/``params`` for the wrong kind,
    ValueError naming ``eos_token_id``/``stop_token_ids`` for ids not in the vocab."""
    P, C = impl.get("StopParams"), impl.get("StopChecker")

    build = object()

    def make(vocab, params=build, **kw):  # kw: StopParams fields (params: passed as they are)
        return C(P(**kw) if params is build else params, vocab)

    assert_rejects(make, CHECKER_VALID, bad)


def _state(c) -> tuple:
    return (c.text, c.num_tokens, c.finished, c.finish_reason, c.stop_reason)


# A generation in progress: "ab" is held back (it may become "abc") and the first byte of a
# split "\u20ac" is pending; a rejected append must change none of it.
MID_VOCAB = {0: b"a", 1: b"b", 2: b"\xe2\x82", 3: b"\xac", 5: b"c"}
# Bad for any vocabulary of the strategies (at most 10 tokens, ids 0..9) ...
APPEND_BAD_ANY_VOCAB = [
    Bad("negative id", dict(token_id=-1), ValueError, ("token_id",)),
    Bad("id past the vocab", dict(token_id=10**9), ValueError, ("token_id",)),
    Bad("str id", dict(token_id="0"), TypeError, ("token_id",)),
    Bad("float id", dict(token_id=1.0), TypeError, ("token_id",)),
    Bad("None id", dict(token_id=None), TypeError, ("token_id",)),
    Bad("bool id", dict(token_id=True), TypeError, ("token_id",)),
]
# ... and for MID_VOCAB only.
APPEND_BAD = APPEND_BAD_ANY_VOCAB + [
    Bad("id in a gap of the vocab", dict(token_id=4), ValueError, ("token_id",)),
]


@bad_cases(APPEND_BAD)
def test_append_rejects_bad_input(impl, bad):
    """append(token_id) mid-generation: ValueError for an id not in the vocab, TypeError for a
    non-int, naming ``token_id``; the checker is unchanged, so the run continues as if the bad
    call never happened."""
    c = impl.get("StopChecker")(impl.get("StopParams")(stop=("abc",)), MID_VOCAB)
    assert [tuple(c.append(t)) for t in (0, 1, 2)] == [("", False, None), ("", False, None), ("", False, None)]
    assert_rejects(c.append, dict(token_id=0), bad, state=lambda: _state(c))
    assert tuple(c.append(3)) == ("ab\u20ac", False, None)
    assert tuple(c.append(5)) == ("c", False, None) and c.text == "ab\u20acc"


FINISHED_BAD = [
    Bad("append after finishing", dict(token_id=0), ValueError, ("finished",)),
]


@bad_cases(FINISHED_BAD)
@pytest.mark.parametrize("ending", ["stop", "length"])
def test_append_after_finishing_rejected(impl, bad, ending):
    """Any append after generation finished raises ValueError saying so; the final state stays."""
    P = impl.get("StopParams")
    params = P(stop=("b",)) if ending == "stop" else P(max_tokens=2)
    c = impl.get("StopChecker")(params, MID_VOCAB)
    for t in (0, 1):
        step = c.append(t)
    assert step.finished and c.finish_reason == ending
    assert_rejects(c.append, dict(token_id=0), bad, state=lambda: _state(c))


@given(case=stop_cases(), data=st.data())
def test_bad_appends_change_nothing(impl, case, data):
    """The bad appends of the table, interleaved at random points of a random generation (and
    one just past its vocabulary): each is rejected and leaves the checker as it was, so the run
    equals the clean run; appending after finishing is rejected too."""
    P, C = impl.get("StopParams"), impl.get("StopChecker")
    vocab = {i: b for i, b in enumerate(case.vocab)}
    frozen = dict(vocab)
    checker = C(case.params(P), vocab)
    just_past = Bad("id just past the vocab", dict(token_id=len(vocab)), ValueError, ("token_id",))
    steps = []
    for tok in case.tokens:
        if data.draw(st.booleans(), label="interleave a bad append"):
            bad = data.draw(st.sampled_from(APPEND_BAD_ANY_VOCAB + [just_past]), label="bad")
            assert_rejects(checker.append, dict(token_id=tok), bad, state=lambda: _state(checker))
        s = checker.append(tok)
        steps.append((s.emitted, s.finished, s.reason))
        if s.finished:
            bad = replace(FINISHED_BAD[0], change=dict(token_id=tok))
            assert_rejects(checker.append, dict(token_id=tok), bad, state=lambda: _state(checker))
            break
    assert steps == oracle_run(case).steps, case
    assert vocab == frozen, "StopChecker modified the vocab it was given"
