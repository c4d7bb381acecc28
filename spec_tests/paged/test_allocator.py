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
    """The example of docs/paged.md, step by step: tables, copy lists, slots, ref counts."""
    a = impl.get("paged.BlockAllocator")(8, 4)
    assert a.allocate("p", 6) == [0, 1]                        # ceil(6/4) = 2 blocks, lowest first
    assert a.slot_mapping("p", [0, 3, 4, 5]) == [0, 3, 4, 5]
    a.fork("p", "q")                                           # shares both blocks
    assert (a.ref_count(0), a.ref_count(1), a.num_free_blocks) == (2, 2, 6)
    assert a.append("q", 1) == [(1, 2)]                        # partial shared last block: copy
    assert a.block_table("q") == [0, 2] and a.ref_count(1) == 1 and a.slot_mapping("q", [6]) == [10]
    assert a.append("p", 2) == [] and a.block_table("p") == [0, 1]   # block 1 is p's alone now
    assert a.append("p", 1) == [] and a.block_table("p") == [0, 1, 3]
    a.fork("p", "r")
    assert a.append("r", 3) == [(3, 4)] and a.block_table("r") == [0, 1, 4]
    a.free("p")                                                # block 3 goes back; 0 and 1 stay
    assert a.num_free_blocks == 4
    assert [a.ref_count(b) for b in range(8)] == [2, 1, 1, 0, 1, 0, 0, 0]
    assert a.allocate("s", 5) == [3, 5]                        # the last freed block comes first
    a.allocate("x", 4)
    a.fork("x", "y")
    assert a.append("y", 1) == [] and a.block_table("y") == [6, 7]  # full shared block: no copy
    assert a.ref_count(6) == 2
    assert sorted(a.sequences()) == ["q", "r", "s", "x", "y"]
    assert (a.num_tokens("q"), a.num_tokens("r"), a.num_tokens("y")) == (7, 12, 5)


def test_zero_tokens_and_zero_append(impl):
    """A sequence may start empty (no blocks); append(seq, 0) changes nothing and copies nothing."""
    a = impl.get("paged.BlockAllocator")(2, 4)
    assert a.allocate("e", 0) == [] and a.block_table("e") == [] and a.num_free_blocks == 2
    a.fork("e", "f")
    assert a.append("e", 0) == [] and a.block_table("e") == []
    assert a.append("e", 5) == [] and a.block_table("e") == [0, 1] and a.num_tokens("e") == 5
    assert a.can_allocate(0) and not a.can_allocate(1)
    assert a.block_table("f") == [] and a.slot_mapping("f", []) == []


@given(num_blocks=st.integers(1, 64), block_size=st.integers(1, 32), data=st.data())
def test_free_returns_the_same_blocks_in_order(impl, num_blocks, block_size, data):
    """LIFO: after free(seq), an allocation of the same size gets the same table back; blocks are
    handed out lowest id first from a fresh pool."""
    a = impl.get("paged.BlockAllocator")(num_blocks, block_size)
    n = data.draw(st.integers(0, num_blocks * block_size), label="n_tokens")
    first = a.allocate("s", n)
    assert first == list(range(-(-n // block_size)))
    assert a.can_allocate((num_blocks - len(first)) * block_size)
    assert not a.can_allocate((num_blocks - len(first)) * block_size + 1)
    a.free("s")
    assert a.num_free_blocks == num_blocks and a.allocate("t", n) == first


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
    Bad("ref_count past the pool", dict(op="ref_count", args=(8,)), ValueError, ("block",)),
    Bad("negative ref_count", dict(op="ref_count", args=(-1,)), ValueError, ("block",)),
    Bad("can_allocate negative", dict(op="can_allocate", args=(-4,)), ValueError, ("n_tokens",)),
]


@bad_cases(BAD)
def test_rejects_bad_input(impl, bad):
    """Unknown or freed sequences -> KeyError naming it; a live seq/child, negative counts, bad
    positions and blocks, and exhaustion ("out of blocks") -> ValueError; wrong types ->
    TypeError naming the argument. The allocator's whole state is unchanged afterwards."""
    alloc = scenario(impl.get("paged.BlockAllocator"))
    assert_rejects(lambda op, args: getattr(alloc, op)(*args), VALID, bad, state=lambda: snapshot(alloc))


BAD_POOL = [
    Bad("zero blocks", dict(num_blocks=0), ValueError, ("num_blocks",)),
    Bad("zero block_size", dict(block_size=0), ValueError, ("block_size",)),
    Bad("float num_blocks", dict(num_blocks=8.0), TypeError, ("num_blocks",)),
    Bad("bool block_size", dict(block_size=True), TypeError, ("block_size",)),
]


@bad_cases(BAD_POOL)
def test_pool_rejects_bad_sizes(impl, bad):
    cls = impl.get("paged.BlockAllocator")
    assert_rejects(lambda num_blocks, block_size: cls(num_blocks, block_size),
                   dict(num_blocks=8, block_size=4), bad)


def test_exhaustion_then_recovery(impl):
    """Out of blocks is not fatal: after the failed call, freeing a sequence makes room again."""
    a = scenario(impl.get("paged.BlockAllocator"))
    with pytest.raises(ValueError, match="out of blocks"):
        a.allocate("omega", 4)
    assert "omega" not in a.sequences()
    a.free("delta")
    assert a.can_allocate(12) and not a.can_allocate(13)
    assert a.allocate("omega", 4) == [5]
