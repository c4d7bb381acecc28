"""Oracles of `budget` written from the contract's words (never from the reference's code): the
forcer as a rewriting of the model's proposals, a naive stop check for ASCII vocabularies, the
generation loop built from the two, and the law as predicates over a finished run."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Oracle:
    """The forcer. ``pending`` holds the forced tokens still to come, each tagged with whether
    it is a thinking token (a Wait's) or not (the answer prefix)."""
    end: int
    ceiling: int | None = None
    floor: int = 0
    wait: tuple = ()
    max_waits: int | None = None
    prefix: tuple = ()
    thinking: bool = True
    count: int = 0
    waits: int = 0
    forced_end: bool = False
    steps: int = 0
    pending: list = field(default_factory=list)

    @classmethod
    def of(cls, b) -> "Oracle":
        return cls(b.end_think_id, b.max_thinking_tokens, b.min_thinking_tokens, tuple(b.wait_ids), b.max_waits,
                   tuple(b.answer_prefix_ids))

    def next_forced(self):
        if self.pending:
            return self.pending[0][0]
        if self.thinking and self.ceiling is not None and self.count >= self.ceiling:
            return self.end
        return None

    def may_wait(self) -> bool:
        return self.count < self.floor and (self.max_waits is None or self.waits < self.max_waits)

    def step(self, proposal: int) -> tuple[int, bool]:
        self.steps += 1
        if self.pending:
            token, thinking_token = self.pending.pop(0)
            self.count += thinking_token
            return token, True
        if self.next_forced() is not None:                 # the ceiling: end the thinking now
            self.thinking, self.forced_end = False, True
            self.pending = [(t, False) for t in self.prefix]
            return self.end, True
        if self.thinking and proposal == self.end:
            if self.may_wait():
                self.waits += 1
                self.pending = [(t, True) for t in self.wait]
                token, _ = self.pending.pop(0)
                self.count += 1
                return token, True
            self.thinking = False
            return proposal, False
        self.count += self.thinking
        return proposal, False

    def observe(self) -> tuple:
        return ("thinking" if self.thinking else "answer", self.count, self.waits, self.forced_end, self.steps,
                self.next_forced())

    def state(self) -> tuple:
        return (self.thinking, self.count, self.waits, self.forced_end, tuple(self.pending))


def observe(forcer) -> tuple:
    """An implementation's forcer's observables, in Oracle.observe's order."""
    return (forcer.phase, forcer.thinking_tokens, forcer.waits, forcer.forced_end, forcer.num_tokens,
            forcer.next_forced)


OBSERVABLES = "(phase, thinking_tokens, waits, forced_end, num_tokens, next_forced)"


# --- stopping, naively (ASCII vocabularies, min_tokens 0, stop strings excluded from the text) ------
def run_oracle(script, budget, vocab: dict, max_tokens: int, eos=None, stop_ids=(), stop=()) -> dict:
    """The generation loop: the model proposes ``script[len(generated)]`` (the last entry once past
    the script), the forcer appends, stopping ends it. Returns the fields of BudgetOutput."""
    forcer = Oracle.of(budget)
    tokens, forced, text = [], [], ""
    finish = reason = None
    while finish is None:
        proposal = script[min(len(tokens), len(script) - 1)]
        token, was_forced = forcer.step(proposal)
        tokens.append(token)
        forced.append(was_forced)
        if token == eos:
            finish, reason = "stop", None
            break
        if token in stop_ids:
            finish, reason = "stop", token
            break
        before = len(text)
        text += vocab[token].decode()
        hits = [(text.find(s, max(0, before - len(s) + 1)), s) for s in stop]
        hits = [(i + len(s), -len(s), i, s) for i, s in hits if i != -1]
        if hits:
            _, _, start, s = min(hits)
            text, finish, reason = text[:start], "stop", s
            break
        if len(tokens) == max_tokens:
            finish = "length"
    return dict(tokens=tokens, forced=forced, text=text, finish_reason=finish, stop_reason=reason,
                thinking_tokens=forcer.count, waits=forcer.waits, forced_end=forcer.forced_end)


# --- the law, as predicates over a run -----------------------------------------------------------
def law_problems(budget, proposals, appended, forced) -> list[str]:
    """What the law says of a run of the forcer, checked from the outside: the thinking tokens
    (those before the first end of thinking) never exceed the ceiling; a Wait is appended only
    where the model proposed the end below the floor, whole, at most max_waits times; the ceiling
    is followed by end_think and the answer prefix; a proposal appended as it is is unforced."""
    b = budget
    out = []
    end = appended.index(b.end_think_id) if b.end_think_id in appended else None
    thinking = appended if end is None else appended[:end]
    if b.max_thinking_tokens is not None and len(thinking) > b.max_thinking_tokens:
        out.append(f"{len(thinking)} thinking tokens, above max_thinking_tokens = {b.max_thinking_tokens}")
    if end is not None and forced[end]:
        if len(thinking) != b.max_thinking_tokens:
            out.append(f"a forced end of thinking after {len(thinking)} thinking tokens, not at the ceiling")
        tail = appended[end + 1:end + 1 + len(b.answer_prefix_ids)]
        if tail != list(b.answer_prefix_ids)[:len(tail)] or not all(forced[end + 1:end + 1 + len(tail)]):
            out.append(f"after the forced end: {tail}, expected the answer prefix {list(b.answer_prefix_ids)}")
    i, waits = 0, 0
    while i < len(thinking):
        if forced[i]:
            w = len(b.wait_ids)
            if appended[i:i + w] != list(b.wait_ids)[:len(appended[i:i + w])] or proposals[i] != b.end_think_id:
                out.append(f"thinking token {i}: forced {appended[i]} for the proposal {proposals[i]}, "
                           "not a Wait for a proposed end")
                break
            if i >= b.min_thinking_tokens:
                out.append(f"a Wait at {i} thinking tokens, not below min_thinking_tokens = {b.min_thinking_tokens}")
            waits += 1
            i += w
        else:
            if appended[i] != proposals[i]:
                out.append(f"token {i}: {appended[i]} appended unforced for the proposal {proposals[i]}")
            i += 1
    if b.max_waits is not None and waits > b.max_waits:
        out.append(f"{waits} Waits, above max_waits = {b.max_waits}")
    return out
