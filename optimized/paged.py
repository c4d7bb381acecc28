"""The block allocator in O(1) per block (same contract as reference/paged.py, whose docstring is
the contract, and the same block choices -- a LIFO stack, block 0 first -- which the contract
leaves open; spec_tests/bundled/test_paged_internals.py checks the two agree block for block).

The reference counts a block's references over every block table and keeps its free list with the
next block at the front (``pop(0)``): both cost time proportional to the pool or to the blocks in
use. Here the free blocks are a stack whose top is the end of a list (``pop()`` / ``append``), and
the reference counts live in a list indexed by block id, updated as tables gain and lose blocks.
Every operation costs O(1) per block it touches, whatever the size of the pool
(docs/paged.md measures it from 1k to 1M blocks).
"""
from __future__ import annotations

from reference._checks import check_int
from reference.paged import blocks_for, check_seq

__all__ = ["BlockAllocator"]


class BlockAllocator:
    """Free stack + reference-count array (module docstring)."""

    def __init__(self, num_blocks: int, block_size: int):
        self.num_blocks = check_int("num_blocks", num_blocks, minimum=1)
        self.block_size = check_int("block_size", block_size, minimum=1)
        self._free = list(range(num_blocks - 1, -1, -1))  # a stack: _free[-1] is handed out next
        self._refs = [0] * num_blocks
        self._tables: dict = {}
        self._lengths: dict = {}

    @property
    def num_free_blocks(self) -> int:
        return len(self._free)

    def ref_count(self, block: int) -> int:
        check_int("block", block)
        if not 0 <= block < self.num_blocks:
            raise ValueError(f"block must be in [0, {self.num_blocks}), got {block}")
        return self._refs[block]

    def sequences(self) -> list:
        return list(self._tables)

    def block_table(self, seq) -> list[int]:
        return list(self._table(seq))

    def num_tokens(self, seq) -> int:
        self._table(seq)
        return self._lengths[seq]

    def can_allocate(self, n_tokens: int) -> bool:
        check_int("n_tokens", n_tokens, minimum=0)
        return blocks_for(n_tokens, self.block_size) <= len(self._free)

    def slot_mapping(self, seq, positions) -> list[int]:
        table = self._table(seq)
        if isinstance(positions, (str, bytes)) or not hasattr(positions, "__iter__"):
            raise TypeError(f"positions must be a list, tuple or range of ints, got {positions!r}")
        positions = list(positions)
        length, size = self._lengths[seq], self.block_size
        for p in positions:
            check_int("positions", p)
            if not 0 <= p < length:
                raise ValueError(f"positions: {p} is outside [0, {length}), the tokens of seq {seq!r}")
        return [table[p // size] * size + p % size for p in positions]

    def allocate(self, seq, n_tokens: int) -> list[int]:
        check_seq("seq", seq)
        check_int("n_tokens", n_tokens, minimum=0)
        if seq in self._tables:
            raise ValueError(f"seq {seq!r} is already allocated")
        need = blocks_for(n_tokens, self.block_size)
        self._check_free(seq, need)
        table = self._take(need)
        self._tables[seq] = table
        self._lengths[seq] = n_tokens
        return list(table)

    def append(self, seq, n: int = 1) -> list[tuple[int, int]]:
        check_int("n", n, minimum=0)
        table = self._table(seq)
        if n == 0:
            return []
        length = self._lengths[seq]
        refs = self._refs
        cow = length % self.block_size != 0 and refs[table[-1]] > 1
        grow = blocks_for(length + n, self.block_size) - len(table)
        self._check_free(seq, grow + cow)
        copies = []
        if cow:
            src = table[-1]
            dst = self._free.pop()
            refs[src] -= 1
            refs[dst] = 1
            table[-1] = dst
            copies.append((src, dst))
        if grow:
            table += self._take(grow)
        self._lengths[seq] = length + n
        return copies

    def fork(self, parent, child) -> None:
        check_seq("child", child)
        table = self._table(parent, "parent")
        if child in self._tables:
            raise ValueError(f"child {child!r} is already allocated")
        refs = self._refs
        for block in table:
            refs[block] += 1
        self._tables[child] = list(table)
        self._lengths[child] = self._lengths[parent]

    def free(self, seq) -> None:
        table = self._table(seq)
        del self._tables[seq], self._lengths[seq]
        refs, free = self._refs, self._free
        for block in reversed(table):
            refs[block] -= 1
            if refs[block] == 0:
                free.append(block)

    def _take(self, k: int) -> list[int]:
        """The next ``k`` free blocks, in hand-out order (the top of the stack first)."""
        if k == 0:
            return []
        free, refs = self._free, self._refs
        taken = free[-k:]
        del free[-k:]
        taken.reverse()
        for block in taken:
            refs[block] = 1
        return taken

    def _table(self, seq, name: str = "seq") -> list[int]:
        check_seq(name, seq)
        table = self._tables.get(seq)
        if table is None:
            raise KeyError(f"{name} {seq!r} is not allocated (never allocated, or already freed)")
        return table

    def _check_free(self, seq, need: int) -> None:
        if need > len(self._free):
            raise ValueError(f"out of blocks: seq {seq!r} needs {need}, {len(self._free)} free")
