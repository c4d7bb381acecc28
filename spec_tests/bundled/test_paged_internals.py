"""The bundled block allocators (reference/paged.py, optimized/paged.py) take the same blocks.

The contract lets an implementation take any free block, so the paged spec
(spec_tests/paged/) compares an implementation with the reference up to a renaming of block ids.
The two bundled allocators do more: both take blocks from a LIFO stack (block 0 first from a
fresh pool; the most recently freed block next; ``free`` returns a table from its last block to
its first, so ``table[0]`` is on top; within one call, table order, the copy-on-write block
first). These tests pin that choice for the two of them: block for block, never run against a
submission.
"""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

import optimized.paged as opt
import reference.paged as ref
from conformance.loader import load_implementation
from spec_tests.paged import test_state_machine as machine

pytestmark = pytest.mark.concept("paged")
BUNDLED = pytest.mark.parametrize("module", [ref, opt], ids=["reference", "optimized"])


class SameBlocksMachine(machine.AllocatorMachine):
    """The spec's state machine with the renaming pinned to the identity: optimized returns the
    reference's results exactly (the same block ids, in the same order) and has its state."""

    def check_result(self, call, op, args, got, want):
        super().check_result(call, op, args, got, want)
        assert got == want, f"{call}: optimized returned {got!r}; the reference returns {want!r}"

    def check_state(self):
        super().check_state()
        got, want = self.now(), machine.observe(self.b, self.nb)
        assert got == want, f"optimized's state differs from the reference's:\n  got  {got!r}\n  want {want!r}"


def test_optimized_takes_the_reference_blocks():
    """Random valid and invalid operations: optimized == reference operation for operation,
    block ids included."""
    machine.run_machine(type("SameBlocks", (SameBlocksMachine,), {
        "impl": load_implementation("optimized").of("paged"), "ref": load_implementation("reference").of("paged")}))


@BUNDLED
def test_worked_example_block_ids(module):
    """docs/paged.md's example with the block ids both bundled allocators give."""
    a = module.BlockAllocator(8, 4)
    assert a.allocate("p", 6) == [0, 1]                        # lowest first from a fresh pool
    assert a.slot_mapping("p", [0, 3, 4, 5]) == [0, 3, 4, 5]
    a.fork("p", "q")
    assert a.append("q", 1) == [(1, 2)] and a.block_table("q") == [0, 2]
    assert a.slot_mapping("q", [6]) == [10]
    assert a.append("p", 2) == [] and a.append("p", 1) == [] and a.block_table("p") == [0, 1, 3]
    a.fork("p", "r")
    assert a.append("r", 3) == [(3, 4)] and a.block_table("r") == [0, 1, 4]
    a.free("p")
    assert [a.ref_count(b) for b in range(8)] == [2, 1, 1, 0, 1, 0, 0, 0]
    assert a.allocate("s", 5) == [3, 5]                        # the last freed block comes first
    a.allocate("x", 4)
    a.fork("x", "y")
    assert a.append("y", 1) == [] and a.block_table("y") == [6, 7]


@BUNDLED
@given(num_blocks=st.integers(1, 64), block_size=st.integers(1, 32), data=st.data())
def test_lifo_free_returns_the_same_blocks_in_order(module, num_blocks, block_size, data):
    """LIFO: a fresh pool hands out 0, 1, 2, ...; after free(seq), an allocation of the same size
    gets the same table back, in the same order; a copy-on-write block comes before new blocks."""
    a = module.BlockAllocator(num_blocks, block_size)
    n = data.draw(st.integers(0, num_blocks * block_size), label="n_tokens")
    first = a.allocate("s", n)
    assert first == list(range(-(-n // block_size)))
    a.free("s")
    assert a.num_free_blocks == num_blocks and a.allocate("t", n) == first


@BUNDLED
def test_copy_on_write_block_before_new_blocks(module):
    a = module.BlockAllocator(8, 4)
    a.allocate("p", 2)                                         # [0]
    a.fork("p", "q")
    assert a.append("q", 7) == [(0, 1)] and a.block_table("q") == [1, 2, 3]
    a.free("q")                                                # back on the stack: 1 on top, then 2, 3
    assert a.allocate("r", 12) == [1, 2, 3]
