"""Every edit of every small context over a two-token alphabet (bounded-exhaustive enumeration).

The universe: every old context of 0 to 3 tokens over {0, 1} (thorough: 0 to 5) whose first token
is 0 (the two tokens are symmetric: relabelling both contexts changes nothing), every edit span
``0 <= start <= stop <= len(old)``, every replacement of 0 to 2 tokens over {0, 1}, every next turn
of 0 or 1 token, blocks of 1, 2 and 3 tokens. For each (the new context non-empty):

- ``compact`` is the splice;
- ``hit_after_edit`` is the hit by definition (oracles.py ``brute_hit``), which the hash-chained
  block cache of concept ``prefix_cache`` measures too;
- ``edit_cost`` (unit bytes and rate) is (hit, len(new) - hit, prefill, len(new), prefill).

Cases per depth: see ``CASES`` (the docs page states them).
"""
from __future__ import annotations

import itertools

import pytest
from hypothesis import settings

from spec_tests.compaction.oracles import brute_hit, prefix_cache_hit

ALPHABET = (0, 1)
REPLACEMENTS = [list(r) for n in range(3) for r in itertools.product(ALPHABET, repeat=n)]
TURNS = [[], [1]]
CASES = {3: 2328, 5: 21408}   # (old, edit, replacement, turn, block size) cases with a non-empty new context


def contexts(max_len: int):
    yield []
    for n in range(1, max_len + 1):
        for rest in itertools.product(ALPHABET, repeat=n - 1):
            yield [0, *rest]


def universe(max_len: int):
    for old in contexts(max_len):
        for start in range(len(old) + 1):
            for stop in range(start, len(old) + 1):
                for rep in REPLACEMENTS:
                    for turn in TURNS:
                        new = old[:start] + rep + old[stop:] + turn
                        if new:
                            for b in (1, 2, 3):
                                yield old, start, stop, rep, turn, new, b


def test_every_small_edit(impl):
    """compact, hit_after_edit and edit_cost on every case of the universe (module doc)."""
    max_len = 5 if settings.get_current_profile_name() == "thorough" else 3
    compact, hit_after_edit, edit_cost = (impl.get(n) for n in ("compact", "hit_after_edit", "edit_cost"))
    count = 0
    spliced: dict = {}
    for old, start, stop, rep, turn, new, b in universe(max_len):
        key = (tuple(old), start, stop, tuple(rep))
        if key not in spliced:
            spliced[key] = list(compact(old, start, stop, rep))
            assert spliced[key] == old[:start] + rep + old[stop:], f"compact({old}, {start}, {stop}, {rep}) = {spliced[key]}"
        want = brute_hit(old, new, b)
        got = hit_after_edit(old, new, block_size=b)
        assert got == want, (f"hit_after_edit({old}, {new}, block_size={b}) = {got}; the cache holding {old} serves "
                             f"{want} tokens of {new} (the edit {old}[{start}:{stop}] -> {rep}, then {turn})")
        cost = edit_cost(old, new, block_size=b, kv_bytes_per_token=1, prefill_rate=1.0)
        assert tuple(cost) == (want, len(new) - want, len(new) - want, len(new), len(new) - want), (
            f"edit_cost({old}, {new}, block_size={b}, kv_bytes_per_token=1, prefill_rate=1.0) = {tuple(cost)}")
        count += 1
    assert count == CASES[max_len], f"{count} cases; the universe stated has {CASES[max_len]}"


@pytest.mark.parametrize("max_len", [3])
def test_the_oracles_agree(max_len):
    """The two oracles (the definition, the hash-chained cache) agree on the universe (a check of the
    test's own oracles; no implementation is called)."""
    for old, _, _, _, _, new, b in universe(max_len):
        assert brute_hit(old, new, b) == prefix_cache_hit(old, new, b), (old, new, b)
