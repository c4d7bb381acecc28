"""Internals of the bundled optimized structured-output matcher (not concept-parametrized, never run
against a submission): the masks it precomputes per automaton state, the packed bitmask it writes
for engines (``fill_next_token_bitmask``, not in the contract) and ``Grammar.precompute`` equal the
reference matcher's ``allowed_mask()`` at every step of a path, on the tiny, byte and (when
mistral-common is installed) Tekken vocabularies; the caches shared between matchers of one grammar
give the same masks."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import optimized.structured as opt
import reference.structured as ref
from spec_tests.structured.vocab import byte_vocab, tekken_slice, tiny_vocab

GRAMMARS = [
    ("regex", r"[a-c]{1,3}(x|yz)?"),
    ("regex", r"\d+(\.\d{1,2})?"),
    ("regex", r"[^a]{0,3}\w"),
    ("schema", {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "array",
                "items": {"enum": ["x", None, True]}}}, "required": ["a"]}),
]


def _unpack(bits: np.ndarray, n: int) -> list[bool]:
    words = bits.astype(np.int64) & 0xFFFFFFFF
    return [bool((int(words[i // 32]) >> (i % 32)) & 1) for i in range(n)]


def _compile(module, kind, source):
    return module.compile_regex(source) if kind == "regex" else module.compile_json_schema(source)


def _walk(kind, source, vocab, eos, choices, *, precompute: bool, grammar=None):
    """Advance the reference and the optimized matcher along the same path (the i-th step takes
    the allowed token at ``choices[i]`` modulo the allowed count); at each step compare the masks,
    the packed bitmask and ``allows``."""
    grammar = _compile(opt, kind, source) if grammar is None else grammar
    if precompute:
        assert grammar.precompute(list(vocab), eos) == grammar.num_states
    mine = opt.TokenMatcher(grammar, list(vocab), eos)
    theirs = ref.TokenMatcher(_compile(ref, kind, source), list(vocab), eos)
    bits = np.zeros((len(vocab) + 31) // 32, dtype=np.int32)
    for step, c in enumerate(choices + [None]):
        want = theirs.allowed_mask()
        got = mine.allowed_mask()
        assert torch.equal(got, want), f"{source!r} step {step}: allowed_mask differs at {(got != want).nonzero()[:5].tolist()}"
        mine.fill_next_token_bitmask(bits)
        assert _unpack(bits, len(vocab)) == want.tolist(), f"{source!r} step {step}: the packed bitmask differs"
        allowed = want.nonzero().flatten().tolist()
        probe = allowed[:3] + [t for t in range(len(vocab)) if not want[t]][:3]
        assert [mine.allows(t) for t in probe] == [bool(want[t]) for t in probe]
        if c is None or not allowed:
            break
        t = allowed[c % len(allowed)]
        mine.advance(t)
        theirs.advance(t)
        assert mine.is_finished() == theirs.is_finished() and mine.is_accepted() == theirs.is_accepted()
    return mine


@settings(max_examples=10, deadline=None)
@given(case=st.sampled_from(GRAMMARS), choices=st.lists(st.integers(0, 10**6), max_size=8),
       vocab_kind=st.sampled_from(["tiny", "byte"]), precompute=st.booleans())
def test_masks_bitmask_and_precompute_equal_the_reference(case, choices, vocab_kind, precompute):
    vocab, eos = tiny_vocab() if vocab_kind == "tiny" else byte_vocab()
    _walk(*case, vocab, eos, choices, precompute=precompute)


def test_on_a_real_vocabulary_and_across_matchers():
    """The first 16,384 ids of Tekken: a path through the schema, then a second matcher of the same
    grammar (its masks from the first one's cache) along another path."""
    small = tekken_slice()
    if small is None:
        pytest.skip("mistral-common is not installed (the test extras): no Tekken vocabulary")
    vocab, eos = small
    kind, source = GRAMMARS[3]
    grammar = _compile(opt, kind, source)
    _walk(kind, source, vocab, eos, [5, 17, 3, 0, 9, 2], precompute=False, grammar=grammar)
    _walk(kind, source, vocab, eos, [1, 1, 2, 3, 5, 8], precompute=False, grammar=grammar)
