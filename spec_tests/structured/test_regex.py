"""The regex subset's language against Python's ``re.fullmatch`` (``re.ASCII``), an independent
oracle: generated patterns, every string up to length 3 over a small alphabet plus generated
strings, read byte by byte through the implementation's matcher over the 256 single bytes."""
from __future__ import annotations

import itertools

from hypothesis import example, given, strategies as st

from spec_tests.structured import oracles as O
from spec_tests.structured.strategies import regex_trees
from spec_tests.structured.walk import accepts, byte_matcher

ALPHABET = "ab-\n"
SHORT = ["".join(p) for n in range(4) for p in itertools.product("ab\n", repeat=n)]
TEXT = st.text(st.sampled_from("ab-.\n0_ é\u0663\u2003\U0001F600"), max_size=6)


def _check_language(impl, tree, strings):
    pattern = O.render(tree)
    matcher = byte_matcher(impl, impl.get("compile_regex")(pattern))
    for s in strings:
        want = O.matches(tree, s)
        got = accepts(matcher, s.encode("utf-8"))
        assert got == want, (f"pattern {pattern!r} on the text {s!r}: the matcher {'accepts' if got else 'rejects'} "
                             f"it, Python's re.fullmatch (re.ASCII) {'matches' if want else 'does not match'}")


@example(tree=("rep", ("lit", "a"), 1, 3), extra=["aaaa"]).via("mutant:bounded_repeat_one_short")
@example(tree=("rep", ("lit", "a"), 2, None), extra=["aaaa"]).via("mutant:open_repeat_is_exact")
@example(tree=("dot",), extra=["\n", "é"]).via("mutant:dot_matches_newline")
@example(tree=("set", frozenset("a"), True), extra=["é", "\U0001F600"]).via("mutant:negated_class_ascii_only")
@example(tree=("alt", [("lit", "a"), ("cat", [])]), extra=[""]).via("boundary: an empty alternative")
@given(tree=regex_trees(ALPHABET), extra=st.lists(TEXT, max_size=6))
def test_language_matches_python_re(impl, tree, extra):
    """A text is accepted (read through TokenMatcher over the byte vocabulary, then is_accepted())
    iff Python's re.fullmatch(pattern, text, re.ASCII) matches: literals, classes and negated
    classes, ``.``, groups, alternation, every quantifier; non-ASCII text (é, a 4-byte emoji) is
    matched only by ``.`` and ``[^...]``."""
    _check_language(impl, tree, SHORT + extra)


@example(tree=("esc", "d"), extra=["\u0663", "7"]).via("boundary: \\d is ASCII: ARABIC-INDIC DIGIT THREE is not a digit")
@given(tree=regex_trees("a0_ ", shorthand=True, max_leaves=4),
       extra=st.lists(st.text(st.sampled_from("a0_ \t\u00e9\u0663\u2003\u00a0"), max_size=4), max_size=8))
def test_shorthand_classes_are_ascii(impl, tree, extra):
    """``\\d`` = [0-9], ``\\w`` = [A-Za-z0-9_], ``\\s`` = [ \\t\\n\\r\\f\\v] (Python's re.ASCII): a
    non-ASCII digit, letter or space is not matched by them (xgrammar reads ``\\s`` as Unicode
    whitespace, outlines-core and llguidance all three as Unicode classes: docs/structured.md)."""
    _check_language(impl, tree, ["", "a", "0", "_", " ", "\t"] + extra)


def test_escapes_and_classes(impl):
    """Fixed patterns with every escape form of the subset, against re.fullmatch."""
    cases = {
        r"\x41\n\t\r\f\v": ["A\n\t\r\f\v", "A\n"],
        r"[a\-z]": ["a", "-", "z", "b"],
        r"[-a][a-]": ["-a", "a-", "aa", "b-"],
        r"[\]\\\^]x": ["]x", "\\x", "^x", "ax"],
        r"[^\n]": ["\n", "a", "é"],
        r"\.\*\+\?\(\)\[\]\{\}\|\$\^\\": [".*+?()[]{}|$^\\", "a"],
        r"(?:ab|c){2}": ["abab", "abc", "cc", "ab"],
        r"a{0}b{3}c{1,}": ["bbbc", "bbbcc", "abbbc", "bbc"],
        r"[0-9a-fA-F]{2,3}": ["0f", "AbC", "g1", "abcd"],
        r"[\d\s]+\w": ["1 a", "\t_", "a", "1 "],
        r"(|a)(b|)": ["", "a", "b", "ab", "ba"],
        r"(((a)))": ["a", ""],
        r"[ab]*?": None,  # not in the subset (lazy): must be rejected, tested in test_bad_input.py
    }
    import re
    for pattern, texts in cases.items():
        if texts is None:
            continue
        matcher = byte_matcher(impl, impl.get("compile_regex")(pattern))
        for s in texts:
            want = re.fullmatch(pattern, s, re.ASCII) is not None
            got = accepts(matcher, s.encode())
            assert got == want, f"pattern {pattern!r} on {s!r}: matcher {got}, re.fullmatch {want}"


# Every character of each class, one at a time (the classes are where a one-off range hides: a
# [A-Z] that stops at Y, a \w without the capitals); the non-ASCII ones check the ASCII reading.
CLASS_PATTERNS = [r"\d", r"\w", r"\s", ".", r"[^a]", r"[\w\-]", r"[^\d\s]", r"[ -~]", r"[A-Z]", r"[a-z0-9_]"]


def test_every_character_of_each_class(impl):
    """Each class pattern of the subset against re.fullmatch (re.ASCII) on each of the 128 ASCII
    characters and six non-ASCII ones (one of each UTF-8 length among them)."""
    import re
    chars = [chr(i) for i in range(128)] + ["\u00e9", "\u0663", "\u2003", "\u00a0", "\U0001F600", "\uffff"]
    for pattern in CLASS_PATTERNS:
        matcher = byte_matcher(impl, impl.get("compile_regex")(pattern))
        wrong = [c for c in chars if accepts(matcher, c.encode("utf-8")) != bool(re.fullmatch(pattern, c, re.ASCII))]
        assert not wrong, (f"pattern {pattern!r}: the matcher disagrees with re.fullmatch (re.ASCII) on "
                           f"{[hex(ord(c)) for c in wrong[:8]]}")


# The byte values where a UTF-8 range starts or stops (Unicode Table 3-7), and their neighbours.
EDGES = (0x00, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xEC, 0xED, 0xEE,
         0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF)
CONTINUATION_EDGES = (0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0)


def _well_formed_char(data: bytes) -> bool:
    try:
        return len(data.decode("utf-8")) == 1
    except UnicodeDecodeError:
        return False


def test_dot_reads_exactly_the_well_formed_utf8_of_one_character(impl):
    """``.`` against Python's UTF-8 decoder on every sequence of one lead byte from the edges of
    Table 3-7 followed by one to three continuation bytes from the continuation edges (0x7F,
    0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0): accepted exactly when it decodes to one character
    (surrogates, overlong forms and code points past U+10FFFF refused)."""
    import itertools
    matcher = byte_matcher(impl, impl.get("compile_regex")("."))
    wrong = []
    for lead in EDGES:
        for n in range(0, 4):
            for tail in itertools.product(CONTINUATION_EDGES, repeat=n):
                data = bytes((lead, *tail))
                if data.startswith(b"\n") or (lead < 0x80 and n) or (0xC0 <= lead < 0xE0 and n > 1) or (0xE0 <= lead < 0xF0 and n > 2):
                    continue                       # ASCII leads take no tail; shorter forms need no longer tails
                if accepts(matcher, data) != _well_formed_char(data):
                    wrong.append(data)
    assert not wrong, (f"'.': {len(wrong)} byte sequences read against Python's UTF-8 decoder, e.g. "
                       f"{[w.hex(' ') for w in wrong[:6]]} ({'accepted' if _well_formed_char(wrong[0]) is False else 'refused'})")


def test_the_largest_repeat_count_is_allowed(impl):
    """MAX_REPEAT (1000) is the largest m or n the subset takes (1001 is refused, test_bad_input):
    a{1000} matches exactly 1000 a's, a{0,1000} up to 1000."""
    for pattern, lengths in (("a{1000}", {999: False, 1000: True, 1001: False}),
                             ("a{0,1000}", {0: True, 1000: True, 1001: False})):
        matcher = byte_matcher(impl, impl.get("compile_regex")(pattern))
        for n, want in lengths.items():
            assert accepts(matcher, b"a" * n) == want, f"pattern {pattern!r} on {n} a's: expected {want}"

