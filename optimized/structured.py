"""Structured output, optimized: the same contract as reference/structured.py (same names and
signatures), with the token masks precomputed per automaton state ("plan once, run many").

What changes against the reference (which walks every token's bytes in Python at every step):

* The grammar is the reference's byte DFA plus a dense table (:class:`Grammar`, a
  :class:`reference.structured.ByteDFA`): ``table[state, byte] -> next state`` (int32, a dead
  state last, absorbing), the accepting states as a bool array, and the BYTE CLASSES: bytes whose
  columns of the table are equal behave alike in every state, so the table shrinks to
  ``class_table[state, class]`` (a JSON schema has ~40 classes, a simple regex ~7).
* A vocabulary is laid out once (:class:`TokenTable`, cached by its tokens' hash): the valid tokens
  (non-empty, not special, not EOS) longest first, byte j of each as a row.
* Per grammar and vocabulary (:class:`_Layout`): every token rewritten as its sequence of byte
  classes, and each DISTINCT sequence kept once (found by a 64-bit hash, confirmed exactly): tokens
  with the same class sequence are allowed together. Tekken's 130,072 tokens become ~860 sequences
  for an e-mail regex, ~70,000 for a JSON schema.
* The mask of a state is computed once, vectorised: the states after every sequence's first class
  (one gather), then only the sequences still alive and longer than the current depth move on (a
  gather per depth over a shrinking set); a sequence is allowed iff it survives its last class,
  and each token takes its sequence's verdict. The result is cached on the grammar per vocabulary
  (as bools and packed 32 a word), so every later visit of the state, by this matcher or a later
  one for the same grammar and vocabulary, costs a look-up and a copy.
  ``Grammar.precompute(vocab, eos)`` fills the cache for every state ahead of time (the compile
  cost of 07.09: paid once per distinct grammar).
* ``advance`` walks the token's bytes through the DFA (at most the token's length);
  ``fill_next_token_bitmask`` (not in the contract) writes the packed mask into a caller's int32
  buffer, the form the third-party engines fill (bench/structured_masks.py).

The sampling functions are the reference's (already vectorised).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

import reference.structured as ref
from reference._checks import check_int, is_int
from reference.structured import (  # noqa: F401  (the contract's names this module keeps as they are)
    constrained_probs,
    constrained_sample,
    generate_constrained,
    json_schema_to_regex,
    mask_logits,
)

__all__ = list(ref.__all__)
__optional__ = list(ref.__optional__)


class Grammar(ref.ByteDFA):
    """The reference's byte DFA plus a dense transition table, its byte classes and the
    per-vocabulary mask caches."""

    def __init__(self, dfa: ref.ByteDFA):
        super().__init__(dfa.transitions, dfa.accepting, dfa.start)
        n = dfa.num_states
        self.dead = n
        table = np.full((n + 1, 256), n, dtype=np.int32)
        for s, row in enumerate(dfa.transitions):
            if row:
                table[s, list(row.keys())] = list(row.values())
        # byte classes: bytes whose columns are equal behave alike in every state
        _, first, self.byte_class = np.unique(table.T, axis=0, return_index=True, return_inverse=True)
        self.byte_class = self.byte_class.reshape(-1).astype(np.int32)
        self.class_table = np.ascontiguousarray(table[:, first]).reshape(-1)   # (n + 1) x classes, flat
        self.classes = len(first)
        self.accepting_array = np.zeros(n + 1, dtype=bool)
        self.accepting_array[list(dfa.accepting)] = True
        self._layouts: dict[int, tuple[TokenTable, _Layout]] = {}

    def layout(self, table: "TokenTable") -> "_Layout":
        """This grammar's view of a vocabulary: its distinct class sequences and the state -> mask
        cache (kept while that vocabulary layout lives)."""
        got = self._layouts.get(id(table))
        if got is None or got[0] is not table:
            got = (table, _Layout(self, table))
            self._layouts[id(table)] = got
        return got[1]

    def state_mask(self, table: "TokenTable", state: int) -> np.ndarray:
        return self.layout(table).mask(state)

    def precompute(self, vocab: Sequence[bytes | None], eos_token_id: int) -> int:
        """Compute and cache the mask of every state for this vocabulary; returns the number of states."""
        table = TokenTable.of(vocab, eos_token_id)
        for s in range(self.num_states):
            self.state_mask(table, s)
        return self.num_states


class TokenTable:
    """A vocabulary laid out for vectorised walks (module doc), shared by every grammar: the valid
    tokens (non-empty, not special, not EOS) longest first, byte j of each as a row, and how many
    are longer than j bytes (tokens longer than j are a prefix of the order)."""

    _cache: dict[tuple, "TokenTable"] = {}

    def __init__(self, vocab: list, eos: int):
        self.vocab, self.eos, self.size = vocab, eos, len(vocab)
        valid = [i for i, tok in enumerate(vocab) if tok and i != eos]
        valid.sort(key=lambda i: -len(vocab[i]))
        self.ids = np.asarray(valid, dtype=np.int64)
        self.lengths = np.asarray([len(vocab[i]) for i in valid], dtype=np.int64)
        self.longest = int(self.lengths[0]) if valid else 0
        self.longer = np.asarray([int((self.lengths > j).sum()) for j in range(self.longest + 1)], dtype=np.int64)
        flat = np.frombuffer(b"".join(vocab[i] for i in valid), dtype=np.uint8)
        starts = np.concatenate([[0], np.cumsum(self.lengths)[:-1]]).astype(np.int64)
        self.rows = [flat[starts[:self.longer[j]] + j] for j in range(self.longest)]   # row j: byte j

    @classmethod
    def of(cls, vocab, eos: int) -> "TokenTable":
        """The layout of ``vocab``, reused for any sequence with the same tokens (keyed by their hash,
        confirmed token by token)."""
        key = (len(vocab), eos, hash(tuple(vocab)))
        got = cls._cache.get(key)
        if got is None or not _same(got.vocab, vocab):
            if len(cls._cache) >= 8:
                cls._cache.clear()
            got = cls._cache[key] = cls(list(vocab), eos)
        return got


class _Layout:
    """The valid tokens of a vocabulary as sequences of the grammar's byte classes, each distinct
    sequence once (tokens with the same class sequence are allowed together), longest first; and
    the cache of computed masks."""

    def __init__(self, grammar: Grammar, table: TokenTable):
        self.grammar, self.table = grammar, table
        self.masks: dict[int, np.ndarray] = {}
        self.packed: dict[int, np.ndarray] = {}
        n = table.ids.size
        self.unique = 0
        if n == 0:
            return
        lut = grammar.byte_class.astype(np.uint16)
        classes = [lut[row] for row in table.rows]                 # class j of each token (ragged)
        # distinct sequences by a 64-bit polynomial hash of (classes, length), confirmed exactly
        h = np.zeros(n, dtype=np.uint64)
        with np.errstate(over="ignore"):
            for j, c in enumerate(classes):
                h[:c.size] = h[:c.size] * np.uint64(1_000_003) + (c.astype(np.uint64) + np.uint64(1))
            h = h * np.uint64(1_000_003) + table.lengths.astype(np.uint64)
        _, rep, inverse = np.unique(h, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        same = table.lengths[rep[inverse]] == table.lengths
        for c in classes:
            same[:c.size] &= c[rep[inverse[:c.size]]] == c
        if not same.all():                                          # a collision: every token alone
            rep, inverse = np.arange(n), np.arange(n)
        order = np.argsort(rep, kind="stable")                      # rep ascending = longest first
        rep = rep[order]
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        self.where = rank[inverse]                                  # token -> its sequence's position
        lengths = table.lengths[rep]
        self.longer = np.asarray([int((lengths > j).sum()) for j in range(table.longest + 1)], dtype=np.int64)
        self.columns = [c[rep[:self.longer[j]]].astype(np.int64) for j, c in enumerate(classes)]
        self.unique = rep.size

    def mask(self, state: int) -> np.ndarray:
        got = self.masks.get(state)
        if got is None:
            got = self.masks[state] = self._compute(state)
        return got

    def bits(self, state: int) -> np.ndarray:
        """The mask packed 32 tokens a word (int32; bit i of word w is token 32 w + i), cached."""
        got = self.packed.get(state)
        if got is None:
            words = (self.table.size + 31) // 32
            padded = np.zeros(words * 32, dtype=bool)
            padded[:self.table.size] = self.mask(state)
            got = self.packed[state] = np.packbits(padded, bitorder="little").view(np.int32)
        return got

    def _compute(self, state: int) -> np.ndarray:
        table, grammar = self.table, self.grammar
        out = np.zeros(table.size, dtype=bool)
        out[table.eos] = bool(grammar.accepting_array[state])
        if self.unique == 0:
            return out
        step, dead, width = grammar.class_table, grammar.dead, grammar.classes
        cur = step[state * width + self.columns[0]]             # after each sequence's first class
        alive = np.flatnonzero(cur != dead)
        states = cur[alive]
        done = []
        depth = 1
        while alive.size and depth < table.longest:
            k = int(np.searchsorted(alive, self.longer[depth]))   # alive[:k] are longer than depth
            done.append(alive[k:])                           # ended alive: allowed
            alive, states = alive[:k], states[:k]
            nxt = step[states * width + self.columns[depth][alive]]
            keep = nxt != dead
            alive, states = alive[keep], nxt[keep]
            depth += 1
        done.append(alive)
        allowed = np.zeros(self.unique, dtype=bool)
        allowed[np.concatenate(done)] = True
        out[table.ids] = allowed[self.where]
        return out


def _same(a, b) -> bool:
    if a is b:
        return True
    return len(a) == len(b) and all(x is y or x == y for x, y in zip(a, b))


def compile_regex(pattern: str) -> Grammar:
    """As :func:`reference.structured.compile_regex`, returning a :class:`Grammar` (the same DFA
    with its dense table)."""
    return Grammar(ref.compile_regex(pattern))


def compile_json_schema(schema) -> Grammar:
    """``compile_regex(json_schema_to_regex(schema))``."""
    return compile_regex(json_schema_to_regex(schema))


class TokenMatcher(ref.TokenMatcher):
    """As :class:`reference.structured.TokenMatcher`; masks come from the grammar's per-state cache."""

    def __init__(self, grammar: Grammar, vocab: Sequence[bytes | None], eos_token_id: int):
        if isinstance(grammar, ref.ByteDFA) and not isinstance(grammar, Grammar):
            grammar = Grammar(grammar)
        super().__init__(grammar, vocab, eos_token_id)
        self.layout = self.grammar.layout(TokenTable.of(vocab, self.eos_token_id))

    def allowed_mask(self) -> torch.Tensor:
        if self.finished or self.state is None:
            return torch.zeros(len(self.vocab), dtype=torch.bool)
        # a numpy copy: torch's own clone spreads a 128 KiB copy over its threads, which costs
        # milliseconds on a loaded machine
        return torch.from_numpy(self.layout.mask(self.state).copy())

    def fill_next_token_bitmask(self, bitmask: np.ndarray) -> None:
        """Not in the contract: write the mask packed into ``bitmask`` (int32, ceil(vocab / 32)
        words, bit i of word w = token 32 w + i), the form xgrammar, llguidance and outlines-core
        fill (bench/structured_masks.py times all four this way)."""
        if self.finished or self.state is None:
            bitmask[:] = 0
        else:
            np.copyto(bitmask, self.layout.bits(self.state))

    def allows(self, token_id: int) -> bool:
        if self.finished or self.state is None:
            return False
        return bool(self.layout.mask(self.state)[token_id])


_ = (check_int, is_int)  # the reference's checks run in the inherited constructor and advance
