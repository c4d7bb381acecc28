"""Token masks against the brute-force check of every token (oracles.py): exhaustive on the tiny
vocabulary (every token of 1-3 bytes over {a, b, C3, A9}), every one- and two-byte UTF-8 walk on
the byte vocabulary, sampled states and tokens on the 131,072-token Tekken vocabulary; EOS, special
and empty tokens; the matcher's life cycle (advance, finish, reset)."""
from __future__ import annotations

import random

import pytest
from hypothesis import example, given, settings, strategies as st

from spec_tests.structured import oracles as O
from spec_tests.structured.strategies import regex_trees
from spec_tests.structured.vocab import TEKKEN_MISSING, byte_vocab, tekken, tiny_vocab
from spec_tests.structured.walk import check_masks_bfs, mask_list


@example(tree=("cat", [("lit", "a"), ("lit", "b"), ("lit", "a")])).via(
    "mutant:first_byte_only mutant:eos_always_allowed")
@example(tree=("rep", ("dot",), 1, 2)).via("boundary: half a character: é is C3 A9 and tokens split it")
@example(tree=("rep", ("set", frozenset("b"), True), 0, None)).via("boundary: [^b]* reads a, é and any tail")
@given(tree=regex_trees("ab"))
def test_mask_equals_brute_force_tiny_vocab(impl, tree):
    """On the tiny vocabulary (84 tokens over {a, b, 0xC3, 0xA9} plus a special, an empty token
    and EOS), at every text reachable in at most 3 tokens (at most 40 texts, breadth first): the
    mask is exactly the brute-force check of every token (non-empty, not special, the text plus
    its bytes a prefix of the language; EOS iff the text is in the language)."""
    vocab, eos = tiny_vocab()
    check_masks_bfs(impl, tree, vocab, eos)


@pytest.mark.parametrize("tree", [("rep", ("dot",), 0, None), ("rep", ("set", frozenset("a"), True), 0, 3)],
                         ids=["dot-star", "negated-class"])
def test_utf8_walks_exhaustive(impl, tree):
    """Byte vocabulary, ``.*`` and ``[^a]{0,3}``: the mask after every single byte and after every
    two-byte start of the lead bytes with restricted second bytes (E0, ED, F0, F4: no overlong
    form, no surrogate, nothing above U+10FFFF) equals CPython's UTF-8 decoder's verdict."""
    vocab, eos = byte_vocab()
    pattern = O.render(tree)
    matcher = impl.get("TokenMatcher")(impl.get("compile_regex")(pattern), list(vocab), eos)
    prefixes = [bytes([b]) for b in range(256)] + [bytes([lead, b]) for lead in (0xE0, 0xED, 0xF0, 0xF4)
                                                   for b in range(0x80, 0xC0)]
    for prefix in prefixes:
        if not O.is_prefix(tree, prefix):
            continue
        matcher.reset()
        for b in prefix:
            matcher.advance(b)
        got = mask_list(matcher)
        want = O.brute_force_mask(tree, prefix, vocab, eos)
        wrong = [t for t in range(len(vocab)) if got[t] != want[t]]
        assert not wrong, (f"pattern {pattern!r} after the bytes {prefix!r}: byte(s) "
                           f"{[hex(t) for t in wrong[:6]]} are {'allowed' if got[wrong[0]] else 'refused'} "
                           f"by the mask; UTF-8 says {'no' if got[wrong[0]] else 'yes'}")


def test_eos_special_and_life_cycle(impl):
    """EOS is allowed iff the text so far is in the language; special (None) and empty tokens
    never are; after EOS the matcher is finished, its mask is all False and advance raises
    ValueError; reset() goes back to the empty text."""
    vocab, eos = tiny_vocab()
    ids = {tok: i for i, tok in enumerate(vocab) if tok}
    special, empty = vocab.index(None), vocab.index(b"")
    m = impl.get("TokenMatcher")(impl.get("compile_regex")("a+b?"), list(vocab), eos)
    mask = mask_list(m)
    assert not mask[eos] and not m.is_accepted(), "at the empty text 'a+b?' is not matched: EOS must be refused"
    assert not mask[special] and not mask[empty], "a special (None) or empty (b'') token is never allowed"
    assert mask[ids[b"aab"]] and not mask[ids[b"ba"]] and not mask[ids[b"abb"]]
    m.advance(ids[b"aa"])
    mask = mask_list(m)
    assert mask[eos] and m.is_accepted(), "after 'aa' the text is matched: EOS must be allowed"
    assert mask[ids[b"ab"]] and not mask[ids[b"bb"]]
    m.advance(ids[b"b"])
    assert m.is_accepted() and not m.is_finished()
    mask = mask_list(m)
    assert mask[eos] and sum(mask) == 1, f"after 'aab' only EOS may follow; allowed: {[vocab[t] for t, a in enumerate(mask) if a]}"
    m.advance(eos)
    assert m.is_finished() and m.is_accepted(), "EOS finishes the text; the text stays in the language"
    assert not any(mask_list(m)), "after EOS nothing is allowed"
    with pytest.raises(ValueError, match="token_id"):
        m.advance(ids[b"a"])
    with pytest.raises(ValueError, match="token_id"):
        m.advance(eos)
    m.reset()
    assert not m.is_finished() and not m.is_accepted() and mask_list(m)[ids[b"a"]]


def test_refused_token_leaves_state(impl):
    """A disallowed token raises ValueError naming token_id and leaves the state (mask, accepted)
    unchanged, as does an out-of-range or non-int one."""
    vocab, eos = tiny_vocab()
    ids = {tok: i for i, tok in enumerate(vocab) if tok}
    m = impl.get("TokenMatcher")(impl.get("compile_regex")("ab*"), list(vocab), eos)
    m.advance(ids[b"ab"])
    before = (mask_list(m), m.is_accepted(), m.is_finished())
    for bad, error in ((ids[b"a"], ValueError), (vocab.index(None), ValueError), (vocab.index(b""), ValueError),
                       (len(vocab), ValueError), (-1, ValueError), (1.0, TypeError), (True, TypeError)):
        with pytest.raises(error, match="token_id"):
            m.advance(bad)
        assert (mask_list(m), m.is_accepted(), m.is_finished()) == before, f"advance({bad!r}) was refused but changed the state"
    m2 = impl.get("TokenMatcher")(impl.get("compile_regex")("ab*"), list(vocab), eos)
    with pytest.raises(ValueError, match="token_id"):
        m2.advance(eos)
    assert not m2.is_finished() and mask_list(m2)[ids[b"a"]]


# --- the 131,072-token vocabulary -------------------------------------------------------------
BIG_GRAMMARS = {
    "email": ("cat", [("rep", ("set", frozenset("abcdefghijklmnopqrstuvwxyz"), False), 1, None), ("lit", "@"),
                      ("rep", ("set", frozenset("abcdefghijklmnopqrstuvwxyz"), False), 1, None), ("lit", "."),
                      ("alt", [O.lits("com"), O.lits("org")])]),
    "any-but-quote": ("cat", [("lit", '"'), ("rep", ("set", frozenset('"\n'), True), 0, None), ("lit", '"')]),
    "date": ("cat", [("rep", ("set", O.DIGIT, False), 4, 4), ("lit", "-"), ("rep", ("set", O.DIGIT, False), 2, 2),
                     ("lit", "-"), ("rep", ("set", O.DIGIT, False), 2, 2)]),
    "json-object": O.schema_tree({"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "number"},
                                                                   "ok": {"type": "boolean"}}, "required": ["name"]}),
}


@settings(max_examples=1, deadline=None)
@example(name="json-object", seed=1).via("boundary: a schema's automaton over the real vocabulary")
@given(name=st.sampled_from(sorted(BIG_GRAMMARS)), seed=st.integers(0, 2**16))
def test_mask_on_the_tekken_vocab_sampled(impl, name, seed):
    """The 131,072-token Tekken vocabulary (mistral-common's tekken_240911.json): along a random
    path of 4 tokens drawn from the implementation's own masks, every token the mask allows passes the brute-force check (all of them when
    at most 300 are allowed, else 300 drawn) and 400 drawn tokens get the oracle's verdict."""
    big = tekken()
    if big is None:
        pytest.skip(TEKKEN_MISSING)
    vocab, eos = big
    tree = BIG_GRAMMARS[name]
    m = impl.get("TokenMatcher")(impl.get("compile_regex")(O.render(tree)), vocab, eos)
    rng = random.Random(seed)
    text = b""
    for step in range(4):
        got = m.allowed_mask()
        allowed = got.nonzero().flatten().tolist()
        sample = list(allowed) if len(allowed) <= 300 else rng.sample(allowed, 300)
        sample += rng.sample(range(len(vocab)), 400) + [eos]
        want = O.brute_force_mask(tree, text, vocab, eos, ids=sample)
        wrong = [t for t in sample if bool(got[t]) != want[t]]
        assert not wrong, (f"{name} after {text!r}: token(s) {[(t, vocab[t]) for t in wrong[:5]]} "
                           f"{'allowed' if got[wrong[0]] else 'refused'} by the mask, the brute-force check says otherwise")
        choices = [t for t in allowed if t != eos]
        if not choices:
            break
        t = rng.choice(choices)
        m.advance(t)
        text += vocab[t]
