"""The block allocator (course 03.06-03.08): pinned examples and bad input.

The randomized properties (a state machine against the reference, with a toy KV store) are in
test_state_machine.py.
"""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases

# Each of these takes milliseconds (a second under the thorough profile); a submission that hangs
# (say, a free() that waits for a sibling) gets its verdict in 30 s instead of the default 300.
pytestmark = pytest.mark.timeout(30)


def snapshot(alloc) -> tuple:
    """Everything observable: free blocks, each live sequence's table and length, every ref count."""
    seqs = {s: (alloc.block_table(s), alloc.num_tokens(s)) for s in alloc.sequences()}
    return alloc.num_free_blocks, seqs, [alloc.ref_count(b) for b in range(alloc.num_blocks)]


def test_worked_example(impl):
    """The example of docs/paged.md, step by step: tables, copy lists, slots, ref counts.

    The contract does not say which free block a call takes, so the example names blocks by the
    part they play (``p0``, ``p1``: p's first two blocks; ``q1``: q's copy of ``p1``; ...) and checks
    the structure: which tables share which blocks, what is copied where, which slots the
    positions get, every ref count and the free count. (The reference takes 0, 1, 2, ... in this
    example; spec_tests/bundled/test_paged_internals.py pins those ids for the bundled allocators.)"""
    a = impl.get("BlockAllocator")(8, 4)
    in_use: set = set()

    def fresh(blocks, k, what):
        """``blocks`` are ``k`` distinct blocks of the pool, none of them in use before."""
        assert len(blocks) == k and len(set(blocks)) == k, f"{what}: {blocks}; expected {k} distinct blocks"
        assert all(isinstance(b, int) and 0 <= b < 8 and b not in in_use for b in blocks), (
            f"{what}: {blocks}; expected blocks of the pool [0, 8) that no sequence holds (held: {sorted(in_use)})")
        in_use.update(blocks)
        return blocks

    p0, p1 = fresh(a.allocate("p", 6), 2, 'allocate("p", 6)')  # ceil(6/4) = 2 blocks
    assert a.slot_mapping("p", [0, 3, 4, 5]) == [4 * p0, 4 * p0 + 3, 4 * p1, 4 * p1 + 1]
    a.fork("p", "q")                                           # shares both blocks, takes none
    assert a.block_table("q") == [p0, p1]
    assert (a.ref_count(p0), a.ref_count(p1), a.num_free_blocks) == (2, 2, 6)
    copies = a.append("q", 1)                                  # partial shared last block: copy
    q = a.block_table("q")
    assert q[0] == p0 and len(q) == 2
    (q1,) = fresh([q[1]], 1, "q's last block after copy-on-write")
    assert [tuple(c) for c in copies] == [(p1, q1)]
    assert a.ref_count(p1) == 1 and a.ref_count(q1) == 1 and a.slot_mapping("q", [6]) == [4 * q1 + 2]
    assert a.append("p", 2) == [] and a.block_table("p") == [p0, p1]   # p1 is p's alone now
    assert a.append("p", 1) == []                              # p1 is full: a new block
    p_table = a.block_table("p")
    assert p_table[:2] == [p0, p1] and len(p_table) == 3
    (p2,) = fresh(p_table[2:], 1, "p's new block")
    a.fork("p", "r")
    copies = a.append("r", 3)                                  # p2 partly filled and shared: copy
    r = a.block_table("r")
    assert r[:2] == [p0, p1] and len(r) == 3
    (r2,) = fresh(r[2:], 1, "r's last block after copy-on-write")
    assert [tuple(c) for c in copies] == [(p2, r2)]
    a.free("p")                                                # p2 goes back; p0 and p1 stay
    in_use.discard(p2)
    assert a.num_free_blocks == 4
    assert [a.ref_count(b) for b in range(8)] == [
        {p0: 2, p1: 1, q1: 1, r2: 1}.get(b, 0) for b in range(8)]
    fresh(a.allocate("s", 5), 2, 'allocate("s", 5)')           # any two of the 4 free blocks
    (x0,) = fresh(a.allocate("x", 4), 1, 'allocate("x", 4)')
    a.fork("x", "y")
    assert a.append("y", 1) == []                              # full shared block: no copy
    y = a.block_table("y")
    assert y[0] == x0 and len(y) == 2
    fresh(y[1:], 1, "y's new block")
    assert a.ref_count(x0) == 2 and a.num_free_blocks == 0
    assert sorted(a.sequences()) == ["q", "r", "s", "x", "y"]
    assert (a.num_tokens("q"), a.num_tokens("r"), a.num_tokens("y")) == (7, 12, 5)


def test_append_without_n_appends_one_token(impl):
    """``append(seq)`` is ``append(seq, n=1)``, the documented default: one decode token. Across a
    block edge it takes a new block, and on a partly filled shared last block it copies, exactly
    as ``append(seq, 1)`` does. Mutant: append_default_zero."""
    a = impl.get("BlockAllocator")(8, 2)
    a.allocate("s", 1)
    assert a.append("s") == [] and a.num_tokens("s") == 2 and len(a.block_table("s")) == 1
    assert a.append("s") == [] and a.num_tokens("s") == 3 and len(a.block_table("s")) == 2
    a.fork("s", "t")
    (src, dst), = a.append("t")                                # t's last block: partly filled, shared
    assert src == a.block_table("s")[1] and dst == a.block_table("t")[1] != src
    assert a.num_tokens("t") == 4 and a.num_free_blocks == 5


def test_zero_tokens_and_zero_append(impl):
    """A sequence may start empty (no blocks); append(seq, 0) changes nothing and copies nothing."""
    a = impl.get("BlockAllocator")(2, 4)
    assert a.allocate("e", 0) == [] and a.block_table("e") == [] and a.num_free_blocks == 2
    a.fork("e", "f")
    assert a.append("e", 0) == [] and a.block_table("e") == []
    assert a.append("e", 5) == [] and sorted(a.block_table("e")) == [0, 1] and a.num_tokens("e") == 5
    assert a.can_allocate(0) and not a.can_allocate(1)
    assert a.block_table("f") == [] and a.slot_mapping("f", []) == []


@given(num_blocks=st.integers(1, 64), block_size=st.integers(1, 32), data=st.data())
def test_every_block_once_and_free_gives_them_back(impl, num_blocks, block_size, data):
    """Until the pool runs out, every allocation gets distinct blocks that no one holds, and
    ``can_allocate`` is exact; ``free`` gives back exactly the freed blocks: an allocation of the
    same size then gets the same set of blocks (the only free ones), in any order."""
    a = impl.get("BlockAllocator")(num_blocks, block_size)
    n = data.draw(st.integers(0, num_blocks * block_size), label="n_tokens")
    first = a.allocate("s", n)
    k = -(-n // block_size)
    assert len(first) == k and len(set(first)) == k and set(first) <= set(range(num_blocks)), first
    assert a.can_allocate((num_blocks - k) * block_size)
    assert not a.can_allocate((num_blocks - k) * block_size + 1)
    rest = a.allocate("rest", (num_blocks - k) * block_size)  # every other block
    assert sorted(first + rest) == list(range(num_blocks)) and a.num_free_blocks == 0
    assert not a.can_allocate(1) and a.can_allocate(0)
    a.free("s")
    assert a.num_free_blocks == k and [a.ref_count(b) for b in first] == [0] * k
    again = a.allocate("t", n)
    assert len(again) == k and set(again) == set(first), (first, again)


# --- bad input and exhaustion: every rejected call leaves the allocator exactly as it was ------
def scenario(cls):
    """Pool of 8 blocks of 4 slots, all in use: alpha (6 tokens) forked into beta, gamma (9),
    delta (12); gone was allocated and freed."""
    a = cls(8, 4)
    a.allocate("gone", 4)
    a.free("gone")
    a.allocate("alpha", 6)
    a.fork("alpha", "beta")
    a.allocate("gamma", 9)
    a.allocate("delta", 12)
    assert a.num_free_blocks == 0
    return a


VALID = dict(op="num_tokens", args=("alpha",))
BAD = [
    Bad("allocate a live seq", dict(op="allocate", args=("alpha", 0)), ValueError, ("alpha",)),
    Bad("allocate out of blocks", dict(op="allocate", args=("omega", 1)), ValueError, ("out of blocks", "omega")),
    Bad("allocate negative n_tokens", dict(op="allocate", args=("omega", -1)), ValueError, ("n_tokens",)),
    Bad("allocate float n_tokens", dict(op="allocate", args=("omega", 2.0)), TypeError, ("n_tokens",)),
    Bad("allocate bool seq", dict(op="allocate", args=(True, 0)), TypeError, ("seq",)),
    Bad("allocate None seq", dict(op="allocate", args=(None, 0)), TypeError, ("seq",)),
    Bad("append to an unknown seq", dict(op="append", args=("nobody", 1)), KeyError, ("nobody",)),
    Bad("append to a freed seq", dict(op="append", args=("gone", 1)), KeyError, ("gone",)),
    Bad("append nothing to an unknown seq", dict(op="append", args=("nobody", 0)), KeyError, ("nobody",)),
    Bad("append out of blocks", dict(op="append", args=("gamma", 4)), ValueError, ("out of blocks", "gamma")),
    Bad("copy-on-write out of blocks", dict(op="append", args=("alpha", 1)), ValueError, ("out of blocks", "alpha")),
    Bad("append negative n", dict(op="append", args=("alpha", -1)), ValueError, ("n",)),
    Bad("append float n", dict(op="append", args=("alpha", 1.0)), TypeError, ("n",)),
    Bad("double free", dict(op="free", args=("gone",)), KeyError, ("gone",)),
    Bad("free an unknown seq", dict(op="free", args=("nobody",)), KeyError, ("nobody",)),
    Bad("free a list", dict(op="free", args=(["alpha"],)), TypeError, ("seq",)),
    Bad("fork an unknown parent", dict(op="fork", args=("nobody", "omega")), KeyError, ("nobody",)),
    Bad("fork a freed parent", dict(op="fork", args=("gone", "omega")), KeyError, ("gone",)),
    Bad("fork onto a live child", dict(op="fork", args=("alpha", "gamma")), ValueError, ("gamma",)),
    Bad("fork onto itself", dict(op="fork", args=("alpha", "alpha")), ValueError, ("alpha",)),
    Bad("fork onto a float child", dict(op="fork", args=("alpha", 1.5)), TypeError, ("child",)),
    Bad("slot past the end", dict(op="slot_mapping", args=("alpha", [5, 6])), ValueError, ("positions", "alpha")),
    Bad("negative slot", dict(op="slot_mapping", args=("alpha", [-1])), ValueError, ("positions",)),
    Bad("float position", dict(op="slot_mapping", args=("alpha", [1.0])), TypeError, ("positions",)),
    Bad("positions not a list", dict(op="slot_mapping", args=("alpha", 3)), TypeError, ("positions",)),
    Bad("slots of a freed seq", dict(op="slot_mapping", args=("gone", [0])), KeyError, ("gone",)),
    Bad("table of an unknown seq", dict(op="block_table", args=("nobody",)), KeyError, ("nobody",)),
    Bad("length of a freed seq", dict(op="num_tokens", args=("gone",)), KeyError, ("gone",)),
    # every call that takes a sequence id checks its type first, reads included (a float or
    # bool id is a TypeError, never a KeyError or the length of the seq 1 that True equals)
    Bad("length of a float seq", dict(op="num_tokens", args=(1.5,)), TypeError, ("seq",)),
    Bad("length of a list seq", dict(op="num_tokens", args=(["alpha"],)), TypeError, ("seq",)),
    Bad("table of a float seq", dict(op="block_table", args=(0.0,)), TypeError, ("seq",)),
    Bad("slots of a None seq", dict(op="slot_mapping", args=(None, [0])), TypeError, ("seq",)),
    Bad("ref_count past the pool", dict(op="ref_count", args=(8,)), ValueError, ("block",)),
    Bad("negative ref_count", dict(op="ref_count", args=(-1,)), ValueError, ("block",)),
    Bad("can_allocate negative", dict(op="can_allocate", args=(-4,)), ValueError, ("n_tokens",)),
]


@bad_cases(BAD)
def test_rejects_bad_input(impl, bad):
    """Unknown or freed sequences -> KeyError naming it; a live seq/child, negative counts, bad
    positions and blocks, and exhaustion ("out of blocks") -> ValueError; wrong types ->
    TypeError naming the argument. The allocator's whole state is unchanged afterwards."""
    alloc = scenario(impl.get("BlockAllocator"))
    assert_rejects(lambda op, args: getattr(alloc, op)(*args), VALID, bad, state=lambda: snapshot(alloc))


BAD_POOL = [
    Bad("zero blocks", dict(num_blocks=0), ValueError, ("num_blocks",)),
    Bad("zero block_size", dict(block_size=0), ValueError, ("block_size",)),
    Bad("float num_blocks", dict(num_blocks=8.0), TypeError, ("num_blocks",)),
    Bad("bool block_size", dict(block_size=True), TypeError, ("block_size",)),
]


@bad_cases(BAD_POOL)
def test_pool_rejects_bad_sizes(impl, bad):
    cls = impl.get("BlockAllocator")
    assert_rejects(lambda num_blocks, block_size: cls(num_blocks, block_size),
                   dict(num_blocks=8, block_size=4), bad)


def test_exhaustion_then_recovery(impl):
    """Out of blocks is not fatal: after the failed call, freeing a sequence makes room again
    (with the freed sequence's blocks, the only free ones)."""
    a = scenario(impl.get("BlockAllocator"))
    with pytest.raises(ValueError, match="out of blocks"):
        a.allocate("omega", 4)
    assert "omega" not in a.sequences()
    delta = a.block_table("delta")
    a.free("delta")
    assert a.can_allocate(12) and not a.can_allocate(13)
    omega = a.allocate("omega", 4)
    assert len(omega) == 1 and omega[0] in delta, (omega, delta)
