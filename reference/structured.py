"""Structured output: a grammar compiled to a token-level automaton (course 07.08-07.09).

Constrained decoding is a mask over the logit vector: at each step the grammar decides which tokens
are legal, and sampling happens only over those (07.08). Asking a model nicely for JSON is not a
guarantee; the mask is. It has two costs (07.09): COMPILING a grammar into an automaton (paid once
per distinct grammar) and applying the mask at every step (cheap, constant). The reference is the
plain construction: regex -> syntax tree -> Thompson NFA -> subset construction -> a DFA over BYTES,
and per step a walk of every token's bytes through it.

The contract
============

    compile_regex(pattern) -> grammar
    json_schema_to_regex(schema) -> str           (a pattern of the subset below)
    compile_json_schema(schema) -> grammar        (= compile_regex(json_schema_to_regex(schema)))
    TokenMatcher(grammar, vocab, eos_token_id)    allowed_mask(), advance(token_id), is_accepted(),
                                                  is_finished(), reset()
    mask_logits(logits, mask) -> logits with every disallowed entry -inf (a new tensor)
    constrained_probs(logits, mask) -> the renormalised restriction of softmax(logits), float64
    constrained_sample(logits, mask, generator=None, *, uniforms=None) -> token ids (batch,)
    generate_constrained(matcher, logits_fn, max_tokens, generator=None, *, uniforms=None) -> ids

A grammar is the compiled automaton of ONE implementation: whatever object its ``compile_*``
return and its ``TokenMatcher`` accepts (the reference: :class:`ByteDFA`). Its internals are not
in the contract; only the language it accepts and the masks are.

The regex subset (ASCII patterns; the WHOLE text must match: Python's ``re.fullmatch`` with
``re.ASCII``)
- literals: printable ASCII except the metacharacters ``\\ . [ ] ( ) { } | * + ? ^ $``, which must be
  escaped (``\\.``, ``\\{``, ...) to be literal; any escaped ASCII punctuation is that character;
  ``\\n \\t \\r \\f \\v`` and ``\\xHH`` (HH < 80, ASCII) name control characters.
- ``\\d`` = [0-9], ``\\w`` = [A-Za-z0-9_], ``\\s`` = [ \\t\\n\\r\\f\\v] (ASCII, as Python with re.ASCII).
- ``.`` = any Unicode scalar value except ``\\n`` (surrogates have no UTF-8 form and are never matched).
- classes ``[a-z0-9_]``, ``[^...]``: ASCII members, ranges ``x-y`` (x <= y), escapes as above (``\\]``,
  ``\\-``, ``\\^``, ``\\\\``, ``\\d`` ...); a ``-`` first or last is literal; ``]`` first and ``[]`` are
  errors. ``[^...]`` matches every scalar value not listed (non-ASCII included, ``\\n`` unless listed).
- groups ``(...)`` and ``(?:...)`` (no other ``(?``), alternation ``|`` (empty branches allowed),
  quantifiers ``*``, ``+``, ``?``, ``{m}``, ``{m,}``, ``{m,n}`` (0 <= m <= n <= 1000) on an atom.
- not supported (ValueError naming ``pattern`` and the position): anchors ``^ $``, backreferences,
  lookaround, lazy or possessive quantifiers (``*?``, ``a**``), ``{,n}``, ``\\b \\D \\W \\S`` and any
  other escape, a non-ASCII character in the pattern, unbalanced brackets or parentheses, a
  quantifier with nothing to repeat.

Text is bytes: the language is the set of UTF-8 encodings of the matching strings, and the
automaton reads bytes. Every non-ASCII character is matched only by ``.`` or a negated class, so
all non-ASCII characters behave alike.

The JSON Schema subset (``schema``: a dict, or its JSON text). Output is COMPACT JSON: no whitespace
anywhere, ``,`` between items and ``:`` after a key, nothing before or after the value (xgrammar's
``any_whitespace=False, separators=(",", ":")``, llguidance's ``whitespace_flexible: false``,
outlines-core's ``whitespace_pattern=""``).
- ``{"type": "string"}``: a JSON string (RFC 8259): ``"``, then any characters except ``"``, ``\\`` and
  U+0000-U+001F, or the escapes ``\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX`` (hex digits either case), ``"``.
- ``"integer"``: ``-?(0|[1-9][0-9]*)``; ``"number"``: ``-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?``;
  ``"boolean"``: ``true|false``; ``"null"``: ``null``.
- ``"array"`` with ``"items"`` (a schema; required): ``[]`` or ``[`` items joined by ``,`` ``]``.
- ``"object"`` with ``"properties"`` (a dict; may be empty or absent: ``{}``) and ``"required"`` (a list of
  property names, no repeats): the properties appear in the order of ``properties``, each required
  one exactly once, each optional one at most once; no other key (``additionalProperties``: absent
  or ``false``; ``true`` or a schema is not supported).
- ``"enum"`` (a non-empty list of JSON values) / ``"const"`` (one value): exactly those values, each
  written as ``json.dumps(value, separators=(",", ":"))`` (ASCII, ``\\uXXXX`` escapes); with a
  ``"type"`` beside them every value must have that type.
- ``"title"``, ``"description"``, ``"$schema"``: annotations, ignored.
- Anything else (another keyword, a list of types, ``additionalProperties: true``, a ``required``
  name not in ``properties``, ``$ref`` ...): ValueError naming ``schema``, the keyword and where
  it is (``schema.properties.a``). A non-dict/str schema: TypeError naming ``schema``; text that is
  not JSON: ValueError naming ``schema``.

Tokens (``vocab``): a sequence, one entry per token id, each ``bytes`` (the token's text as UTF-8
bytes, which may be a partial UTF-8 character: a byte-level BPE token or a SentencePiece byte
fallback ``<0xE2>`` is the one byte) or ``None`` (a special/control token). A token is ALLOWED from
the current state iff it is not special (None or b""), it is not ``eos_token_id``, and walking its
bytes from the state stays alive (reaches a state from which some accepting state can be
reached). ``eos_token_id`` is allowed iff the text so far is in the language (whatever
``vocab[eos_token_id]`` holds). How a tokenizer's ids map to bytes is the caller's: decode each
id to its bytes (spec_tests/structured/vocab.py does it for the Tekken tokenizer that
``mistral-common`` ships).

TokenMatcher: starts at the empty text. ``allowed_mask()`` -> a NEW bool tensor (vocab,) on the
CPU (all False once finished). ``advance(token_id)``: an allowed token moves the state (EOS
finishes); a disallowed one raises ValueError naming ``token_id`` and leaves the state unchanged.
``is_accepted()``: the text so far is in the language (False once finished? no: stays True: the
text is unchanged by EOS). ``is_finished()``: EOS was taken. ``reset()``: back to the start.

Sampling under the mask (the sampling contract of reference/sampling.py restricted to the allowed
set): ``constrained_probs`` = softmax(logits over the allowed tokens) in float64, exactly 0
elsewhere: p_t / sum_{allowed} p (the renormalised restriction of softmax(logits)); it is what
``sampling_probs(mask_logits(logits, mask))`` gives with default parameters.
``constrained_sample`` draws one token per row from it; every token it returns is allowed, for any
generator or uniforms. ``generate_constrained`` loops: mask, ``logits_fn(tokens so far)``, draw,
advance, until EOS is drawn, ``max_tokens`` tokens are drawn, or no token is allowed (a dead end
of a vocabulary too small for the grammar; never with a vocabulary of all 256 single bytes). It
starts from the matcher's current state and leaves the matcher where it stopped; it returns the
token ids drawn (EOS included when drawn). So every generation that ends with EOS is in the
language, and every other is a prefix of some text in the language.

Choices the law leaves open (checked only at token-exact): the draw is the inverse CDF in
token-id order of float64 ``constrained_probs`` (the smallest t with C_t > u * C_last, C the
cumulative sum; the last token with positive probability if rounding leaves none), with u one
``torch.rand(batch, generator=generator, dtype=torch.float64)`` per call (``generate_constrained``:
one call of batch 1 per step, or ``uniforms[step]``).

Errors (ValueError / TypeError naming the argument; a matcher's state is unchanged on error):
``pattern`` not a str (TypeError) or outside the subset (ValueError with the position);
``schema`` as above; ``grammar`` not a compiled grammar (TypeError); ``vocab`` not a non-empty
sequence of bytes/None (TypeError for a wrong entry, ValueError for an empty one);
``eos_token_id`` not an int (TypeError) or outside [0, len(vocab)) (ValueError); ``token_id``
not an int (TypeError), out of range, not allowed or after EOS (ValueError); ``logits`` not a
floating tensor (TypeError) of rank 2 (batch, vocab) (``mask_logits``: rank >= 1; it masks and
checks nothing else) or, for ``constrained_probs`` / ``constrained_sample``, holding NaN or +inf
(ValueError); ``mask`` not a bool tensor (TypeError), of another shape than ``logits`` or
(vocab,) (ValueError), or allowing no token with finite logit in a row (ValueError naming
``mask`` and the row); ``generator``/``uniforms`` as reference/sampling.py (``uniforms`` of shape
(batch,), ``generate_constrained``: (max_tokens,)); ``max_tokens`` not an int >= 0;
``logits_fn`` not callable (TypeError) or returning other than a floating tensor (vocab,)
(ValueError naming ``logits_fn``).
"""
from __future__ import annotations

import json
from collections import deque
from typing import Callable, Sequence

import torch

from reference._checks import check_int, is_int

__all__ = ["compile_regex", "json_schema_to_regex", "compile_json_schema", "TokenMatcher", "mask_logits",
           "constrained_probs", "constrained_sample", "generate_constrained"]  # the contract
__optional__ = []  # checked when an implementation provides them

MAX_REPEAT = 1000  # the largest m or n of a {m,n} quantifier

# ----------------------------------------------------------------------------- character sets
# A set of characters is (ascii, other): ``ascii`` the ASCII code points in it (a frozenset of
# ints < 128), ``other`` whether it holds every non-ASCII scalar value (the subset cannot name one).
ALL_ASCII = frozenset(range(128))
DIGITS = frozenset(range(ord("0"), ord("9") + 1))
WORD = DIGITS | frozenset(range(ord("a"), ord("z") + 1)) | frozenset(range(ord("A"), ord("Z") + 1)) | {ord("_")}
SPACE = frozenset(map(ord, " \t\n\r\f\v"))
CLASS_ESCAPES = {"d": DIGITS, "w": WORD, "s": SPACE}
CONTROL_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v"}
METACHARS = set("\\.[](){}|*+?^$")

# UTF-8 encodings of every non-ASCII scalar value U+0080..U+10FFFF except the surrogates
# (Unicode Table 3-7, well-formed byte sequences): each a sequence of inclusive byte ranges.
UTF8_NON_ASCII = [
    [(0xC2, 0xDF), (0x80, 0xBF)],
    [(0xE0, 0xE0), (0xA0, 0xBF), (0x80, 0xBF)],
    [(0xE1, 0xEC), (0x80, 0xBF), (0x80, 0xBF)],
    [(0xED, 0xED), (0x80, 0x9F), (0x80, 0xBF)],
    [(0xEE, 0xEF), (0x80, 0xBF), (0x80, 0xBF)],
    [(0xF0, 0xF0), (0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF)],
    [(0xF1, 0xF3), (0x80, 0xBF), (0x80, 0xBF), (0x80, 0xBF)],
    [(0xF4, 0xF4), (0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF)],
]


# ----------------------------------------------------------------------------- 1. parsing
# The syntax tree: ("set", ascii, other) | ("cat", [nodes]) | ("alt", [nodes]) | ("repeat", node, m, n)
# (n None: unbounded). The empty string is ("cat", []).
class _Parser:
    """Recursive descent over the pattern: alt := cat ('|' cat)*; cat := (atom quantifier?)*."""

    def __init__(self, pattern: str):
        self.p = pattern
        self.i = 0

    def error(self, what: str, at: int | None = None):
        at = self.i if at is None else at
        return ValueError(f"pattern: {what} at position {at} of {self.p!r}")

    def peek(self) -> str | None:
        return self.p[self.i] if self.i < len(self.p) else None

    def parse(self):
        node = self.alternation()
        if self.i < len(self.p):              # only an unmatched ')' stops alternation early
            raise self.error("unbalanced ')'")
        return node

    def alternation(self):
        branches = [self.concatenation()]
        while self.peek() == "|":
            self.i += 1
            branches.append(self.concatenation())
        return branches[0] if len(branches) == 1 else ("alt", branches)

    def concatenation(self):
        items = []
        while self.peek() is not None and self.peek() not in "|)":
            items.append(self.quantified(self.atom()))
        return ("cat", items)

    def atom(self):
        c, start = self.peek(), self.i
        if ord(c) > 127:
            raise self.error(f"non-ASCII character {c!r} (match non-ASCII text with '.' or [^...])")
        if c == "(":
            self.i += 1
            if self.p.startswith("?:", self.i):
                self.i += 2
            elif self.peek() == "?":
                raise self.error("unsupported group '(?' (only '(?:' is)")
            node = self.alternation()
            if self.peek() != ")":
                raise self.error("missing ')'", start)
            self.i += 1
            return node
        if c == "[":
            return self.char_class()
        if c == ".":
            self.i += 1
            return ("set", ALL_ASCII - {ord("\n")}, True)
        if c == "\\":
            return ("set",) + self.escape(in_class=False)
        if c in "*+?{":
            raise self.error(f"nothing to repeat before {c!r}")
        if c in METACHARS:                    # ] } ^ $
            raise self.error(f"unsupported or unescaped metacharacter {c!r}")
        if not (c.isprintable() or c == " "):
            raise self.error(f"unescaped control character {c!r}")
        self.i += 1
        return ("set", frozenset({ord(c)}), False)

    def escape(self, in_class: bool) -> tuple[frozenset, bool]:
        """The escape at self.i (a backslash): its character set as (ascii, other)."""
        start = self.i
        self.i += 1
        c = self.peek()
        if c is None:
            raise self.error("pattern ends with a lone backslash", start)
        self.i += 1
        if c in CLASS_ESCAPES:
            return CLASS_ESCAPES[c], False
        if c in CONTROL_ESCAPES:
            return frozenset({ord(CONTROL_ESCAPES[c])}), False
        if c == "x":
            digits = self.p[self.i:self.i + 2]
            if len(digits) != 2 or any(d not in "0123456789abcdefABCDEF" for d in digits) or int(digits, 16) > 127:
                raise self.error("\\x needs two hex digits of an ASCII code (00-7F)", start)
            self.i += 2
            return frozenset({int(digits, 16)}), False
        if ord(c) < 128 and not c.isalnum() and c.isprintable() and c != " " or c == "-" and in_class:
            return frozenset({ord(c)}), False
        raise self.error(f"unsupported escape \\{c}", start)

    def char_class(self):
        start = self.i
        self.i += 1
        negated = self.peek() == "^"
        if negated:
            self.i += 1
        if self.peek() == "]":
            raise self.error("empty character class (escape a leading ']' as '\\]')")
        members: set[int] = set()
        while True:
            c = self.peek()
            if c is None:
                raise self.error("missing ']'", start)
            if c == "]":
                self.i += 1
                break
            low = self.class_item()
            if self.peek() == "-" and self.p[self.i + 1:self.i + 2] not in ("]", ""):
                at = self.i
                self.i += 1
                high = self.class_item()
                if len(low) != 1 or len(high) != 1 or min(low) > min(high):
                    raise self.error("bad character range", at)
                members |= set(range(min(low), min(high) + 1))
            else:
                members |= low
        ascii_set = frozenset(members)
        return ("set", ALL_ASCII - ascii_set, True) if negated else ("set", ascii_set, False)

    def class_item(self) -> frozenset:
        c = self.peek()
        if c is None:
            raise self.error("missing ']'")
        if ord(c) > 127:
            raise self.error(f"non-ASCII character {c!r} in a class")
        if c == "\\":
            chars, _ = self.escape(in_class=True)
            return chars
        if c == "[":
            raise self.error("unescaped '[' in a class")
        if not (c.isprintable() or c == " "):
            raise self.error(f"unescaped control character {c!r}")
        self.i += 1
        return frozenset({ord(c)})

    def quantified(self, node):
        c = self.peek()
        if c is None or c not in "*+?{":
            return node
        start = self.i
        self.i += 1
        if c == "*":
            m, n = 0, None
        elif c == "+":
            m, n = 1, None
        elif c == "?":
            m, n = 0, 1
        else:
            m, n = self.bounds(start)
        if self.peek() is not None and self.peek() in "*+?{":
            raise self.error("a quantifier after a quantifier (lazy/possessive or nested) is not supported")
        return ("repeat", node, m, n)

    def bounds(self, start: int) -> tuple[int, int | None]:
        close = self.p.find("}", self.i)
        body = self.p[self.i:close] if close >= 0 else ""
        lo, comma, hi = body.partition(",")
        if close < 0 or not lo.isdigit() or (hi and not hi.isdigit()) or not lo.isascii() or not hi.isascii():
            raise self.error("bad {m,n} quantifier (write {m}, {m,} or {m,n}; a literal '{' needs '\\{')", start)
        m = int(lo)
        n = m if not comma else (int(hi) if hi else None)
        if n is not None and m > n:
            raise self.error(f"{{{m},{n}}}: m > n", start)
        if max(m, n or 0) > MAX_REPEAT:
            raise self.error(f"repeat count above {MAX_REPEAT}", start)
        self.i = close + 1
        return m, n


# ----------------------------------------------------------------------------- 2. Thompson NFA
class _NFA:
    """States are ints; ``eps[s]`` the epsilon successors, ``edges[s]`` a list of
    (low_byte, high_byte, target). Built fragment by fragment: (start, end)."""

    def __init__(self):
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[int, int, int]]] = []

    def state(self) -> int:
        self.eps.append([])
        self.edges.append([])
        return len(self.eps) - 1

    def build(self, node) -> tuple[int, int]:
        kind = node[0]
        if kind == "set":
            return self.char_set(node[1], node[2])
        if kind == "cat":
            start = end = self.state()
            for child in node[1]:
                s, e = self.build(child)
                self.eps[end].append(s)
                end = e
            return start, end
        if kind == "alt":
            start, end = self.state(), self.state()
            for child in node[1]:
                s, e = self.build(child)
                self.eps[start].append(s)
                self.eps[e].append(end)
            return start, end
        _, child, m, n = node                              # repeat: m copies, then (n - m) optional
        start = end = self.state()                         # copies or a loop
        for _ in range(m):
            s, e = self.build(child)
            self.eps[end].append(s)
            end = e
        if n is None:
            s, e = self.build(child)
            loop_end = self.state()
            self.eps[end] += [s, loop_end]
            self.eps[e] += [s, loop_end]
            end = loop_end
        else:
            final = self.state()
            for _ in range(n - m):
                s, e = self.build(child)
                self.eps[end] += [s, final]
                end = e
            self.eps[end].append(final)
            end = final
        return start, end

    def char_set(self, ascii_set: frozenset, other: bool) -> tuple[int, int]:
        start, end = self.state(), self.state()
        for b in sorted(ascii_set):
            self.edges[start].append((b, b, end))
        if other:                                           # every non-ASCII character, as UTF-8
            for ranges in UTF8_NON_ASCII:
                state = start
                for k, (low, high) in enumerate(ranges):
                    target = end if k == len(ranges) - 1 else self.state()
                    self.edges[state].append((low, high, target))
                    state = target
        return start, end

    def closure(self, states) -> frozenset:
        seen, todo = set(states), list(states)
        while todo:
            for t in self.eps[todo.pop()]:
                if t not in seen:
                    seen.add(t)
                    todo.append(t)
        return frozenset(seen)


# ----------------------------------------------------------------------------- 3. the DFA
class ByteDFA:
    """A deterministic automaton over bytes, trimmed: every state can reach an accepting state, and
    a missing transition is the dead state. ``transitions[s]`` maps a byte to the next state;
    ``accepting`` the accepting states; ``start`` is 0 (``None`` for an empty language)."""

    def __init__(self, transitions: list[dict[int, int]], accepting: frozenset, start: int | None):
        self.transitions = transitions
        self.accepting = accepting
        self.start = start

    @property
    def num_states(self) -> int:
        return len(self.transitions)

    def step(self, state: int | None, byte: int) -> int | None:
        return None if state is None else self.transitions[state].get(byte)

    def walk(self, state: int | None, data: bytes) -> int | None:
        """The state after reading ``data`` from ``state`` (None: dead, no text of the language
        has this prefix)."""
        for b in data:
            if state is None:
                return None
            state = self.transitions[state].get(b)
        return state

    def fullmatch(self, text: str | bytes) -> bool:
        """Whether ``text`` (a str is read as its UTF-8 bytes) is in the language."""
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        return self.walk(self.start, data) in self.accepting


def _subset_construction(nfa: _NFA, start: int, final: int) -> ByteDFA:
    """The reachable subsets of NFA states, then only the states that can still accept (trim),
    numbered in breadth-first order from the start (byte order within a state)."""
    first = nfa.closure([start])
    index = {first: 0}
    subsets, moves = [first], []
    todo = deque([first])
    while todo:
        subset = todo.popleft()
        targets: dict[int, set[int]] = {}
        for s in subset:
            for low, high, t in nfa.edges[s]:
                for b in range(low, high + 1):
                    targets.setdefault(b, set()).add(t)
        row = {}
        for b in sorted(targets):
            nxt = nfa.closure(targets[b])
            if nxt not in index:
                index[nxt] = len(subsets)
                subsets.append(nxt)
                todo.append(nxt)
            row[b] = index[nxt]
        moves.append(row)
    accepting = {i for i, sub in enumerate(subsets) if final in sub}
    # trim: keep the states from which an accepting state is reachable
    live = set(accepting)
    changed = True
    while changed:
        changed = False
        for i, row in enumerate(moves):
            if i not in live and any(t in live for t in row.values()):
                live.add(i)
                changed = True
    if 0 not in live:
        return ByteDFA([], frozenset(), None)
    order, seen = [0], {0}                                  # renumber breadth-first
    for i in order:
        for b in sorted(moves[i]):
            t = moves[i][b]
            if t in live and t not in seen:
                seen.add(t)
                order.append(t)
    new = {old: k for k, old in enumerate(order)}
    transitions = [{b: new[t] for b, t in sorted(moves[old].items()) if t in live} for old in order]
    return ByteDFA(transitions, frozenset(new[a] for a in accepting if a in live), 0)


def compile_regex(pattern: str) -> ByteDFA:
    """Compile ``pattern`` (the regex subset of the module doc, matched against the whole text) to a
    byte-level DFA. TypeError if ``pattern`` is not a str; ValueError naming ``pattern`` and the
    position for anything outside the subset."""
    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be a str, got {type(pattern).__name__}")
    tree = _Parser(pattern).parse()
    nfa = _NFA()
    start, final = nfa.build(tree)
    return _subset_construction(nfa, start, final)


# ----------------------------------------------------------------------------- JSON Schema
JSON_STRING = r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"'
JSON_INTEGER = r"-?(?:0|[1-9][0-9]*)"
JSON_NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
PRIMITIVES = {"string": JSON_STRING, "integer": JSON_INTEGER, "number": JSON_NUMBER,
              "boolean": "(?:true|false)", "null": "null"}
ANNOTATIONS = {"title", "description", "$schema"}
KEYWORDS = {"object": {"type", "properties", "required", "additionalProperties"},
            "array": {"type", "items"}}


def _escape(text: str) -> str:
    """``text`` (ASCII) as a regex of the subset matching exactly it."""
    return "".join("\\" + c if c in METACHARS else c for c in text)


def _compact(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def _json_type(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _schema_regex(schema, where: str) -> str:
    if not isinstance(schema, dict):
        raise ValueError(f"schema: {where} must be a JSON object (a schema), got {schema!r}")
    keys = set(schema) - ANNOTATIONS
    typ = schema.get("type")
    if typ is None and not keys & {"enum", "const"}:
        if keys:
            raise ValueError(f"schema: unsupported keyword {sorted(keys)[0]!r} at {where}")
        raise ValueError(f"schema: no 'type' (nor enum/const) at {where}")
    if typ is not None and (not isinstance(typ, str) or typ not in set(PRIMITIVES) | set(KEYWORDS)):
        raise ValueError(f"schema: unsupported type {typ!r} at {where} (one of {sorted(set(PRIMITIVES) | set(KEYWORDS))})")
    if "enum" in keys or "const" in keys:
        extra = keys - {"enum", "const", "type"}
        if extra or {"enum", "const"} <= keys:
            raise ValueError(f"schema: unsupported keyword {sorted(extra or {'const'})[0]!r} beside enum/const at {where}")
        values = schema["enum"] if "enum" in keys else [schema["const"]]
        if not isinstance(values, list) or not values:
            raise ValueError(f"schema: enum at {where} must be a non-empty list")
        for v in values:
            try:
                _compact(v)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"schema: enum value {v!r} at {where} is not JSON ({exc})") from None
            if typ is not None and _json_type(v) != typ and not (typ == "number" and _json_type(v) == "integer"):
                raise ValueError(f"schema: enum value {v!r} at {where} is not of type {typ!r}")
        return "(?:" + "|".join(_escape(_compact(v)) for v in values) + ")"
    allowed = KEYWORDS.get(typ, {"type"})
    extra = keys - allowed
    if extra:
        raise ValueError(f"schema: unsupported keyword {sorted(extra)[0]!r} at {where} for type {typ!r}")
    if typ in PRIMITIVES:
        return PRIMITIVES[typ]
    if typ == "array":
        if "items" not in schema:
            raise ValueError(f"schema: an array needs 'items' at {where}")
        item = _schema_regex(schema["items"], f"{where}.items")
        return r"\[(?:" + item + "(?:," + item + r")*)?\]"
    return _object_regex(schema, where)


def _object_regex(schema: dict, where: str) -> str:
    props = schema.get("properties", {})
    required = schema.get("required", [])
    if schema.get("additionalProperties", False) is not False:
        raise ValueError(f"schema: unsupported additionalProperties {schema['additionalProperties']!r} at {where} "
                         "(only false: no key outside properties)")
    if not isinstance(props, dict):
        raise ValueError(f"schema: properties at {where} must be an object")
    if not isinstance(required, list) or any(not isinstance(r, str) for r in required):
        raise ValueError(f"schema: required at {where} must be a list of property names")
    if len(set(required)) != len(required):
        raise ValueError(f"schema: required at {where} repeats a name")
    for name in required:
        if name not in props:
            raise ValueError(f"schema: required name {name!r} at {where} is not in properties")
    items = [(_escape(_compact(name)) + ":" + _schema_regex(sub, f"{where}.properties.{name}"), name in required)
             for name, sub in props.items()]
    # rest_first[i]: properties i.. when none is written yet; rest_more[i]: after one was written
    rest_first, rest_more = "", ""
    for item, is_required in reversed(items):
        first, more = item + rest_more, "," + item + rest_more
        if is_required:
            rest_first, rest_more = first, more
        else:
            rest_first, rest_more = f"(?:{first}|{rest_first})", f"(?:,{item})?{rest_more}"
    return r"\{" + rest_first + r"\}"


def json_schema_to_regex(schema) -> str:
    """The regex (of the subset) whose language is the compact JSON texts of the instances of
    ``schema`` (the JSON Schema subset of the module doc). ``schema``: a dict or its JSON text."""
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as exc:
            raise ValueError(f"schema: not JSON text ({exc})") from None
    if not isinstance(schema, dict):
        raise TypeError(f"schema must be a dict (or its JSON text), got {type(schema).__name__}")
    return _schema_regex(schema, "schema")


def compile_json_schema(schema) -> ByteDFA:
    """``compile_regex(json_schema_to_regex(schema))``."""
    return compile_regex(json_schema_to_regex(schema))


# ----------------------------------------------------------------------------- token level
def _check_vocab(vocab) -> list:
    if isinstance(vocab, (str, bytes)) or not isinstance(vocab, Sequence):
        raise TypeError(f"vocab must be a sequence of bytes or None (one per token id), got {type(vocab).__name__}")
    if len(vocab) == 0:
        raise ValueError("vocab must not be empty")
    for i, tok in enumerate(vocab):
        if tok is not None and not isinstance(tok, bytes):
            raise TypeError(f"vocab[{i}] must be bytes or None, got {type(tok).__name__}")
    return list(vocab)



def _check_vocab_and_eos(vocab, eos_token_id) -> tuple[list, int]:
    """A matcher's vocabulary (checked by _check_vocab) and its EOS id, an int in [0, len(vocab))."""
    vocab = _check_vocab(vocab)
    eos = check_int("eos_token_id", eos_token_id, minimum=0)
    if eos >= len(vocab):
        raise ValueError(f"eos_token_id must be < len(vocab) = {len(vocab)}, got {eos}")
    return vocab, eos


def _check_token_id(token_id, vocab_size: int, finished: bool) -> None:
    """``advance``'s argument: an int id of the vocabulary, given to a matcher not yet finished."""
    if not is_int(token_id):
        raise TypeError(f"token_id must be an int, got {token_id!r}")
    if not 0 <= token_id < vocab_size:
        raise ValueError(f"token_id must be in [0, {vocab_size}), got {token_id}")
    if finished:
        raise ValueError(f"token_id {token_id}: the matcher is finished (EOS was taken); reset() first")

class TokenMatcher:
    """The grammar's state over a vocabulary: which tokens may come next (module doc)."""

    def __init__(self, grammar: ByteDFA, vocab: Sequence[bytes | None], eos_token_id: int):
        if not isinstance(grammar, ByteDFA):
            raise TypeError(f"grammar must be a compiled grammar (compile_regex / compile_json_schema), "
                            f"got {type(grammar).__name__}")
        self.vocab, eos = _check_vocab_and_eos(vocab, eos_token_id)
        self.grammar, self.eos_token_id = grammar, eos
        self.reset()

    def reset(self) -> None:
        """Back to the empty text."""
        self.state, self.finished = self.grammar.start, False

    def is_accepted(self) -> bool:
        """Whether the text so far is in the language."""
        return self.state in self.grammar.accepting

    def is_finished(self) -> bool:
        """Whether EOS was taken."""
        return self.finished

    def allows(self, token_id: int) -> bool:
        if self.finished:
            return False
        if token_id == self.eos_token_id:
            return self.is_accepted()
        tok = self.vocab[token_id]
        return bool(tok) and self.grammar.walk(self.state, tok) is not None

    def allowed_mask(self) -> torch.Tensor:
        """A new bool tensor (vocab,): True for each token allowed next (brute force: every token's
        bytes walked from the current state)."""
        return torch.tensor([self.allows(t) for t in range(len(self.vocab))], dtype=torch.bool)

    def advance(self, token_id: int) -> None:
        """Take ``token_id`` (it must be allowed; EOS finishes the text)."""
        _check_token_id(token_id, len(self.vocab), self.finished)
        if not self.allows(token_id):
            raise ValueError(f"token_id {token_id} ({self.vocab[token_id]!r}) is not allowed by the grammar here")
        if token_id == self.eos_token_id:
            self.finished = True
        else:
            self.state = self.grammar.walk(self.state, self.vocab[token_id])


# ----------------------------------------------------------------------------- sampling under the mask
def _check_logits_mask(logits, mask, min_rank: int, max_rank: int | None) -> torch.Tensor:
    if not isinstance(logits, torch.Tensor) or not logits.dtype.is_floating_point:
        raise TypeError(f"logits must be a floating torch.Tensor, got "
                        f"{logits.dtype if isinstance(logits, torch.Tensor) else type(logits).__name__}")
    if logits.dim() < min_rank or (max_rank is not None and logits.dim() > max_rank):
        raise ValueError(f"logits must have rank {'2 (batch, vocab)' if max_rank == 2 else '>= 1 (..., vocab)'}, "
                         f"got shape {tuple(logits.shape)}")
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        raise TypeError(f"mask must be a bool torch.Tensor, got "
                        f"{mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__}")
    if mask.shape != logits.shape and mask.shape != logits.shape[-1:]:
        raise ValueError(f"mask must have the logits' shape {tuple(logits.shape)} or (vocab,) = "
                         f"({logits.shape[-1]},), got {tuple(mask.shape)}")
    return mask.to(logits.device).expand(logits.shape)


def mask_logits(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """A new tensor of the logits' dtype and shape (..., vocab): ``logits`` where ``mask`` is True,
    -inf elsewhere. ``mask``: bool, the logits' shape or (vocab,) (the same mask for every row)."""
    mask = _check_logits_mask(logits, mask, 1, None)
    return logits.masked_fill(~mask, float("-inf"))


def constrained_probs(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """float64 (batch, vocab): softmax of ``logits`` over the allowed tokens of each row, exactly 0
    elsewhere (the renormalised restriction). ValueError for NaN or +inf logits or a row with no
    allowed token of finite logit."""
    mask = _check_logits_mask(logits, mask, 2, 2)
    x = logits.to(torch.float64)
    if torch.isnan(x).any():
        raise ValueError("logits contain NaN")
    if (x == float("inf")).any():
        raise ValueError("logits contain +inf")
    x = x.masked_fill(~mask, float("-inf"))
    usable = torch.isfinite(x).any(dim=1)
    if not usable.all():
        row = int((~usable).nonzero()[0])
        raise ValueError(f"mask row {row}: no allowed token has a finite logit")
    z = x - x.max(dim=1, keepdim=True).values
    e = torch.exp(z)
    return e / e.sum(dim=1, keepdim=True)


def _uniforms(uniforms, generator, n: int, name: str = "uniforms") -> torch.Tensor | None:
    if uniforms is not None:
        if not isinstance(uniforms, torch.Tensor) or not uniforms.dtype.is_floating_point:
            raise TypeError(f"{name} must be a floating torch.Tensor of shape ({n},)")
        if uniforms.shape != (n,):
            raise ValueError(f"{name} must have shape ({n},), got {tuple(uniforms.shape)}")
        if n and not bool(((uniforms >= 0) & (uniforms < 1)).all()):
            raise ValueError(f"{name} must lie in [0, 1)")
        return uniforms.to(torch.float64)
    if generator is None:
        raise ValueError("generator: an explicit torch.Generator (or explicit uniforms) is needed")
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    return None


def _inverse_cdf(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    c = torch.cumsum(probs, dim=1)
    idx = (c <= (u * c[:, -1])[:, None]).sum(dim=1)
    last = probs.shape[1] - 1 - (probs.flip(1) > 0).to(torch.int8).argmax(dim=1)
    return torch.minimum(idx, last)


def constrained_sample(logits: torch.Tensor, mask: torch.Tensor, generator: torch.Generator | None = None, *,
                       uniforms: torch.Tensor | None = None) -> torch.Tensor:
    """One token per row (int64, (batch,)) drawn from :func:`constrained_probs`: always an allowed
    token. ``generator`` or ``uniforms`` ((batch,), in [0, 1)) is the randomness (module doc: the
    reference's draw is the inverse CDF in token-id order of one float64 uniform per row)."""
    probs = constrained_probs(logits, mask)
    u = _uniforms(uniforms, generator, probs.shape[0])
    if probs.shape[0] == 0:
        return torch.zeros(0, dtype=torch.int64)
    if u is None:
        u = torch.rand(probs.shape[0], generator=generator, dtype=torch.float64)
    return _inverse_cdf(probs, u.to(probs.device))


def generate_constrained(matcher: TokenMatcher, logits_fn: Callable[[list[int]], torch.Tensor], max_tokens: int,
                         generator: torch.Generator | None = None, *,
                         uniforms: torch.Tensor | None = None) -> list[int]:
    """Sample up to ``max_tokens`` tokens under ``matcher``'s masks from ``logits_fn(tokens so far)``
    (a floating tensor (vocab,)); stops after EOS or at a dead end (no token allowed). Returns the
    token ids drawn, EOS included when drawn; the matcher is left where generation stopped."""
    if not callable(logits_fn):
        raise TypeError(f"logits_fn must be callable, got {type(logits_fn).__name__}")
    max_tokens = check_int("max_tokens", max_tokens, minimum=0)
    u = _uniforms(uniforms, generator, max_tokens)
    tokens: list[int] = []
    for step in range(max_tokens):
        if matcher.is_finished():
            break
        mask = matcher.allowed_mask()
        if not bool(mask.any()):
            break
        logits = logits_fn(list(tokens))
        if (not isinstance(logits, torch.Tensor) or not logits.dtype.is_floating_point
                or logits.shape != mask.shape):
            raise ValueError(f"logits_fn must return a floating tensor of shape {tuple(mask.shape)}, got "
                             f"{tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__}")
        step_u = None if u is None else u[step:step + 1]
        token = int(constrained_sample(logits[None], mask[None], generator, uniforms=step_u)[0])
        matcher.advance(token)
        tokens.append(token)
    return tokens
