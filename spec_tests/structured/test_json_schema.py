"""The JSON Schema subset: the compact JSON text of every instance is accepted, the language equals
the oracle's (its own schema -> tree construction, oracles.py), masks along an instance's text equal
the brute-force check, and every constrained generation parses with ``json.loads`` and validates
(jsonschema where installed, a hand check of the subset otherwise)."""
from __future__ import annotations

import json
import re

import torch
from hypothesis import example, given, settings, strategies as st

from spec_tests.structured import oracles as O
from spec_tests.structured.strategies import instances, schemas
from spec_tests.structured.vocab import byte_vocab
from spec_tests.structured.walk import accepts, byte_matcher, mask_list

OBJ = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "null"}},
       "required": ["b"]}


@st.composite
def cases(draw, max_leaves: int = 4):
    """(schema, one of its instances)."""
    schema = draw(schemas(max_leaves=max_leaves))
    return schema, draw(instances(schema))


def _text(value, ascii_only: bool) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=ascii_only)


@example(case=(OBJ, {"b": "x", "c": None}), ascii_only=True).via("mutant:optional_first_keeps_comma")
@example(case=({"type": "integer"}, -10), ascii_only=True).via("boundary: a negative integer")
@given(case=cases(), ascii_only=st.booleans())
def test_instances_are_accepted(impl, case, ascii_only):
    """The compact JSON text (``json.dumps(v, separators=(",", ":"))``, ASCII-escaped or raw UTF-8) of
    every instance of the schema (keys in the schema's order, optional properties present or not)
    is accepted by compile_json_schema's matcher, and json_schema_to_regex's pattern matches it
    under Python's re (re.ASCII)."""
    schema, value = case
    text = _text(value, ascii_only)
    pattern = impl.get("json_schema_to_regex")(schema)
    assert re.fullmatch(pattern, text, re.ASCII), (
        f"json_schema_to_regex({schema!r}) = {pattern!r} does not match the instance text {text!r}")
    matcher = byte_matcher(impl, impl.get("compile_json_schema")(schema))
    assert accepts(matcher, text.encode()), f"compile_json_schema({schema!r}) refuses the instance text {text!r}"


EDITS = st.sampled_from(["insert", "delete", "replace"])
NOISE = st.sampled_from(list(' ,:{}[]"\\0-.e1tfnx\n') + ["\u00e9", "\x7f", "\x01", "00"])


@example(case=({"type": "integer"}, 0), edits=[("insert", 1, "0")]).via("mutant:integer_leading_zeros")
@example(case=(OBJ, {"b": "x"}), edits=[("insert", 1, ",")]).via("mutant:optional_first_keeps_comma")
@given(case=cases(), edits=st.lists(st.tuples(EDITS, st.integers(0, 40), NOISE), min_size=1, max_size=2))
def test_language_equals_the_oracle(impl, case, edits):
    """Texts near an instance (one or two single-character edits: whitespace, a comma, a bracket,
    a leading zero, DEL, a control character, a swapped literal) are accepted iff the oracle's
    language (the compact JSON of an instance, keys in order) holds them; json_schema_to_regex's
    pattern agrees under Python's re."""
    schema, value = case
    text = _text(value, True)
    for kind, pos, noise in edits:
        pos = min(pos, len(text))
        if kind == "insert":
            text = text[:pos] + noise + text[pos:]
        elif kind == "delete":
            text = text[:pos] + text[pos + 1:]
        else:
            text = text[:pos] + noise + text[pos + 1:]
    want = O.matches(O.schema_tree(schema), text)
    matcher = byte_matcher(impl, impl.get("compile_json_schema")(schema))
    got = accepts(matcher, text.encode())
    assert got == want, f"schema {schema!r}: the text {text!r} is {'accepted' if got else 'refused'}; the oracle says {want}"
    pattern = impl.get("json_schema_to_regex")(schema)
    assert (re.fullmatch(pattern, text, re.ASCII) is not None) == want, (
        f"json_schema_to_regex({schema!r}) = {pattern!r} on {text!r}: the oracle says {want}")


@settings(deadline=None)
@example(case=(OBJ, {"a": 0, "b": "\u00e9"})).via("mutant:optional_first_keeps_comma")
@given(case=cases(max_leaves=3))
def test_masks_along_an_instance(impl, case):
    """At about ten evenly spaced prefixes of an instance's compact UTF-8 text (the empty one and
    the whole text included), the byte-vocabulary mask is exactly the brute-force check of each of
    the 256 bytes and EOS."""
    schema, value = case
    text = _text(value, False).encode()
    tree = O.schema_tree(schema)
    vocab, eos = byte_vocab()
    m = byte_matcher(impl, impl.get("compile_json_schema")(schema))
    checked = set(range(0, len(text) + 1, max(1, len(text) // 10))) | {len(text)}
    for k in range(len(text) + 1):
        if k not in checked:
            m.advance(text[k])
            continue
        got = mask_list(m)
        want = O.brute_force_mask(tree, text[:k], vocab, eos)
        wrong = [t for t in range(len(vocab)) if got[t] != want[t]]
        assert not wrong, (f"schema {schema!r} after {text[:k]!r}: byte(s) {[bytes([t]) if t < 256 else 'EOS' for t in wrong[:6]]} "
                           f"{'allowed' if got[wrong[0]] else 'refused'} by the mask, the grammar says otherwise")
        if k < len(text):
            m.advance(text[k])


STRUCTURE = list(b'{}[]",:') + [ord(c) for c in "0123456789"]


def _logits_fn(seed: int, eos: int):
    """Random logits (seeded) that favour the structural bytes and EOS, so generations end."""
    def fn(tokens):
        g = torch.Generator().manual_seed(seed * 1000 + len(tokens))
        x = torch.randn(eos + 1, generator=g, dtype=torch.float64) * 2
        x[STRUCTURE] += 3.0
        x[eos] += 6.0
        return x
    return fn


@settings(deadline=None)
@example(schema=OBJ, seed=3).via("mutant:generate_ignores_mask")
@example(schema=OBJ, seed=8).via("mutant:optional_first_keeps_comma")
@given(schema=schemas(max_leaves=3), seed=st.integers(0, 10**6))
def test_generations_are_valid_json(impl, schema, seed):
    """generate_constrained over the byte vocabulary with random logits: a generation that ends
    with EOS parses with json.loads, is an instance of the schema with its keys in order and is
    compact (no byte outside the oracle's language); one cut by max_tokens is a prefix of the
    language."""
    vocab, eos = byte_vocab()
    m = impl.get("TokenMatcher")(impl.get("compile_json_schema")(schema), list(vocab), eos)
    gen = torch.Generator().manual_seed(seed)
    tokens = impl.get("generate_constrained")(m, _logits_fn(seed, eos), 120, gen)
    assert all(isinstance(t, int) for t in tokens), f"generate_constrained must return a list of int ids: {tokens!r}"
    text = bytes(t for t in tokens if t != eos)
    tree = O.schema_tree(schema)
    if tokens and tokens[-1] == eos:
        assert eos not in tokens[:-1]
        value = json.loads(text)
        ok, why = O.instance_ok(schema, value)
        assert ok, f"schema {schema!r}: the generation {text!r} is not an instance ({why})"
        assert O.keys_in_order(schema, value), f"schema {schema!r}: {text!r} has keys out of the schema's order"
        assert O.matches(tree, text), f"schema {schema!r}: {text!r} is valid JSON but not compact JSON of the contract"
        assert m.is_finished()
    else:
        assert len(tokens) == 120 and eos not in tokens, f"stopped after {len(tokens)} tokens without EOS: {text!r}"
        assert O.is_prefix(tree, text), f"schema {schema!r}: the unfinished generation {text!r} is no prefix of the language"
