"""Third-party oracles: xgrammar, outlines-core and llguidance compute the same masks over the
same real vocabulary (Tekken, mistral-common's tokenizer) wherever their grammar semantics agree
with the contract; where they differ, the difference is exactly the documented one
(docs/structured.md, "Where the engines differ"), and ``test_documented_differences`` pins that
each documented difference is still there (when an engine changes, the page must follow).

Along a seeded random path (tokens allowed by both), at every step:
- agree: the engine's mask == the implementation's mask (compile_regex / compile_json_schema);
- a variant: the engine's mask == the implementation's mask of the variant grammar written in
  the contract's regex subset (compile_regex of it): xgrammar's integers exclude ``-0``,
  outlines-core's numbers need an exponent sign, llguidance's strings exclude DEL (U+007F) and the
  ``\\/`` escape;
- llguidance additionally may refuse, where the grammar forces the next bytes, tokens that are
  proper prefixes of the forced bytes (it keeps the forced text's tokenization canonical): its
  mask is the variant's minus some such tokens, never anything else.
Each engine missing here is skipped with its reason; the default run uses the first 16,384 ids of
Tekken, the slow run all 131,072."""
from __future__ import annotations

import random
import zlib

import pytest
import torch

from spec_tests.structured import oracles as O
from spec_tests.structured.engines import engine_matcher, missing
from spec_tests.structured.test_masks import BIG_GRAMMARS
from spec_tests.structured.vocab import TEKKEN_MISSING, tekken, tekken_slice

ENGINES = ["xgrammar", "outlines-core", "llguidance"]
OBJECT = {"type": "object", "properties": {
    "id": {"type": "integer"}, "name": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}},
    "score": {"type": "number"}, "ok": {"type": "boolean"}, "note": {"type": "null"}}, "required": ["id", "name"]}
NO_STRINGS = {"type": "object", "properties": {
    "n": {"type": "integer"}, "x": {"type": "number"}, "flags": {"type": "array", "items": {"type": "boolean"}},
    "color": {"enum": ["red", "green", None]}}, "required": ["n"]}
ARRAY = {"type": "array", "items": {"type": "integer"}}

XGR_INTEGER = O.json_integer(minus_zero=False)
OUTLINES_NUMBER = O.json_number(exponent_sign_required=True)
LLG_STRING = O.json_string(forbid="\x7f", escapes='"\\bfnrt')

# (id, regex tree or schema, {engine: None (agree) | variant tree | "differs" (not compared: see docs)})
CASES = [
    ("email", BIG_GRAMMARS["email"], {}),
    ("date", BIG_GRAMMARS["date"], {}),
    ("quoted", BIG_GRAMMARS["any-but-quote"], {}),
    ("object", OBJECT, {"xgrammar": O.schema_tree(OBJECT, integer=XGR_INTEGER),
                        "outlines-core": "differs",
                        "llguidance": O.schema_tree(OBJECT, string=LLG_STRING)}),
    ("object-no-strings", NO_STRINGS, {"xgrammar": O.schema_tree(NO_STRINGS, integer=XGR_INTEGER),
                                       "outlines-core": O.schema_tree(NO_STRINGS, number=OUTLINES_NUMBER)}),
    ("array", ARRAY, {"xgrammar": O.schema_tree(ARRAY, integer=XGR_INTEGER)}),
]


def _impl_matcher(impl, source, variant, vocab, eos):
    if variant is not None:
        grammar = impl.get("compile_regex")(O.render(variant))
    elif isinstance(source, dict):
        grammar = impl.get("compile_json_schema")(source)
    else:
        grammar = impl.get("compile_regex")(O.render(source))
    return impl.get("TokenMatcher")(grammar, vocab, eos)


def _compare(impl, engine, case, vocab, eos, steps: int, seed: int):
    cid, source, variants = case
    variant = variants.get(engine)
    if variant == "differs":
        pytest.skip(f"{engine} differs from the contract on {cid} in a way the subset cannot state (docs/structured.md)")
    if (reason := missing(engine)) is not None:
        pytest.skip(reason)
    theirs = engine_matcher(engine, vocab, eos, **({"schema": source} if isinstance(source, dict)
                                                   else {"regex": O.render(source)}))
    ours = _impl_matcher(impl, source, variant, vocab, eos)
    rng = random.Random(seed)
    text = b""
    for step in range(steps):
        a = ours.allowed_mask()
        b = theirs.mask()
        if engine == "llguidance":
            forced = theirs.forced()
            dropped = (a & ~b).nonzero().flatten().tolist()
            odd = [t for t in dropped if not (vocab[t] and forced.startswith(vocab[t]) and vocab[t] != forced)]
            assert not odd and not bool((b & ~a).any()), (
                f"{cid}, llguidance after {text!r}: its mask differs beyond the forced-prefix rule: it refuses "
                f"{[vocab[t] for t in odd[:5]]} (forced bytes {forced!r}) and allows "
                f"{[vocab[t] for t in (b & ~a).nonzero().flatten().tolist()[:5]]}")
        else:
            wrong = (a != b).nonzero().flatten().tolist()
            assert not wrong, (
                f"{cid}, {engine} after {text!r} ({'variant grammar' if variant is not None else 'same grammar'}): "
                f"{len(wrong)} tokens differ, e.g. "
                + ", ".join(f"{vocab[t] if vocab[t] is not None else t!r}: ours {bool(a[t])}, {engine} {bool(b[t])}"
                            for t in wrong[:5]))
        both = (a & b).nonzero().flatten().tolist()
        choices = [t for t in both if t != eos]
        if not choices:
            break
        t = rng.choice(choices)
        ours.advance(t)
        theirs.advance(t)
        text += vocab[t]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("engine", ENGINES)
def test_masks_match_the_engines(impl, engine, case):
    """The first 16,384 ids of Tekken, a seeded path of 6 tokens (module doc)."""
    small = tekken_slice()
    if small is None:
        pytest.skip(TEKKEN_MISSING)
    _compare(impl, engine, case, *small, steps=6, seed=zlib.crc32(f"{engine}/{case[0]}".encode()) % 1000)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("engine", ENGINES)
def test_masks_match_the_engines_full_vocab(impl, engine, case):
    """All 131,072 ids of Tekken, a seeded path of 8 tokens."""
    big = tekken()
    if big is None:
        pytest.skip(TEKKEN_MISSING)
    _compare(impl, engine, case, *big, steps=8, seed=7)


TINY = (b"a", b"b", b"x", b"xb", b"\n", b"\xed", b"\xa0", b"-", b"0", b"-0", b"5", b"5e5", b"5e+5", b"e", b"E", b".", b'"', b"\\", b"/", b"\x7f", b"s", b"se",
        b"fal")


@pytest.mark.parametrize("engine,grammar,prefix,token,contract,theirs", [
    ("xgrammar", {"schema": {"type": "integer"}}, [b"-"], b"0", True, False),
    ("xgrammar", {"regex": r"\s"}, [], None, None, None),
    ("xgrammar", {"regex": "a."}, [b"a"], b"\n", False, True),
    ("xgrammar", {"regex": "."}, [b"\xed"], b"\xa0", False, True),
    ("outlines-core", {"regex": "a(xb)?"}, [b"a"], b"x", True, False),
    ("outlines-core", {"regex": "a(xb)?"}, [b"a"], b"xb", True, True),
    ("outlines-core", {"regex": "(|a)"}, [], b"a", True, False),
    ("outlines-core", {"schema": {"type": "number"}}, [], b"5e5", True, False),
    ("outlines-core", {"schema": {"type": "number"}}, [], b"5e+5", True, True),
    ("llguidance", {"schema": {"type": "string"}}, [b'"'], b"\x7f", True, False),
    ("llguidance", {"schema": {"type": "string"}}, [b'"', b"\\"], b"/", True, False),
    ("llguidance", {"schema": {"type": "boolean"}}, [b"fal"], b"s", True, False),
], ids=["xgrammar-minus-zero", "xgrammar-unicode-space", "xgrammar-dot-newline", "xgrammar-surrogate", "outlines-final-state", "outlines-two-bytes", "outlines-alternation-priority",
        "outlines-exponent-sign", "outlines-exponent-plus", "llguidance-del", "llguidance-slash-escape", "llguidance-forced-prefix"])
def test_documented_differences(impl, engine, grammar, prefix, token, contract, theirs):
    """Each difference docs/structured.md states is still there, on a 25-token vocabulary (EOS
    last): the implementation allows the token after the prefix (the contract), the engine does
    not (or, for outlines-core's two-byte token, does); for xgrammar's ``.`` the contract refuses a
    newline and the second byte of a UTF-8-encoded surrogate (ED A0), xgrammar allows both. xgrammar's ``\\s``: it allows U+00A0 (a
    no-break space), which the contract's ASCII ``\\s`` does not."""
    if (reason := missing(engine)) is not None:
        pytest.skip(reason)
    vocab = TINY + (b"\xc2\xa0", b" ", None)
    eos = len(vocab) - 1
    ids = {t: i for i, t in enumerate(vocab) if t}
    m = engine_matcher(engine, vocab, eos, **grammar)
    source = grammar.get("regex")
    ours = impl.get("TokenMatcher")(impl.get("compile_regex")(source) if source is not None
                                    else impl.get("compile_json_schema")(grammar["schema"]), list(vocab), eos)
    if token is None:
        assert bool(m.mask()[ids[b"\xc2\xa0"]]) and bool(m.mask()[ids[b" "]]), "xgrammar's \\s no longer allows U+00A0"
        assert not bool(ours.allowed_mask()[ids[b"\xc2\xa0"]]) and bool(ours.allowed_mask()[ids[b" "]])
        return
    for t in prefix:
        m.advance(ids[t])
        ours.advance(ids[t])
    assert bool(ours.allowed_mask()[ids[token]]) == contract, f"the contract {'allows' if contract else 'refuses'} {token!r} here"
    got = bool(m.mask()[ids[token]])
    assert got == theirs, (f"{engine} on {grammar} after {prefix}: token {token!r} is now {'allowed' if got else 'refused'}; "
                           f"docs/structured.md says {'allowed' if theirs else 'refused'} (the contract: "
                           f"{'allowed' if contract else 'refused'}); update the page and the engine cases")
