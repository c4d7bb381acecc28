"""The memory law of parallel sampling (course 08.06: "sublinear in memory"): the closed forms
``shared_blocks``, ``independent_blocks`` and ``copy_on_write_count`` against

- the abstract block model of oracles.py (``simulate``), for every interleaving of the branches'
  one-token appends of every small pattern (prompt 0..5 tokens, blocks of 1..3, 1..3 branches of
  0..2 new tokens each) and for random larger patterns and orders;
- the implementation's own ``BranchKV``, measured: a prompt added, forked into the branches,
  appended in a random interleaving (``blocks_in_use`` and the copies its appends return), then the
  branches freed in a random order, each giving back exactly the blocks it alone held, the others
  reading on unchanged;
- the saving in closed form: independent - shared = (n - 1) x full prompt blocks + (the silent
  branches beyond one, when the prompt ends inside a block).
"""
from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import example, given, settings, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from spec_tests.parallel_sampling.oracles import Branches, closed_forms, simulate
from spec_tests.parallel_sampling.strategies import patterns

NAMES = ("shared_blocks", "independent_blocks", "copy_on_write_count")


def _interleavings(ks: list):
    """Every distinct order of one-token appends, branch i appearing ks[i] times."""
    return set(itertools.permutations([i for i, k in enumerate(ks) for _ in range(k)]))


def _got(impl, p, ks, b) -> tuple:
    return tuple(impl.get(name)(p, list(ks), b) for name in NAMES)


def test_closed_forms_equal_every_interleaving(impl):
    """Every pattern of the small universe, every order of the appends: the model's blocks in use
    and copies are the closed forms (the counts do not depend on the order), and so are the
    implementation's functions. 702 patterns, 5,274 orders."""
    checked = 0
    for p in range(6):
        for b in range(1, 4):
            for n in range(1, 4):
                for ks in itertools.product(range(3), repeat=n):
                    want = closed_forms(p, list(ks), b)
                    for order in _interleavings(ks):
                        in_use, copies = simulate(p, list(ks), b, list(order))
                        assert (in_use, copies) == (want[0], want[2]), (p, ks, b, order, in_use, copies, want)
                        checked += 1
                    got = _got(impl, p, ks, b)
                    assert got == want, (f"(shared_blocks, independent_blocks, copy_on_write_count)({p}, {list(ks)}, {b}) = "
                                         f"{got}; the block model gives {want}")
    assert checked == 5274


@example(pattern=(5, [4, 4, 4], 2, [0, 1, 2] * 4)).via("mutant:shared_counts_partial_once mutant:copies_for_every_branch")
@example(pattern=(5, [0, 3], 2, [1, 1, 1])).via("mutant:silent_branch_ignored")
@example(pattern=(4, [1, 1], 2, [0, 1])).via("mutant:independent_floor")
@given(pattern=patterns())
def test_closed_forms_equal_the_model(impl, pattern):
    """Larger random patterns in a random order: the closed forms equal the model's counts."""
    p, ks, b, order = pattern
    in_use, copies = simulate(p, ks, b, order)
    independent = sum(-(-(p + k) // b) for k in ks)
    got = _got(impl, p, ks, b)
    assert got == (in_use, independent, copies), (
        f"(shared_blocks, independent_blocks, copy_on_write_count)({p}, {ks}, {b}) = {got}; the block model "
        f"holds {in_use} blocks after {copies} copies, independent copies {independent}")


@example(pattern=(5, [4, 4, 4], 2, [0, 1, 2] * 4), frees=[1, 0, 2]).via(
    "mutant:fork_copies_prompt mutant:cow_skips_data mutant:free_scrubs_blocks")
@example(pattern=(3, [0, 2], 2, [1, 1]), frees=[0, 1]).via("mutant:cow_skips_data mutant:free_scrubs_blocks")
@given(pattern=patterns(max_prompt=7, max_n=3, max_new=4, max_block=3), frees=st.permutations(range(3)))
@settings(deadline=None)
def test_measured_through_branch_kv(impl, pattern, frees):
    """The implementation's BranchKV holds the closed form's blocks after the branches' appends in
    any order, its appends return the closed form's number of copies, every branch reads back the
    prompt and its own tokens, and freeing the branches (in any order) gives back exactly each
    one's own blocks while the others read on unchanged."""
    p, ks, b, order = pattern
    n = len(ks)
    cls = impl.get("BranchKV")
    pool = max(1, closed_forms(p, ks, b)[0])
    kv = cls(pool, b)
    prompt = torch.arange(1, p + 1, dtype=torch.float32).reshape(1, p, 1, 1)
    kv.add(0, prompt, -prompt)
    for i in range(1, n):
        kv.fork(0, i)
    model = Branches(b)
    model.add(0, [float(x) for x in range(1, p + 1)])
    for i in range(1, n):
        model.fork(0, i)
    copies, value = 0, 1000.0
    for i in order:
        one = torch.full((1, 1, 1, 1), value)
        copies += len(list(kv.append(i, one, -one)))
        model.append(i, [value])
        value += 1
    shared, _, want_copies = closed_forms(p, ks, b)
    assert kv.blocks_in_use == shared, (f"{n} branches of a {p}-token prompt (blocks of {b}) appended {ks} tokens in "
                                        f"the order {order}: {kv.blocks_in_use} blocks in use; the closed form: {shared}")
    assert copies == want_copies, f"the appends returned {copies} copies; the closed form: {want_copies}"
    live = list(range(n))
    for i in [f for f in frees if f < n]:
        own, before = model.own_blocks(i), kv.num_free_blocks
        kv.free(i)
        model.free(i)
        live.remove(i)
        assert kv.num_free_blocks - before == own, (
            f"freeing branch {i} gave back {kv.num_free_blocks - before} blocks; it alone held {own} (pattern {pattern})")
        for j in live:
            k, v = kv.read(j)
            want = torch.tensor(model.contents[j], dtype=torch.float32)
            assert torch.equal(k.flatten(), want) and torch.equal(v.flatten(), -want), (
                f"after freeing branch {i}, branch {j} reads K {k.flatten().tolist()}, V {v.flatten().tolist()}; "
                f"it holds K {want.tolist()}, V = -K (pattern {pattern}, frees {frees})")
    if not live:
        assert kv.num_free_blocks == pool, "every block is free once every branch is"


@given(pattern=patterns(max_prompt=40, max_n=8, max_new=40, max_block=16))
def test_saving_closed_form(impl, pattern):
    """independent - shared = (n - 1) x (prompt // B) + [prompt % B > 0] x max(0, silent branches - 1):
    sublinear, since only the branches' own tokens grow the shared pool."""
    p, ks, b, _ = pattern
    n, silent = len(ks), sum(1 for k in ks if k == 0)
    got = impl.get("independent_blocks")(p, ks, b) - impl.get("shared_blocks")(p, ks, b)
    want = (n - 1) * (p // b) + (max(0, silent - 1) if p % b else 0)
    assert got == want, f"independent - shared = {got} for ({p}, {ks}, {b}); the saving is {want}"


def test_worked_numbers(impl):
    """docs/parallel_sampling.md's example: a 2,000-token prompt in blocks of 16, n = 8 branches of
    1,000 tokens (each branch's KV holds prompt + 999): shared 125 + 8 x (188 - 125) = 629 blocks,
    independent 8 x 188 = 1,504; a 2,001-token prompt (partial last block): 125 + 8 x 63 = 629 and
    7 copies."""
    assert _got(impl, 2000, [999] * 8, 16) == (629, 1504, 0)
    assert _got(impl, 2001, [999] * 8, 16) == (629, 1504, 7)
    assert _got(impl, 2000, [0] * 8, 16) == (125, 1000, 0)


# --- bad input ---------------------------------------------------------------------------------
BAD = [
    Bad("negative prompt_len", dict(prompt_len=-1), ValueError, ("prompt_len",)),
    Bad("float prompt_len", dict(prompt_len=4.0), TypeError, ("prompt_len",)),
    Bad("bool prompt_len", dict(prompt_len=True), TypeError, ("prompt_len",)),
    Bad("new_tokens an int", dict(new_tokens=3), TypeError, ("new_tokens",)),
    Bad("no branches", dict(new_tokens=[]), ValueError, ("new_tokens",)),
    Bad("negative new_tokens", dict(new_tokens=[2, -1]), ValueError, ("new_tokens",)),
    Bad("float new_tokens", dict(new_tokens=[2.0]), TypeError, ("new_tokens",)),
    Bad("zero block_size", dict(block_size=0), ValueError, ("block_size",)),
    Bad("None block_size", dict(block_size=None), TypeError, ("block_size",)),
]


VALID = dict(prompt_len=5, new_tokens=[1, 2], block_size=2)


@bad_cases(BAD)
def test_shared_blocks_rejects_bad_input(impl, bad):
    """prompt_len an int >= 0, new_tokens a non-empty list/tuple of ints >= 0, block_size an int >= 1."""
    assert_rejects(impl.get("shared_blocks"), VALID, bad)


@bad_cases(BAD)
def test_independent_blocks_rejects_bad_input(impl, bad):
    """As shared_blocks."""
    assert_rejects(impl.get("independent_blocks"), VALID, bad)


@bad_cases(BAD)
def test_copy_on_write_count_rejects_bad_input(impl, bad):
    """As shared_blocks."""
    assert_rejects(impl.get("copy_on_write_count"), VALID, bad)
