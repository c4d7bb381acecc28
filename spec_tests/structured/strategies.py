"""Hypothesis strategies for `structured`: regex syntax trees (oracles.py's nodes) and JSON schemas
of the contract's subset with their instances."""
from __future__ import annotations

import json

from hypothesis import strategies as st


def regex_trees(chars: str = "ab", *, shorthand: bool = False, max_leaves: int = 6):
    """Trees over literals of ``chars``, classes of them (plain and negated), ``.`` and, with
    ``shorthand``, ``\\d \\w \\s``; cat / alt / every quantifier form."""
    sets = st.frozensets(st.sampled_from(chars), min_size=1, max_size=len(chars))
    atoms = [st.builds(lambda c: ("lit", c), st.sampled_from(chars)),
             st.builds(lambda s, neg: ("set", s, neg), sets, st.booleans()),
             st.just(("dot",))]
    if shorthand:
        atoms.append(st.sampled_from([("esc", "d"), ("esc", "w"), ("esc", "s")]))
    quantifiers = st.sampled_from([(0, None), (1, None), (0, 1), (2, 2), (0, 2), (1, 3), (2, None), (0, 0)])

    def extend(inner):
        return st.one_of(
            st.builds(lambda xs: ("cat", xs), st.lists(inner, min_size=2, max_size=3)),
            st.builds(lambda xs: ("alt", xs), st.lists(inner, min_size=2, max_size=3)),
            st.builds(lambda x, q: ("rep", x, q[0], q[1]), inner, quantifiers),
        )
    return st.recursive(st.one_of(atoms), extend, max_leaves=max_leaves)


NAMES = ["a", "b", "id", "x y", "q\"t"]
PRIMITIVE = [{"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}, {"type": "null"}]


def schemas(max_leaves: int = 4):
    """Schemas of the subset: primitives, enum/const, arrays, objects with required and optional
    properties (annotations sprinkled in)."""
    enums = st.one_of(
        st.lists(st.sampled_from(["red", "blue", 0, 2.5, True, None, [1, "x"], {"k": 1}]), min_size=1, max_size=3,
                 unique_by=json.dumps).map(lambda vs: {"enum": vs}),
        st.sampled_from(["go", 7, False]).map(lambda v: {"const": v}),
        st.just({"type": "string", "enum": ["a", "b\"c"]}),
    )
    leaves = st.one_of(st.sampled_from(PRIMITIVE), enums)

    def extend(inner):
        def obj(props, req_flags, title):
            names = NAMES[:len(props)]
            out = {"type": "object", "properties": dict(zip(names, props))}
            required = [n for n, r in zip(names, req_flags) if r]
            if required or title:
                out["required"] = required
            if title:
                out["title"] = "T"
            return out
        return st.one_of(
            st.builds(lambda s: {"type": "array", "items": s}, inner),
            st.builds(obj, st.lists(inner, min_size=0, max_size=3),
                      st.lists(st.booleans(), min_size=3, max_size=3), st.booleans()),
        )
    return st.recursive(leaves, extend, max_leaves=max_leaves)


def instances(schema: dict):
    """Values valid for ``schema`` (keys in schema order)."""
    if "enum" in schema or "const" in schema:
        return st.sampled_from(schema["enum"] if "enum" in schema else [schema["const"]])
    typ = schema["type"]
    if typ == "string":
        return st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6)
    if typ == "integer":
        return st.integers(-10**20, 10**20)
    if typ == "number":
        return st.one_of(st.integers(-1000, 1000), st.floats(allow_nan=False, allow_infinity=False))
    if typ == "boolean":
        return st.booleans()
    if typ == "null":
        return st.none()
    if typ == "array":
        return st.lists(instances(schema["items"]), max_size=3)
    props = schema.get("properties", {})
    required = set(schema.get("required", []))

    @st.composite
    def obj(draw):
        out = {}
        for name, sub in props.items():
            if name in required or draw(st.booleans()):
                out[name] = draw(instances(sub))
        return out
    return obj()
