"""Context compaction (course 07.11): what an edit of the history leaves of the prefix cache, and
what the re-prefill costs.

- ``compact`` is the slice-and-splice, the arguments untouched; ``common_prefix`` the longest
  common prefix (brute force);
- ``hit_after_edit`` equals the hit by its definition (oracles.py ``brute_hit``), a hash-chained
  block cache's hit measured through concept ``prefix_cache``'s reference, and the closed form
  ``B x floor(min(common prefix, len(new) - 1) / B)``;
- the trap, stated as properties: an edit at ``start`` (whose first new token differs from the one
  it replaces) caps the hit at ``start`` rounded down to a block, however many tokens after the
  edit are unchanged (they are shifted); a context that only grows keeps its whole blocks;
- ``edit_cost`` and ``break_even_steps`` equal the closed forms (exact fractions), with the
  worked numbers of docs/compaction.md; bad input.
"""
from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import assume, example, given, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from reference.compaction import EditCost
from spec_tests.compaction.oracles import brute_hit, cost, lcp, prefix_cache_hit

tokens = st.lists(st.integers(0, 3), max_size=24)
blocks = st.integers(1, 5)


@st.composite
def edits(draw, alphabet: int = 4, max_len: int = 24):
    """(old, start, stop, replacement, turn): an edit of ``old`` and the next turn's tokens."""
    old = draw(st.lists(st.integers(0, alphabet - 1), max_size=max_len), label="old")
    start = draw(st.integers(0, len(old)), label="start")
    stop = draw(st.integers(start, len(old)), label="stop")
    replacement = draw(st.lists(st.integers(0, alphabet - 1), max_size=6), label="replacement")
    turn = draw(st.lists(st.integers(0, alphabet - 1), max_size=4), label="turn")
    return old, start, stop, replacement, turn


@example(edit=([1, 2, 3, 4, 5], 1, 3, [9], [])).via("mutant:compact_skips_one mutant:compact_keeps_removed")
@given(edit=edits())
def test_compact_splices(impl, edit):
    """compact(context, start, stop, r) == context[:start] + r + context[stop:], a new list; the
    arguments are not modified."""
    old, start, stop, replacement, _ = edit
    old_copy, rep_copy = list(old), list(replacement)
    got = impl.get("compact")(old, start, stop, replacement)
    want = old[:start] + replacement + old[stop:]
    assert list(got) == want, f"compact({old}, {start}, {stop}, {replacement}) = {list(got)}; expected {want}"
    assert old == old_copy and replacement == rep_copy, "compact modified its arguments"


@example(a=[1, 2, 3], b=[1, 5, 3]).via("mutant:common_prefix_counts_matches")
@example(a=[1, 2], b=[1, 2, 3]).via("boundary: one context a prefix of the other")
@given(a=tokens, b=tokens)
def test_common_prefix(impl, a, b):
    """common_prefix is the length of the longest common prefix (brute force), symmetric."""
    got = impl.get("common_prefix")(a, b)
    assert got == lcp(a, b) == impl.get("common_prefix")(b, a), f"common_prefix({a}, {b}) = {got}; expected {lcp(a, b)}"


@example(edit=([0, 1, 2, 3, 4, 5, 6, 7], 8, 8, [], []), block_size=4).via("mutant:last_token_served")
@example(edit=([0, 1, 2, 3, 4, 5, 6, 7], 5, 8, [], [9]), block_size=4).via("mutant:hit_ignores_blocks")
@example(edit=([0, 1, 2, 3, 4, 5, 6, 7], 2, 4, [], [1]), block_size=2).via("mutant:hit_content_only")
@given(edit=edits(), block_size=blocks)
def test_hit_after_edit_is_the_block_aligned_common_prefix(impl, edit, block_size):
    """The hit of the compacted context (plus the next turn) after the old one equals the hit by
    definition, the hash-chained block cache's measured hit and the closed form."""
    old, start, stop, replacement, turn = edit
    new = old[:start] + replacement + old[stop:] + turn
    assume(new)
    got = impl.get("hit_after_edit")(old, new, block_size=block_size)
    closed = block_size * (min(lcp(old, new), len(new) - 1) // block_size)
    assert got == brute_hit(old, new, block_size) == closed, (
        f"hit_after_edit({old}, {new}, block_size={block_size}) = {got}; the cache serves {closed} tokens: the "
        f"common prefix ({lcp(old, new)} tokens, never the last token of new) in whole blocks")
    assert prefix_cache_hit(old, new, block_size) == closed, "test bug: prefix_cache disagrees with the closed form"


@example(old=list(range(12)), start=4, length=4, summary=[], block_size=4).via("mutant:hit_content_only")
@given(old=st.lists(st.integers(0, 50), min_size=1, max_size=40, unique=True), start=st.integers(0, 40),
       length=st.integers(0, 20), summary=st.lists(st.integers(60, 70), max_size=4), block_size=blocks)
def test_an_edit_caps_the_hit_at_its_position(impl, old, start, length, summary, block_size):
    """The trap: replacing old[start:start + length] by a summary whose tokens are new caps the hit
    at start (in whole blocks), however much of the context after the edit is unchanged -- those
    tokens are shifted (or follow another history), so their cached K/V are not theirs."""
    start = min(start, len(old))
    stop = min(len(old), start + length)
    new = impl.get("compact")(old, start, stop, summary) + [55]
    got = impl.get("hit_after_edit")(old, new, block_size=block_size)
    cap = len(old) if not summary and stop == start else start
    assert got == block_size * (min(cap, len(new) - 1) // block_size), (
        f"an edit at {start} (old {old}, new {new}, blocks of {block_size}): hit {got}, expected "
        f"{block_size * (min(cap, len(new) - 1) // block_size)}")


@example(old=[1, 2, 3, 4], turn=[6], block_size=2).via("mutant:last_token_served")
@given(old=tokens, turn=st.lists(st.integers(0, 3), min_size=1, max_size=5), block_size=blocks)
def test_a_growing_context_keeps_its_blocks(impl, old, turn, block_size):
    """No edit (the context only grows by the next turn): every whole block of the old context
    hits; resending it unchanged hits all but the blocks holding its last token."""
    got = impl.get("hit_after_edit")(old, old + turn, block_size=block_size)
    assert got == block_size * (len(old) // block_size), (
        f"appending {turn} to {old}: hit {got}; every whole block ({block_size * (len(old) // block_size)}) hits")
    if old:
        same = impl.get("hit_after_edit")(old, old, block_size=block_size)
        assert same == block_size * ((len(old) - 1) // block_size), f"resending {old} unchanged: hit {same}"


rates = st.sampled_from([1.0, 31250.0, 4096.0, 0.5])
bytes_per_token = st.sampled_from([0, 1, 131072, 2.5])


@example(edit=([0, 1, 2, 3, 4, 5, 6, 7], 2, 6, [9], [3]), block_size=2, bpt=131072, rate=31250.0).via(
    "mutant:prefill_ignores_hit mutant:resident_is_prefill mutant:seconds_inverted")
@given(edit=edits(), block_size=blocks, bpt=bytes_per_token, rate=rates)
def test_edit_cost_closed_forms(impl, edit, block_size, bpt, rate):
    """edit_cost: hit, prefill tokens = len(new) - hit, K/V bytes written = prefill x bytes per
    token, K/V bytes held = len(new) x bytes per token, seconds = prefill / rate (exact fractions)."""
    old, start, stop, replacement, turn = edit
    new = old[:start] + replacement + old[stop:] + turn
    assume(new)
    got = impl.get("edit_cost")(old, new, block_size=block_size, kv_bytes_per_token=bpt, prefill_rate=rate)
    want = cost(old, new, block_size, bpt, rate)
    fields = ("hit_tokens", "prefill_tokens", "prefill_kv_bytes", "resident_kv_bytes", "prefill_seconds")
    for name, w in zip(fields, want):
        g = getattr(got, name)
        assert math.isclose(g, float(w), rel_tol=1e-12, abs_tol=0.0), (
            f"edit_cost({old}, {new}, block_size={block_size}, kv_bytes_per_token={bpt}, prefill_rate={rate})"
            f".{name} = {g!r}; expected {float(w)!r}")
    assert got.hit_tokens == impl.get("hit_after_edit")(old, new, block_size=block_size)


def _cost(impl, old, new, **kw):
    return impl.get("edit_cost")(old, new, **kw)


@example(keep=(300, 1.0), compacted=(100, 4.0), bandwidth=2.0).via("mutant:break_even_inverted")
@example(keep=(100, 1.0), compacted=(300, 1.0), bandwidth=2.0).via("boundary: no extra prefill, no saving: 0.0")
@example(keep=(100, 1.0), compacted=(100, 2.0), bandwidth=2.0).via("boundary: extra prefill, nothing saved: inf")
@example(keep=(101, 1.0), compacted=(100, 2.0), bandwidth=2.0).via("boundary: one byte saved: finite, 2.0 steps")
@given(keep=st.tuples(st.integers(0, 10**6), st.floats(0, 1e3)), compacted=st.tuples(st.integers(0, 10**6),
       st.floats(0, 1e3)), bandwidth=st.sampled_from([1.0, 2.0, 3.35e12]))
def test_break_even_steps_closed_form(impl, keep, compacted, bandwidth):
    """break_even_steps = (extra prefill seconds) / (saved bytes / bandwidth); 0 when compaction
    costs no extra prefill, inf when it costs some and saves no bytes."""
    edit_cost_type = impl.get("EditCost")
    k = edit_cost_type(0, 0, 0.0, float(keep[0]), keep[1])
    c = edit_cost_type(0, 0, 0.0, float(compacted[0]), compacted[1])
    got = impl.get("break_even_steps")(k, c, bandwidth=bandwidth)
    extra, saved = Fraction(compacted[1]) - Fraction(keep[1]), keep[0] - compacted[0]
    if extra <= 0:
        assert got == 0.0, f"extra prefill {float(extra)} s <= 0: pays at once (0.0), got {got!r}"
    elif saved <= 0:
        assert got == math.inf, f"extra prefill {float(extra)} s and nothing saved: never (inf), got {got!r}"
    else:
        want = extra / (Fraction(saved) / Fraction(bandwidth))
        assert math.isclose(got, float(want), rel_tol=1e-12), f"break_even_steps = {got!r}; expected {float(want)!r}"


def test_defaults(impl):
    """Omitted arguments are the documented defaults: blocks of 1 token, 131,072 bytes per token,
    31,250 tokens/s, 3.35 TB/s, an empty replacement."""
    old, new = [1, 2, 3, 4, 5], [1, 2, 3, 9, 9]
    assert impl.get("compact")(old, 1, 3) == [1, 4, 5], "compact without a replacement drops the span"
    assert impl.get("hit_after_edit")(old, new) == 3, "hit_after_edit's default block_size is 1"
    got = impl.get("edit_cost")(old, new)
    want = (3, 2, 2 * 131072, 5 * 131072, 2 / 31250)
    assert tuple(got) == pytest.approx(want, rel=1e-12), f"edit_cost({old}, {new}) = {tuple(got)}; the defaults give {want}"
    keep, compacted = _costs()
    steps = impl.get("break_even_steps")(keep, compacted)
    assert steps == pytest.approx(0.3 / (4.0 / 3.35e12), rel=1e-12), f"break_even_steps default bandwidth: {steps!r}"


def test_worked_numbers(impl):
    """docs/compaction.md's example (Llama-3-8B bf16 on an H100, blocks of 16, the defaults): a
    100,000-token history, then a 100-token turn. Kept: hit 100,000, prefill 100 tokens, 3.2 ms,
    13.1 GB held. Compacted by summarising tokens [4,000, 96,000) into 2,000: 10,100 tokens, hit
    4,000, prefill 6,100 tokens (0.8 GB written), 195.2 ms, 1.32 GB held; break-even after
    0.192 s / (11.8 GB / 3.35 TB/s) = 54.5 decode steps. The same cut at the front (tokens
    [0, 92,000) into 2,000): hit 0, 10,100 tokens prefilled, 323.2 ms, break-even after 90.9. A
    sliding window that keeps a 2,000-token system prompt and drops the oldest 1,000 tokens after
    it: hit 2,000, 97,100 tokens prefilled (3.107 s) to save 1,000 tokens of KV: break-even after
    79,333 decode steps."""
    history = list(range(100_000))
    turn = [7] * 100
    summary = [5] * 2000

    def check(cost, what: str, **want) -> None:
        for name, value in want.items():
            got = getattr(cost, name)
            assert got == pytest.approx(value, rel=1e-12), (
                f"{what}: edit_cost(...).{name} = {got!r}; expected {value!r} (blocks of 16, the default "
                f"131,072 bytes per token and 31,250 tokens/s; the cache holds the 100,000-token history)")

    keep = _cost(impl, history, history + turn, block_size=16)
    check(keep, "the history kept, plus a 100-token turn", hit_tokens=100_000, prefill_tokens=100,
          prefill_seconds=0.0032, resident_kv_bytes=100_100 * 131072, prefill_kv_bytes=100 * 131072)
    compacted_ctx = impl.get("compact")(history, 4000, 96000, summary)
    assert len(compacted_ctx) == 10_000, f"compact(history, 4000, 96000, <2,000 tokens>) has {len(compacted_ctx)} tokens"
    comp = _cost(impl, history, compacted_ctx + turn, block_size=16)
    check(comp, "[4,000, 96,000) summarised into 2,000 tokens, plus the turn", hit_tokens=4000, prefill_tokens=6100,
          prefill_kv_bytes=6100 * 131072, resident_kv_bytes=10_100 * 131072, prefill_seconds=0.1952)
    steps = impl.get("break_even_steps")(keep, comp)
    assert steps == pytest.approx(0.192 / (90_000 * 131072 / 3.35e12), rel=1e-12) and 54.5 < steps < 54.6, (
        f"break_even_steps(kept, compacted) = {steps!r}; expected 0.192 s / (90,000 x 131,072 B / 3.35 TB/s) = 54.52")
    front = _cost(impl, history, impl.get("compact")(history, 0, 92000, summary) + turn, block_size=16)
    check(front, "[0, 92,000) summarised into 2,000 tokens, plus the turn", hit_tokens=0, prefill_tokens=10_100,
          prefill_seconds=0.3232)
    steps = impl.get("break_even_steps")(keep, front)
    assert 90.8 < steps < 90.9, f"break_even_steps(kept, cut at the front) = {steps!r}; expected 0.32 s / 3.52 ms = 90.87"
    window = _cost(impl, history, impl.get("compact")(history, 2000, 3000, []) + turn, block_size=16)
    check(window, "a sliding window dropping [2,000, 3,000), plus the turn", hit_tokens=2000, prefill_tokens=97_100,
          prefill_seconds=3.1072)
    steps = impl.get("break_even_steps")(keep, window)
    assert steps == pytest.approx(3.104 / (1000 * 131072 / 3.35e12), rel=1e-12) and 79_333 < steps < 79_334, (
        f"break_even_steps(kept, sliding window) = {steps!r}; expected 3.104 s / (1,000 x 131,072 B / 3.35 TB/s)")


# --- bad input ---------------------------------------------------------------------------------
def _ids(name: str) -> list[Bad]:
    return [Bad(f"{name} a str", {name: "abc"}, TypeError, (name,)),
            Bad(f"{name} of floats", {name: [1.0]}, TypeError, (name,)),
            Bad(f"{name} of bools", {name: [True]}, TypeError, (name,)),
            Bad(f"negative id in {name}", {name: [1, -1]}, ValueError, (name,)),
            Bad(f"{name} id past 2**32", {name: [2**32]}, ValueError, (name,))]


COMPACT_BAD = _ids("context") + _ids("replacement") + [
    Bad("negative start", dict(start=-1), ValueError, ("start",)),
    Bad("start past the end", dict(start=6, stop=6), ValueError, ("start",)),
    Bad("stop before start", dict(start=3, stop=2), ValueError, ("stop",)),
    Bad("stop past the end", dict(stop=6), ValueError, ("stop",)),
    Bad("float start", dict(start=1.0), TypeError, ("start",)),
    Bad("bool stop", dict(stop=True), TypeError, ("stop",)),
]


@bad_cases(COMPACT_BAD)
def test_compact_rejects_bad_input(impl, bad):
    """context and replacement lists/tuples of ints in [0, 2**32); 0 <= start <= stop <= len(context)."""
    assert_rejects(impl.get("compact"), dict(context=[1, 2, 3, 4, 5], start=1, stop=3, replacement=[9]), bad)


@bad_cases(_ids("a") + _ids("b"))
def test_common_prefix_rejects_bad_input(impl, bad):
    """Both contexts lists/tuples of ints in [0, 2**32)."""
    assert_rejects(impl.get("common_prefix"), dict(a=[1, 2], b=[1, 3]), bad)


HIT_BAD = _ids("old") + _ids("new") + [
    Bad("empty new", dict(new=[]), ValueError, ("new",)),
    Bad("zero block_size", dict(block_size=0), ValueError, ("block_size",)),
    Bad("float block_size", dict(block_size=2.0), TypeError, ("block_size",)),
]


@bad_cases(HIT_BAD)
def test_hit_after_edit_rejects_bad_input(impl, bad):
    """old and new contexts (new non-empty); block_size an int >= 1."""
    assert_rejects(impl.get("hit_after_edit"), dict(old=[1, 2, 3], new=[1, 2, 4], block_size=1), bad)


COST_BAD = HIT_BAD + [
    Bad("negative kv_bytes_per_token", dict(kv_bytes_per_token=-1), ValueError, ("kv_bytes_per_token",)),
    Bad("nan kv_bytes_per_token", dict(kv_bytes_per_token=float("nan")), ValueError, ("kv_bytes_per_token",)),
    Bad("str kv_bytes_per_token", dict(kv_bytes_per_token="2"), TypeError, ("kv_bytes_per_token",)),
    Bad("zero prefill_rate", dict(prefill_rate=0.0), ValueError, ("prefill_rate",)),
    Bad("inf prefill_rate", dict(prefill_rate=float("inf")), ValueError, ("prefill_rate",)),
    Bad("bool prefill_rate", dict(prefill_rate=True), TypeError, ("prefill_rate",)),
]


@bad_cases(COST_BAD)
def test_edit_cost_rejects_bad_input(impl, bad):
    """As hit_after_edit; kv_bytes_per_token a finite real >= 0, prefill_rate a finite real > 0."""
    assert_rejects(impl.get("edit_cost"), dict(old=[1, 2, 3], new=[1, 2, 4], block_size=1, kv_bytes_per_token=2,
                                               prefill_rate=10.0), bad)


def _costs():
    return EditCost(3, 1, 2.0, 8.0, 0.1), EditCost(0, 4, 8.0, 4.0, 0.4)


BREAK_EVEN_BAD = [
    Bad("keep not an EditCost", dict(keep=(1, 2)), TypeError, ("keep",)),
    Bad("compacted None", dict(compacted=None), TypeError, ("compacted",)),
    Bad("keep with negative seconds", dict(keep=EditCost(3, 1, 2.0, 8.0, -0.1)), ValueError, ("keep",)),
    Bad("compacted with nan bytes held", dict(compacted=EditCost(0, 4, 8.0, float("nan"), 0.4)), ValueError,
        ("compacted",)),
    Bad("zero bandwidth", dict(bandwidth=0.0), ValueError, ("bandwidth",)),
    Bad("negative bandwidth", dict(bandwidth=-1.0), ValueError, ("bandwidth",)),
    Bad("str bandwidth", dict(bandwidth="1e12"), TypeError, ("bandwidth",)),
]


@bad_cases(BREAK_EVEN_BAD)
def test_break_even_steps_rejects_bad_input(impl, bad):
    """keep and compacted EditCosts; bandwidth a finite real > 0."""
    keep, compacted = _costs()
    assert_rejects(impl.get("break_even_steps"), dict(keep=keep, compacted=compacted, bandwidth=1e12), bad)
