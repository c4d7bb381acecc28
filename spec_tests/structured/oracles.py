"""Independent oracles for `structured`: Python's ``re`` (the standard library), CPython's UTF-8
decoder, ``json`` and ``jsonschema``; none reads the reference.

A regex is generated as a small syntax tree (the strategies in strategies.py); ``render`` writes it
in the contract's syntax, and the same text is a Python pattern with the same meaning under
``re.ASCII``. Whether a byte string is a PREFIX of some text of the language (a token is allowed
iff prefix + token is) is answered by ``re.fullmatch`` of a second pattern, the prefix closure of
the tree, built syntactically (every sub-language of the subset is non-empty, so):

    pref(a) = ε | a                          pref(A B ... Z) = pref(A) | A pref(B) | ... | A B ... pref(Z)
    pref(A | B) = pref(A) | pref(B)          pref(A{m,n}) = A{0,n-1} pref(A),  pref(A{m,}) = A* pref(A)

Bytes are decoded with CPython's incremental UTF-8 decoder: invalid UTF-8 (a stray continuation
byte, an overlong form, a surrogate) is never a prefix; an unfinished last character is completed
by the first continuation bytes the decoder accepts (every non-ASCII character behaves alike in the
subset: only ``.`` and ``[^...]`` match one).

Tree nodes: ("lit", c) | ("set", chars, negated) | ("dot",) | ("esc", "d"|"w"|"s") | ("cat", [..]) |
("alt", [..]) | ("rep", node, m, n) (n None: unbounded; rendered ``*``, ``+``, ``?``, ``{m}``,
``{m,}``, ``{m,n}``).
"""
from __future__ import annotations

import codecs
import functools
import json
import re

META = set("\\.[](){}|*+?^$-")


def _char(c: str) -> str:
    """One ASCII character as pattern text (metacharacters escaped, controls as \\xHH)."""
    if c.isalnum() or c in "_ @:,\"'!#%&;<=>`~/":
        return c
    if c in META:
        return "\\" + c
    return f"\\x{ord(c):02x}"


def _members(chars: list[str]) -> str:
    """Class members, runs of two or more consecutive letters or digits written as ranges (a-c)."""
    out, i = [], 0
    while i < len(chars):
        j = i
        while (j + 1 < len(chars) and chars[j + 1].isalnum() and chars[i].isalnum()
               and ord(chars[j + 1]) == ord(chars[j]) + 1):
            j += 1
        out.append(_char(chars[i]) + (f"-{_char(chars[j])}" if j > i else ""))
        i = j + 1
    return "".join(out)


def render(node) -> str:
    kind = node[0]
    if kind == "lit":
        return _char(node[1])
    if kind == "set":
        return ("[^" if node[2] else "[") + _members(sorted(node[1])) + "]"
    if kind == "dot":
        return "."
    if kind == "esc":
        return "\\" + node[1]
    if kind == "cat":
        return "".join(_atom(c) if c[0] == "alt" else render(c) for c in node[1])
    if kind == "alt":
        return "|".join(render(c) for c in node[1])
    _, child, m, n = node
    quant = {(0, None): "*", (1, None): "+", (0, 1): "?"}.get((m, n))
    if quant is None:
        quant = f"{{{m}}}" if m == n else (f"{{{m},}}" if n is None else f"{{{m},{n}}}")
    return _atom(child) + quant


def _atom(node) -> str:
    """``node`` as one atom (grouped unless it is one already)."""
    return render(node) if node[0] in ("lit", "set", "dot", "esc") else f"(?:{render(node)})"


def prefix_pattern(node) -> str:
    """A Python pattern whose full matches are exactly the prefixes of the texts of ``node``."""
    kind = node[0]
    if kind in ("lit", "set", "dot", "esc"):
        return f"(?:{render(node)})?"
    if kind == "cat":
        parts, done = [], ""
        for child in node[1]:
            parts.append(done + prefix_pattern(child))
            done += _atom(child)
        return "(?:" + "|".join(parts) + ")" if parts else ""
    if kind == "alt":
        return "(?:" + "|".join(prefix_pattern(c) for c in node[1]) + ")"
    _, child, m, n = node
    if n == 0:
        return ""
    loop = "*" if n is None else f"{{0,{n - 1}}}"
    return f"(?:{_atom(child)}){loop}{prefix_pattern(child)}"


def _decode_prefix(data: bytes) -> str | None:
    """``data`` as text if it is valid UTF-8 up to an unfinished last character, which is completed
    with the first continuation bytes the decoder takes; None if ``data`` is not a UTF-8 prefix."""
    dec = codecs.getincrementaldecoder("utf-8")()
    try:
        text = dec.decode(data, final=False)
    except UnicodeDecodeError:
        return None
    pending = dec.getstate()[0]
    if not pending:
        return text

    def complete(tail: bytes) -> str | None:
        d = codecs.getincrementaldecoder("utf-8")()
        try:
            out = d.decode(tail, final=False)
        except UnicodeDecodeError:
            return None
        if out:
            return out
        for b in range(0x80, 0xC0):
            got = complete(tail + bytes([b]))
            if got is not None:
                return got
        return None

    last = complete(pending)
    return None if last is None else text + last


_PAIRS: dict[str, tuple] = {}


def _pair(node) -> tuple[re.Pattern, re.Pattern]:
    """(the language's pattern, its prefix closure's), compiled once per tree (keyed by its repr)."""
    key = repr(node)
    got = _PAIRS.get(key)
    if got is None:
        if len(_PAIRS) > 512:
            _PAIRS.clear()
        got = _PAIRS[key] = (re.compile(render(node), re.ASCII), re.compile(prefix_pattern(node), re.ASCII))
    return got


def is_prefix(node, data: bytes) -> bool:
    """Whether ``data`` (bytes) is a prefix of the UTF-8 encoding of some text of ``node``."""
    text = _decode_prefix(data)
    return text is not None and _pair(node)[1].fullmatch(text) is not None


def matches(node, data: bytes | str) -> bool:
    """Whether ``data`` is (the UTF-8 encoding of) a text of ``node``."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            return False
    return _pair(node)[0].fullmatch(data) is not None


def brute_force_mask(node, prefix: bytes, vocab, eos: int, ids=None) -> dict[int, bool]:
    """For each token id (``ids``, default all): allowed after ``prefix``? (the contract's rule,
    answered token by token by the oracle)."""
    out = {}
    for t in (range(len(vocab)) if ids is None else ids):
        if t == eos:
            out[t] = matches(node, prefix)
        else:
            tok = vocab[t]
            out[t] = bool(tok) and is_prefix(node, prefix + tok)
    return out


# ----------------------------------------------------------------------------- JSON
def lits(text: str):
    return ("cat", [("lit", c) for c in text])


CONTROL = frozenset(chr(i) for i in range(0x20))
HEX = frozenset("0123456789abcdefABCDEF")
DIGIT = frozenset("0123456789")


def json_string(forbid: str = "", escapes: str = '"\\/bfnrt', unicode_escape: bool = True):
    """The JSON string of the contract (RFC 8259); ``forbid`` / ``escapes`` / ``unicode_escape``
    describe an engine's variant."""
    branches = [("set", frozenset('"\\') | CONTROL | frozenset(forbid), True),
                ("cat", [("lit", "\\"), ("set", frozenset(escapes), False)])]
    if unicode_escape:
        branches.append(("cat", [("lit", "\\"), ("lit", "u"), ("rep", ("set", HEX, False), 4, 4)]))
    return ("cat", [("lit", '"'), ("rep", ("alt", branches), 0, None), ("lit", '"')])


def json_integer(minus_zero: bool = True):
    positive = ("alt", [("lit", "0"), ("cat", [("set", DIGIT - {"0"}, False), ("rep", ("set", DIGIT, False), 0, None)])])
    if minus_zero:
        return ("cat", [("rep", ("lit", "-"), 0, 1), positive])
    return ("alt", [("lit", "0"), ("cat", [("rep", ("lit", "-"), 0, 1), positive[1][1]])])


def json_number(exponent_sign_required: bool = False):
    digits = ("rep", ("set", DIGIT, False), 1, None)
    sign = ("set", frozenset("+-"), False)
    return ("cat", [json_integer(), ("rep", ("cat", [("lit", "."), digits]), 0, 1),
                    ("rep", ("cat", [("set", frozenset("eE"), False),
                                     sign if exponent_sign_required else ("rep", sign, 0, 1), digits]), 0, 1)])


def schema_tree(schema: dict, string=None, integer=None, number=None):
    """The compact-JSON language of ``schema`` (the contract's subset) as a tree; ``string`` /
    ``integer`` / ``number`` replace those trees (an engine's variant)."""
    string = string or json_string()
    integer = integer or json_integer()
    number = number or json_number()
    rec = functools.partial(schema_tree, string=string, integer=integer, number=number)
    if "enum" in schema or "const" in schema:
        values = schema["enum"] if "enum" in schema else [schema["const"]]
        return ("alt", [lits(json.dumps(v, separators=(",", ":"))) for v in values])
    typ = schema["type"]
    if typ in ("string", "integer", "number"):
        return {"string": string, "integer": integer, "number": number}[typ]
    if typ == "boolean":
        return ("alt", [lits("true"), lits("false")])
    if typ == "null":
        return lits("null")
    if typ == "array":
        item = rec(schema["items"])
        return ("cat", [("lit", "["), ("rep", ("cat", [item, ("rep", ("cat", [("lit", ","), item]), 0, None)]), 0, 1),
                        ("lit", "]")])
    # object: every subset of the properties that holds the required ones, in order
    props = list(schema.get("properties", {}).items())
    required = set(schema.get("required", []))
    branches = []
    optional = [name for name, _ in props if name not in required]
    for mask in range(2 ** len(optional)):
        present = {name for k, name in enumerate(optional) if mask >> k & 1} | required
        members = []
        for name, sub in props:
            if name in present:
                if members:
                    members.append(("lit", ","))
                members += [lits(json.dumps(name)), ("lit", ":"), rec(sub)]
        branches.append(("cat", [("lit", "{")] + members + [("lit", "}")]))
    return ("alt", branches)


def instance_ok(schema: dict, value) -> tuple[bool, str]:
    """Whether the parsed ``value`` is an instance of ``schema`` (the subset; key order is checked
    on the text by the caller): jsonschema where installed, else a hand check of the subset."""
    try:
        import jsonschema
    except ImportError:
        jsonschema = None
    if jsonschema is not None:
        full = strict_schema(schema)
        errors = list(jsonschema.Draft202012Validator(full).iter_errors(value))
        return (not errors, "; ".join(e.message for e in errors[:2]))
    return _hand_check(schema, value), "hand check"


def strict_schema(schema: dict) -> dict:
    """The schema with the contract's ``additionalProperties: false`` made explicit on every
    object (the engines' adapters compile this form)."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    if out.get("type") == "object":
        out["additionalProperties"] = False
        out["properties"] = {k: strict_schema(v) for k, v in out.get("properties", {}).items()}
    if "items" in out:
        out["items"] = strict_schema(out["items"])
    return out


def _hand_check(schema: dict, value) -> bool:
    if "enum" in schema or "const" in schema:
        values = schema["enum"] if "enum" in schema else [schema["const"]]
        return any(json.dumps(v) == json.dumps(value) for v in values)
    typ = schema["type"]
    if typ == "string":
        return isinstance(value, str)
    if typ == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if typ == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if typ == "boolean":
        return isinstance(value, bool)
    if typ == "null":
        return value is None
    if typ == "array":
        return isinstance(value, list) and all(_hand_check(schema["items"], v) for v in value)
    props = schema.get("properties", {})
    return (isinstance(value, dict) and set(value) <= set(props) and set(schema.get("required", [])) <= set(value)
            and all(_hand_check(props[k], v) for k, v in value.items()))


def keys_in_order(schema: dict, value) -> bool:
    """Every object's keys appear in the order of its schema's ``properties`` (recursively)."""
    if isinstance(value, dict) and schema.get("type") == "object":
        order = list(schema.get("properties", {}))
        got = [order.index(k) for k in value]
        return got == sorted(got) and all(keys_in_order(schema["properties"][k], v) for k, v in value.items())
    if isinstance(value, list) and schema.get("type") == "array":
        return all(keys_in_order(schema["items"], v) for v in value)
    return True
