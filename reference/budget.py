"""Thinking-token budgets and budget forcing (course 08.04; the "wait" budget-forcing trick of s1,
arXiv 2501.10921, planned for chapter 11).

A reasoning model thinks first -- tokens between the prompt's opening of the thinking block and
the end-of-thinking delimiter (``</think>``) -- and answers after it. The knob a caller is given
(08.04) is a thinking-token ceiling: at most ``max_thinking_tokens`` tokens of thinking, after
which the engine *forces* the end of thinking and the answer phase begins. s1 adds a floor: when
the model tries to stop thinking before ``min_thinking_tokens``, its end-of-thinking token is
suppressed and "Wait" is appended instead, so it goes on thinking (at most ``max_waits`` times).

Forcing works as an engine's logits processor does it (vLLM's thinking-token budget, SGLang's
reasoner grammar): one token per decode step; at a *forced* step the model's proposal is
overridden by the token the budget dictates. So every forced token costs a decode step, is
output, and is counted by ``max_tokens``.

The budget (``ThinkingBudget``, plain data)
-------------------------------------------
``ThinkingBudget(end_think_id, max_thinking_tokens=None, min_thinking_tokens=0, wait_ids=(),
max_waits=None, answer_prefix_ids=())``:

- ``end_think_id``: the end-of-thinking token (an int >= 0).
- ``max_thinking_tokens``: the ceiling (an int >= 0; None: no ceiling).
- ``min_thinking_tokens``: the floor (an int >= 0, <= the ceiling).
- ``wait_ids``: the tokens appended instead of a suppressed end of thinking (e.g. "Wait"; a tuple
  of ints >= 0, not containing ``end_think_id``); non-empty when ``min_thinking_tokens > 0``.
- ``max_waits``: how many times at most the end of thinking is suppressed (an int >= 0; None:
  as many as it takes to reach the floor).
- ``answer_prefix_ids``: tokens appended after a *forced* end of thinking (e.g. "Final Answer:";
  s1's optional prefix; a tuple of ints >= 0, may be empty). Not appended after the model's own
  end of thinking.

A floor must leave room for a whole "Wait" under the ceiling: ``min_thinking_tokens +
len(wait_ids) - 1 <= max_thinking_tokens`` (so a Wait, which starts below the floor, always
ends at or under the ceiling; never truncated).

The forcer (``BudgetForcer(budget)``): the state machine
--------------------------------------------------------
State: ``phase`` ("thinking", then "answer"; generation starts in thinking), ``thinking_tokens``
(tokens appended in the thinking phase, Waits included, the end-of-thinking token excluded),
``waits`` (suppressed ends so far), ``forced_end`` (whether the thinking ended by the ceiling),
``num_tokens`` (steps so far), and the queue of forced tokens still to come.

``step(token_id) -> BudgetStep(token_id, forced)``: ``token_id`` is the model's proposal for the
next position; the result is the token appended there and whether the budget chose it (True) or
it is the proposal as such (False). In order, the first rule that applies:

1. Forced tokens queued (the rest of a Wait, or the answer prefix): the next one is appended,
   forced; a Wait's token counts as a thinking token.
2. Thinking, and ``thinking_tokens == max_thinking_tokens``: the ceiling is reached:
   ``end_think_id`` is appended, forced, then ``answer_prefix_ids`` are queued; phase "answer",
   ``forced_end = True``. (At ``max_thinking_tokens = 0`` this is the first step.)
3. Thinking, the proposal is ``end_think_id``, ``thinking_tokens < min_thinking_tokens`` and
   ``waits < max_waits`` (or ``max_waits`` is None): the end is suppressed: ``wait_ids[0]`` is
   appended, forced, the rest of ``wait_ids`` queued, ``waits += 1``.
4. Thinking, the proposal is ``end_think_id``: the model's own end of thinking is appended (not
   forced); phase "answer".
5. Otherwise the proposal is appended as it is (a thinking token in the thinking phase). In the
   answer phase every proposal is an ordinary token, ``end_think_id`` included.

At steps 1-2 the proposal is ignored: ``next_forced`` (a property) is the token the next step will
append whatever is proposed, None when the proposal matters (an engine may skip sampling, as long
as it still calls ``step``). Consequences (the law the tests check): ``thinking_tokens`` never
exceeds ``max_thinking_tokens``; a forced end happens exactly when it reaches the ceiling, and the
tokens appended then are ``end_think_id`` followed by ``answer_prefix_ids``; a Wait is inserted
only for a proposed end below the floor, whole, at most ``max_waits`` times.

The generation loop and stopping (concept ``stopping``)
-------------------------------------------------------
``generate_with_budget(model, budget, vocab, max_tokens, *, eos_token_id=None,
stop_token_ids=(), stop=()) -> BudgetOutput``: ``model(generated) -> int`` proposes the next
token given the list of tokens generated so far (a fresh list each call; the prompt is the
model's own business). Each step calls the model exactly once (forced steps too: a forced token
costs a forward pass), passes the proposal to a ``BudgetForcer`` and the appended token to a
``reference.stopping.StopChecker(StopParams(max_tokens=max_tokens, eos_token_id=eos_token_id,
stop_token_ids=stop_token_ids, stop=stop), vocab)``, until the checker finishes. Which wins:

- **Stopping judges every appended token, forced or sampled, the same way.** ``max_tokens``
  counts forced tokens (end of thinking, answer prefix, Waits); a stop string may be completed by
  a forced token; a forced token that is a stop token ends generation.
- **``max_tokens`` wins over the budget**: generation ends by "length" at ``max_tokens`` tokens
  even mid-thinking (no answer) or in the middle of a forced sequence.
- **EOS and stop tokens end generation in the thinking phase too**: only ``end_think_id`` is a
  request to end thinking; an EOS below the floor is not suppressed and no Wait replaces it.
- ``end_think_id`` may be neither ``eos_token_id`` nor in ``stop_token_ids`` (ending thinking
  would end generation): ValueError naming ``end_think_id``.

``BudgetOutput(tokens, forced, text, finish_reason, stop_reason, thinking_tokens, waits,
forced_end)``: every appended token (the finishing one included, as ``StopChecker.num_tokens``
counts it), which of them the budget forced, the checker's final ``text``, ``finish_reason``
("stop" or "length") and ``stop_reason``, and the forcer's final counts.

Bad input (``TypeError`` for the wrong kind, ``ValueError`` for an illegal value, each naming the
argument or the budget's field): ``budget`` without the fields of a ``ThinkingBudget`` (it is
read by its fields: any object with them is accepted, e.g. a student's own copy of the class);
any field as above (a bool is not an int; ``wait_ids``/``answer_prefix_ids`` a list or tuple of
ints), checked in the order of the fields; ``step``'s ``token_id`` not an int >= 0 (the forcer's
state is then unchanged). ``generate_with_budget`` checks ``model``, then ``budget``, then the rest:
``model`` not callable, or returning anything but a token id of the vocab (TypeError /
ValueError naming ``model``); ``max_tokens`` not an int >= 1 (a loop without a limit may never
end); ``vocab``, ``eos_token_id``, ``stop_token_ids``, ``stop`` as ``StopParams`` and
``StopChecker`` reject them; ``end_think_id``, ``wait_ids``, ``answer_prefix_ids`` not in the vocab.

Choices the law leaves open: none beyond the rules above (they are the contract).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from reference._checks import check_int, is_int
from reference.stopping import StopChecker, StopParams, check_vocab

__all__ = ["BudgetForcer", "generate_with_budget"]  # the contract
__optional__ = []  # checked when an implementation provides them

THINKING, ANSWER = "thinking", "answer"
FIELDS = ("end_think_id", "max_thinking_tokens", "min_thinking_tokens", "wait_ids", "max_waits", "answer_prefix_ids")


@dataclass(frozen=True)
class ThinkingBudget:
    """A thinking-token budget (module docstring); plain data, checked where it is used."""

    end_think_id: int
    max_thinking_tokens: int | None = None
    min_thinking_tokens: int = 0
    wait_ids: tuple[int, ...] = ()
    max_waits: int | None = None
    answer_prefix_ids: tuple[int, ...] = ()


class BudgetStep(NamedTuple):
    """What one ``BudgetForcer.step`` appended: the token, and whether the budget chose it."""

    token_id: int
    forced: bool


class BudgetOutput(NamedTuple):
    """The result of :func:`generate_with_budget`."""

    tokens: list[int]
    forced: list[bool]
    text: str
    finish_reason: str
    stop_reason: int | str | None
    thinking_tokens: int
    waits: int
    forced_end: bool


def _token_ids(name: str, value) -> tuple[int, ...]:
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{name} must be a list or tuple of token ids, got {type(value).__name__}")
    for t in value:
        check_int(name, t, minimum=0)
    return tuple(value)


def check_budget(budget) -> ThinkingBudget:
    """``budget`` checked (TypeError / ValueError naming the field); returned with its id lists
    as tuples (a copy: a caller changing its lists afterwards changes nothing)."""
    missing = [f for f in FIELDS if not hasattr(budget, f)]
    if missing:
        raise TypeError(f"budget must be a ThinkingBudget (an object with the fields {', '.join(FIELDS)}), "
                        f"got {type(budget).__name__} without {', '.join(missing)}")
    end = check_int("end_think_id", budget.end_think_id, minimum=0)
    ceiling = check_int("max_thinking_tokens", budget.max_thinking_tokens, minimum=0, allow_none=True)
    floor = check_int("min_thinking_tokens", budget.min_thinking_tokens, minimum=0)
    wait = _token_ids("wait_ids", budget.wait_ids)
    max_waits = check_int("max_waits", budget.max_waits, minimum=0, allow_none=True)
    prefix = _token_ids("answer_prefix_ids", budget.answer_prefix_ids)
    if ceiling is not None and floor > ceiling:
        raise ValueError(f"min_thinking_tokens ({floor}) must be <= max_thinking_tokens ({ceiling})")
    if end in wait:
        raise ValueError(f"wait_ids {wait} must not contain end_think_id {end}: a Wait would end the thinking")
    if floor > 0 and not wait:
        raise ValueError(f"wait_ids must be non-empty when min_thinking_tokens ({floor}) > 0: "
                         "a suppressed end of thinking is replaced by them")
    if ceiling is not None and floor > 0 and floor + len(wait) - 1 > ceiling:
        raise ValueError(f"wait_ids: a Wait of {len(wait)} tokens started below min_thinking_tokens ({floor}) "
                         f"must fit under max_thinking_tokens ({ceiling})")
    return ThinkingBudget(end, ceiling, floor, wait, max_waits, prefix)


class BudgetForcer:
    """Budget forcing, one token per step (module docstring, rules 1-5)."""

    def __init__(self, budget: ThinkingBudget):
        self.budget = check_budget(budget)
        self.phase = THINKING
        self.thinking_tokens = 0
        self.waits = 0
        self.forced_end = False
        self.num_tokens = 0
        self._queue: list[int] = []

    @property
    def next_forced(self) -> int | None:
        """The token the next step appends whatever is proposed; None when the proposal matters."""
        if self._queue:
            return self._queue[0]
        b = self.budget
        if self.phase == THINKING and self.thinking_tokens == b.max_thinking_tokens:
            return b.end_think_id
        return None

    def step(self, token_id: int) -> BudgetStep:
        """Append the next token given the model's proposal ``token_id``."""
        check_int("token_id", token_id, minimum=0)
        b = self.budget
        if self._queue:                                                    # 1. queued forced tokens
            token, forced = self._queue.pop(0), True
            if self.phase == THINKING:
                self.thinking_tokens += 1
        elif self.phase == THINKING and self.thinking_tokens == b.max_thinking_tokens:   # 2. the ceiling
            token, forced = b.end_think_id, True
            self._queue = list(b.answer_prefix_ids)
            self.phase, self.forced_end = ANSWER, True
        elif self.phase == THINKING and token_id == b.end_think_id:
            if self.thinking_tokens < b.min_thinking_tokens and (b.max_waits is None or self.waits < b.max_waits):
                token, forced = b.wait_ids[0], True                       # 3. suppressed: Wait
                self._queue = list(b.wait_ids[1:])
                self.waits += 1
                self.thinking_tokens += 1
            else:
                token, forced = token_id, False                           # 4. the model's own end
                self.phase = ANSWER
        else:
            token, forced = token_id, False                               # 5. the proposal
            if self.phase == THINKING:
                self.thinking_tokens += 1
        self.num_tokens += 1
        return BudgetStep(token, forced)


def _check_in_vocab(name: str, ids, vocab: Mapping) -> None:
    missing = [t for t in ids if t not in vocab]
    if missing:
        raise ValueError(f"{name}: token ids {missing} are not in the vocab")


def generate_with_budget(model: Callable[[list[int]], int], budget: ThinkingBudget,
                         vocab: Mapping[int, bytes] | Sequence[bytes], max_tokens: int, *,
                         eos_token_id: int | None = None, stop_token_ids: Sequence[int] = (),
                         stop: str | Sequence[str] = ()) -> BudgetOutput:
    """Generate under a thinking budget until stopping ends it (module docstring: which wins)."""
    if not callable(model):
        raise TypeError(f"model must be callable (generated tokens -> next token id), got {type(model).__name__}")
    forcer = BudgetForcer(budget)
    check_int("max_tokens", max_tokens, minimum=1)
    checker = StopChecker(StopParams(max_tokens=max_tokens, eos_token_id=eos_token_id,
                                     stop_token_ids=stop_token_ids, stop=stop), vocab)
    ids = check_vocab(vocab)
    b = forcer.budget
    _check_in_vocab("end_think_id", [b.end_think_id], ids)
    _check_in_vocab("wait_ids", b.wait_ids, ids)
    _check_in_vocab("answer_prefix_ids", b.answer_prefix_ids, ids)
    if b.end_think_id == eos_token_id or b.end_think_id in checker.params.stop_token_ids:
        raise ValueError(f"end_think_id {b.end_think_id} is the EOS or a stop token: ending the thinking would "
                         "end the generation")
    tokens: list[int] = []
    forced: list[bool] = []
    while not checker.finished:
        proposal = model(list(tokens))
        if not is_int(proposal):
            raise TypeError(f"model must return a token id (an int), got {proposal!r}")
        if proposal not in ids:
            raise ValueError(f"model returned token id {proposal}, which is not in the vocab")
        step = forcer.step(proposal)
        tokens.append(step.token_id)
        forced.append(step.forced)
        checker.append(step.token_id)
    return BudgetOutput(tokens, forced, checker.text, checker.finish_reason, checker.stop_reason,
                        forcer.thinking_tokens, forcer.waits, forcer.forced_end)
