"""Bad input: every contract function rejects it with TypeError / ValueError naming the argument
(and, for a pattern, the position; for a schema, the keyword and where it is), leaving the
matcher's state and the generator's unchanged."""
from __future__ import annotations

import pytest
import torch

from conformance.badinput import Bad, assert_rejects, bad_cases
from spec_tests.structured.vocab import tiny_vocab
from spec_tests.structured.walk import mask_list

PATTERNS = [
    ("not a str", 5, TypeError), ("bytes", b"a", TypeError),
    ("unbalanced )", "a)", ValueError), ("missing )", "(a", ValueError), ("lookahead", "(?=a)", ValueError),
    ("named group", "(?P<x>a)", ValueError), ("missing ]", "[ab", ValueError), ("empty class", "[]a]", ValueError),
    ("reversed range", "[z-a]", ValueError), ("class range", "[\\d-z]", ValueError), ("range to class", "[a-\\w]", ValueError),
    ("double quantifier", "a**", ValueError), ("lazy", "a*?", ValueError), ("lazy braces", "a{1,2}?", ValueError),
    ("nothing to repeat", "*a", ValueError), ("repeat after bar", "a|+b", ValueError), ("repeat in group", "(?b)", ValueError),
    ("caret anchor", "^a", ValueError), ("dollar anchor", "a$", ValueError), ("lone ]", "a]", ValueError),
    ("lone }", "a}", ValueError), ("word boundary", "\\b", ValueError), ("negated digit", "\\D", ValueError),
    ("backreference", "(a)\\1", ValueError), ("unknown escape", "\\q", ValueError), ("trailing backslash", "a\\", ValueError),
    ("short hex", "\\x8", ValueError), ("non-ASCII hex", "\\x80", ValueError), ("bad hex", "\\xZZ", ValueError),
    ("non-ASCII literal", "\u00e9", ValueError), ("non-ASCII in class", "[\u00e9]", ValueError),
    ("open lower bound", "a{,3}", ValueError), ("m above n", "a{3,2}", ValueError), ("huge repeat", "a{1001}", ValueError),
    ("huge upper", "a{1,1001}", ValueError), ("unclosed brace", "a{1", ValueError), ("letter brace", "a{a}", ValueError),
    ("lone brace", "a{", ValueError), ("brace first", "{2}", ValueError), ("raw tab", "a\tb", ValueError),
    ("raw newline in class", "[\n]", ValueError), ("bracket in class", "[a[]", ValueError),
    ("unfinished range", "[a-", ValueError), ("class ends with backslash", "[\\", ValueError),
    ("escaped space", "\\ ", ValueError), ("unknown escape in a class", "[a\\q]", ValueError), ("non-ASCII range", "[a-\u00e9]", ValueError),
]


@bad_cases([Bad(name, dict(pattern=p), e, ("pattern",)) for name, p, e in PATTERNS])
def test_compile_regex_rejects(impl, bad):
    """Outside the subset: TypeError (not a str) or ValueError naming pattern (with the position)."""
    assert_rejects(impl.get("compile_regex"), dict(pattern="a+"), bad)


@pytest.mark.parametrize("name,pattern", [(n, p) for n, p, e in PATTERNS if e is ValueError], ids=lambda x: str(x)[:20])
def test_pattern_error_names_the_position(impl, name, pattern):
    """The ValueError of every pattern outside the subset says where: 'position N', N an index of
    the pattern (or its length, for a pattern that ends too soon)."""
    with pytest.raises(ValueError) as info:
        impl.get("compile_regex")(pattern)
    import re
    m = re.search(r"position (\d+)", str(info.value))
    assert m and int(m.group(1)) <= len(pattern), (
        f"compile_regex({pattern!r}) ({name}): the ValueError should name the position; it says {info.value}")


OBJ = {"type": "object", "properties": {"a": {"type": "integer"}}}
SCHEMAS = [
    ("not a dict", 5, TypeError, ()), ("a list", [OBJ], TypeError, ()), ("text not JSON", "{type: object}", ValueError, ()),
    ("text of a list", "[1]", TypeError, ()),
    ("minLength", {"type": "string", "minLength": 1}, ValueError, ("minLength",)),
    ("type list", {"type": ["string", "null"]}, ValueError, ("type",)),
    ("unknown type", {"type": "date"}, ValueError, ("date",)),
    ("no type", {}, ValueError, ("type",)), ("ref", {"$ref": "#/defs/a"}, ValueError, ("$ref",)),
    ("additional true", {**OBJ, "additionalProperties": True}, ValueError, ("additionalProperties",)),
    ("additional schema", {**OBJ, "additionalProperties": {"type": "string"}}, ValueError, ("additionalProperties",)),
    ("required unknown", {**OBJ, "required": ["b"]}, ValueError, ("required",)),
    ("required str", {**OBJ, "required": "a"}, ValueError, ("required",)),
    ("required int", {**OBJ, "required": [1]}, ValueError, ("required",)),
    ("required twice", {**OBJ, "required": ["a", "a"]}, ValueError, ("required",)),
    ("properties list", {"type": "object", "properties": [1]}, ValueError, ("properties",)),
    ("property not a schema", {"type": "object", "properties": {"a": 5}}, ValueError, ("schema.properties.a",)),
    ("nested keyword", {"type": "array", "items": {"type": "string", "format": "date"}}, ValueError, ("format", "schema.items")),
    ("array no items", {"type": "array"}, ValueError, ("items",)),
    ("array minItems", {"type": "array", "items": {"type": "null"}, "minItems": 1}, ValueError, ("minItems",)),
    ("items on object", {**OBJ, "items": {"type": "null"}}, ValueError, ("items",)),
    ("empty enum", {"enum": []}, ValueError, ("enum",)), ("enum not list", {"enum": "ab"}, ValueError, ("enum",)),
    ("enum and const", {"enum": [1], "const": 1}, ValueError, ("const",)),
    ("enum wrong type", {"type": "string", "enum": [1]}, ValueError, ("enum",)),
    ("enum bool as integer", {"type": "integer", "enum": [True]}, ValueError, ("enum",)),
    ("enum nan", {"enum": [float("nan")]}, ValueError, ("enum",)),
    ("enum beside keyword", {"enum": [1], "minimum": 0}, ValueError, ("minimum",)),
    ("anyOf", {"anyOf": [{"type": "string"}]}, ValueError, ("anyOf",)),
]


SCHEMA_BAD = [Bad(name, dict(schema=s), e, ("schema",) + w) for name, s, e, w in SCHEMAS]


@bad_cases(SCHEMA_BAD)
def test_json_schema_to_regex_rejects(impl, bad):
    """Outside the subset: TypeError (not a dict or JSON text of one) or ValueError naming schema,
    the keyword and where it is."""
    assert_rejects(impl.get("json_schema_to_regex"), dict(schema=OBJ), bad)


@bad_cases(SCHEMA_BAD)
def test_compile_json_schema_rejects(impl, bad):
    """As json_schema_to_regex."""
    assert_rejects(impl.get("compile_json_schema"), dict(schema=OBJ), bad)


def test_schema_text_and_annotations(impl):
    """The schema may be its JSON text; title, description and $schema are ignored."""
    a = impl.get("json_schema_to_regex")('{"type": "integer", "title": "n", "description": "d", "$schema": "x"}')
    import re
    assert re.fullmatch(a, "-12") and not re.fullmatch(a, "1.5")


def _vocab():
    vocab, eos = tiny_vocab()
    return list(vocab), eos


MATCHER_BAD = [
    Bad("grammar a str", dict(grammar="a+"), TypeError, ("grammar",)),
    Bad("grammar None", dict(grammar=None), TypeError, ("grammar",)),
    Bad("vocab bytes", dict(vocab=b"abc"), TypeError, ("vocab",)),
    Bad("vocab int", dict(vocab=5), TypeError, ("vocab",)),
    Bad("vocab empty", dict(vocab=[]), ValueError, ("vocab",)),
    Bad("vocab of str", dict(vocab=["a", b"b"]), TypeError, ("vocab",)),
    Bad("vocab of int", dict(vocab=[b"a", 98]), TypeError, ("vocab",)),
    Bad("eos float", dict(eos_token_id=1.0), TypeError, ("eos_token_id",)),
    Bad("eos bool", dict(eos_token_id=True), TypeError, ("eos_token_id",)),
    Bad("eos None", dict(eos_token_id=None), TypeError, ("eos_token_id",)),
    Bad("eos negative", dict(eos_token_id=-1), ValueError, ("eos_token_id",)),
    Bad("eos too big", lambda kw: {**kw, "eos_token_id": len(kw["vocab"])}, ValueError, ("eos_token_id",)),
]


@bad_cases(MATCHER_BAD)
def test_token_matcher_rejects(impl, bad):
    vocab, eos = _vocab()
    assert_rejects(impl.get("TokenMatcher"), lambda: dict(grammar=impl.get("compile_regex")("ab"), vocab=vocab,
                                                          eos_token_id=eos), bad)


LOGITS = torch.tensor([[0.5, -1.0, 2.0, 0.0], [1.0, 1.0, -3.0, 0.2]])
MASK = torch.tensor([[True, False, True, False], [False, True, True, True]])
TENSOR_BAD = [
    Bad("logits list", dict(logits=[[0.5, 1.0, 2.0, 0.0]]), TypeError, ("logits",)),
    Bad("logits int", dict(logits=torch.ones(2, 4, dtype=torch.int64)), TypeError, ("logits",)),
    Bad("logits 0-d", dict(logits=torch.tensor(1.0)), ValueError, ("logits",)),
    Bad("mask float", dict(mask=MASK.float()), TypeError, ("mask",)),
    Bad("mask list", dict(mask=[True, False, True, False]), TypeError, ("mask",)),
    Bad("mask wrong vocab", dict(mask=torch.ones(5, dtype=torch.bool)), ValueError, ("mask",)),
    Bad("mask wrong batch", dict(mask=torch.ones(3, 4, dtype=torch.bool)), ValueError, ("mask",)),
]
SAMPLE_BAD = TENSOR_BAD + [
    Bad("logits 1-d", dict(logits=LOGITS[0], mask=MASK[0]), ValueError, ("logits",)),
    Bad("logits 3-d", dict(logits=LOGITS[None]), ValueError, ("logits",)),
    Bad("nan logit", dict(logits=torch.tensor([[0.5, float("nan"), 2.0, 0.0], [1.0] * 4])), ValueError, ("logits",)),
    Bad("+inf logit", dict(logits=torch.tensor([[0.5, 1.0, float("inf"), 0.0], [1.0] * 4])), ValueError, ("logits",)),
    Bad("row masked out", dict(mask=torch.tensor([[True] * 4, [False] * 4])), ValueError, ("mask",)),
    Bad("allowed all -inf", dict(logits=torch.tensor([[float("-inf"), 1.0, float("-inf"), 1.0], [1.0] * 4])),
        ValueError, ("mask",)),
]


@bad_cases(TENSOR_BAD)
def test_mask_logits_rejects(impl, bad):
    assert_rejects(impl.get("mask_logits"), dict(logits=LOGITS, mask=MASK), bad)


@bad_cases(SAMPLE_BAD)
def test_constrained_probs_rejects(impl, bad):
    assert_rejects(impl.get("constrained_probs"), dict(logits=LOGITS, mask=MASK), bad)


DRAW_BAD = SAMPLE_BAD + [
    Bad("no randomness", dict(generator=None), ValueError, ("generator",)),
    Bad("generator int", dict(generator=5, uniforms=None), TypeError, ("generator",)),
    Bad("uniforms list", dict(uniforms=[0.5, 0.5]), TypeError, ("uniforms",)),
    Bad("uniforms int", dict(uniforms=torch.zeros(2, dtype=torch.int64)), TypeError, ("uniforms",)),
    Bad("uniforms shape", dict(uniforms=torch.zeros(3, dtype=torch.float64)), ValueError, ("uniforms",)),
    Bad("uniforms one", dict(uniforms=torch.tensor([0.5, 1.0], dtype=torch.float64)), ValueError, ("uniforms",)),
    Bad("uniforms negative", dict(uniforms=torch.tensor([-0.1, 0.5], dtype=torch.float64)), ValueError, ("uniforms",)),
]


@bad_cases(DRAW_BAD)
def test_constrained_sample_rejects(impl, bad):
    """Also: a rejected call draws nothing (the generator's state is unchanged)."""
    gen = torch.Generator().manual_seed(3)
    state = gen.get_state()
    kw = dict(logits=LOGITS, mask=MASK, generator=gen)
    if "uniforms" in (bad.change if isinstance(bad.change, dict) else {}):
        kw["generator"] = None
    assert_rejects(impl.get("constrained_sample"), kw, bad)
    assert torch.equal(gen.get_state(), state), f"bad input {bad.id!r}: the rejected call drew from the generator"


def test_constrained_sample_empty_batch(impl):
    """Batch 0: an empty int64 result, nothing drawn."""
    gen = torch.Generator().manual_seed(3)
    state = gen.get_state()
    out = impl.get("constrained_sample")(torch.zeros(0, 4), torch.ones(4, dtype=torch.bool), gen)
    assert out.dtype == torch.int64 and out.shape == (0,)
    assert torch.equal(gen.get_state(), state)


def _fn(vocab_size):
    return lambda tokens: torch.zeros(vocab_size)


GENERATE_BAD = [
    Bad("logits_fn int", dict(logits_fn=5), TypeError, ("logits_fn",)),
    Bad("max_tokens negative", dict(max_tokens=-1), ValueError, ("max_tokens",)),
    Bad("max_tokens float", dict(max_tokens=2.0), TypeError, ("max_tokens",)),
    Bad("max_tokens None", dict(max_tokens=None), TypeError, ("max_tokens",)),
    Bad("no randomness", dict(generator=None), ValueError, ("generator",)),
    Bad("uniforms short", dict(generator=None, uniforms=torch.zeros(2, dtype=torch.float64)), ValueError, ("uniforms",)),
    Bad("uniforms above one", dict(generator=None, uniforms=torch.full((4,), 1.5, dtype=torch.float64)), ValueError,
        ("uniforms",)),
    Bad("logits_fn wrong shape", dict(logits_fn=lambda tokens: torch.zeros(3)), ValueError, ("logits_fn",)),
    Bad("logits_fn list", lambda kw: {**kw, "logits_fn": lambda tokens: [0.0] * 87}, ValueError, ("logits_fn",)),
    Bad("logits_fn int tensor", lambda kw: {**kw, "logits_fn": lambda tokens: torch.zeros(87, dtype=torch.int64)},
        ValueError, ("logits_fn",)),
]


@bad_cases(GENERATE_BAD)
def test_generate_constrained_rejects(impl, bad):
    """Argument errors are raised before any token is taken (the matcher is unchanged); a
    logits_fn returning something else than a floating (vocab,) tensor is named."""
    vocab, eos = _vocab()
    m = impl.get("TokenMatcher")(impl.get("compile_regex")("(ab)+"), vocab, eos)
    before = mask_list(m)
    assert_rejects(impl.get("generate_constrained"),
                   dict(matcher=m, logits_fn=_fn(len(vocab)), max_tokens=4, generator=torch.Generator().manual_seed(0)),
                   bad)
    if "logits_fn" not in bad.id:
        assert mask_list(m) == before and not m.is_finished(), f"bad input {bad.id!r}: the matcher moved"
