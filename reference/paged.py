"""The paged KV cache's block allocator (course 03.06-03.08; vLLM's PagedAttention, chapter 3).

A contiguous cache reserves ``max_seq_len`` slots per sequence up front; most of them are never
written (docs/paged.md measures how many). A paged cache cuts the memory into a fixed pool of
``num_blocks`` *blocks* of ``block_size`` token slots and gives each sequence a *block table*: the
ids of the blocks that hold its tokens, in order. Token ``p`` of a sequence lives in slot

    slot = block_table[p // block_size] * block_size + p % block_size

of the flat cache (``num_blocks * block_size`` slots), and a sequence never holds more than
``ceil(num_tokens / block_size)`` blocks, so at most ``block_size - 1`` of its slots are empty.

Contract
--------
``BlockAllocator(num_blocks, block_size)``; sequence ids (``seq``) are ints or strs.

``allocate(seq, n_tokens) -> list[int]``
    registers a new sequence of ``n_tokens`` tokens (0 is allowed: an empty table) and gives it
    ``ceil(n_tokens / block_size)`` free blocks; returns its block table.
``append(seq, n=1) -> list[tuple[int, int]]``
    grows the sequence by ``n`` tokens and returns the copy-on-write list: ``(src, dst)`` pairs
    of blocks the engine must copy (all slots of ``src`` into ``dst``) before it writes the new
    tokens. If the last block is *partially* filled and *shared* (reference count > 1), the
    sequence gets a fresh block ``dst`` in its place (the list is ``[(last, dst)]``; ``last``
    loses one reference) -- the one case where a sequence would write into a block another
    sequence can read. A *full* shared last block is never copied: new tokens go to new blocks.
    Then it takes as many new blocks as the new tokens need. ``n = 0`` changes nothing and
    returns ``[]``. After ``append`` every slot of the new tokens lies in a block that only
    this sequence holds.
``fork(parent, child) -> None``
    the child gets the parent's tokens by sharing every block of its table (each block gains a
    reference; no block is taken, nothing is copied): parallel sampling and beam search.
``free(seq) -> None``
    drops the sequence; each of its blocks loses a reference, and a block with none left goes
    back to the pool.
``slot_mapping(seq, positions) -> list[int]``
    the slot of each position (a list, tuple or range of ints in ``[0, num_tokens(seq))``).
``block_table(seq) -> list[int]``, ``num_tokens(seq) -> int``, ``sequences() -> list``
    (live sequence ids; only the set is the contract), ``ref_count(block) -> int`` (the number of
    block tables holding ``block``; 0 for a free block), the ``num_free_blocks`` property,
    ``can_allocate(n_tokens) -> bool`` (would ``allocate`` of a new sequence of ``n_tokens``
    succeed now), and the attributes ``num_blocks``, ``block_size``. Returned lists are copies.

Which free block a call takes is not part of the contract: implementations may choose any free
block (a LIFO stack, a FIFO queue as in vLLM's ``BlockPool``, the highest id, at random). The
spec compares an implementation with this reference up to a consistent renaming of block ids:
the same tables, copy lists and slots once each block is paired with the reference's block that
plays its part (docs/paged.md, "Which block?"). The reference takes blocks from a LIFO stack:
from a fresh pool block 0 first, then 1, 2, ...; a block that goes back to the pool is handed out
next. ``free`` releases a table's blocks from the last to the first, so ``table[0]`` is on top: a
freed sequence's blocks come back in the same order to the next allocation. Within one call,
blocks are taken in table order, a copy-on-write block before any new block. (optimized/paged.py
takes the same blocks; spec_tests/bundled/test_paged_internals.py pins that for the two.)

Choices the law leaves open (checked only at token-exact): none. The one choice here -- which
free block a call takes, and so the free list's order -- is left open by the law itself: every
test compares block ids up to a consistent renaming, so no test of this concept is
choice-marked. Only spec_tests/bundled/ pins the bundled allocators' LIFO ids.

Bad input and exhaustion. Every check runs before any state changes, so a call that raises
leaves the allocator exactly as it was:

- ``TypeError`` naming the argument: a ``seq``/``parent``/``child`` that is not an int or str
  (a bool is not an int anywhere here), a count, block or position that is not an int,
  ``positions`` that is not a list, tuple or range (naming ``positions``);
- ``ValueError`` naming the argument: ``num_blocks`` or ``block_size`` < 1, a negative
  ``n_tokens``/``n``, a ``block`` outside ``[0, num_blocks)``, a position outside
  ``[0, num_tokens)`` (naming ``positions`` and the sequence);
- ``ValueError`` naming the sequence: ``allocate`` of a live ``seq``, ``fork`` onto a live
  ``child`` (including ``child == parent``); and *out of blocks* (the message says
  ``out of blocks``): an ``allocate`` or ``append`` that needs more blocks than are free;
- ``KeyError`` naming the sequence: an unknown sequence -- never allocated, or already freed
  (so a double ``free`` is a ``KeyError``).

A call wrong in several ways may raise any of the errors that apply.

This reference is plain on purpose: the free list is a Python list whose front is the next block
handed out (``pop(0)`` / ``insert(0, ...)``: O(pool) per block), and a block's reference count is
not stored but counted, by its definition, over every block table (O(blocks in use)).
``optimized/paged.py`` keeps a stack and an array of reference counts: O(1) per block.
"""
from __future__ import annotations

from reference._checks import check_int, is_int

__all__ = ["BlockAllocator"]  # the contract: what an implementation must provide
__optional__: list[str] = []


def check_seq(name: str, seq) -> None:
    """A sequence id is an int (not a bool) or a str; ``TypeError`` naming ``name`` otherwise."""
    if not (is_int(seq) or isinstance(seq, str)):
        raise TypeError(f"{name} must be an int or a str (a sequence id), got {seq!r}")


def blocks_for(n_tokens: int, block_size: int) -> int:
    """Blocks that hold ``n_tokens`` tokens: ceil(n_tokens / block_size)."""
    return -(-n_tokens // block_size)


class BlockAllocator:
    """A pool of ``num_blocks`` blocks of ``block_size`` slots, block tables per sequence,
    reference counts and copy-on-write (module docstring: the contract)."""

    def __init__(self, num_blocks: int, block_size: int):
        self.num_blocks = check_int("num_blocks", num_blocks, minimum=1)
        self.block_size = check_int("block_size", block_size, minimum=1)
        self.free_blocks = list(range(num_blocks))  # free_blocks[0] is the next block handed out
        self.tables: dict = {}   # seq -> its block ids, in token order
        self.lengths: dict = {}  # seq -> its number of tokens

    # -- observables ------------------------------------------------------------------------
    @property
    def num_free_blocks(self) -> int:
        return len(self.free_blocks)

    def ref_count(self, block: int) -> int:
        """How many block tables hold ``block`` (0: it is free)."""
        check_int("block", block)
        if not 0 <= block < self.num_blocks:
            raise ValueError(f"block must be in [0, {self.num_blocks}), got {block}")
        return sum(table.count(block) for table in self.tables.values())

    def sequences(self) -> list:
        return list(self.tables)

    def block_table(self, seq) -> list[int]:
        self._check_live(seq)
        return list(self.tables[seq])

    def num_tokens(self, seq) -> int:
        self._check_live(seq)
        return self.lengths[seq]

    def can_allocate(self, n_tokens: int) -> bool:
        check_int("n_tokens", n_tokens, minimum=0)
        return blocks_for(n_tokens, self.block_size) <= self.num_free_blocks

    def slot_mapping(self, seq, positions) -> list[int]:
        """The slot of each position: ``table[p // block_size] * block_size + p % block_size``."""
        self._check_live(seq)
        if isinstance(positions, (str, bytes)) or not hasattr(positions, "__iter__"):
            raise TypeError(f"positions must be a list, tuple or range of ints, got {positions!r}")
        positions = list(positions)
        for p in positions:
            check_int("positions", p)
            if not 0 <= p < self.lengths[seq]:
                raise ValueError(f"positions: {p} is outside [0, {self.lengths[seq]}), "
                                 f"the tokens of seq {seq!r}")
        table, size = self.tables[seq], self.block_size
        return [table[p // size] * size + p % size for p in positions]

    # -- operations -------------------------------------------------------------------------
    def allocate(self, seq, n_tokens: int) -> list[int]:
        check_seq("seq", seq)
        check_int("n_tokens", n_tokens, minimum=0)
        if seq in self.tables:
            raise ValueError(f"seq {seq!r} is already allocated")
        need = blocks_for(n_tokens, self.block_size)
        self._check_free(seq, need)
        self.tables[seq] = [self._take() for _ in range(need)]
        self.lengths[seq] = n_tokens
        return list(self.tables[seq])

    def append(self, seq, n: int = 1) -> list[tuple[int, int]]:
        check_int("n", n, minimum=0)
        self._check_live(seq)
        if n == 0:
            return []
        table, length = self.tables[seq], self.lengths[seq]
        copy_on_write = length % self.block_size != 0 and self.ref_count(table[-1]) > 1
        need = blocks_for(length + n, self.block_size) - len(table) + copy_on_write
        self._check_free(seq, need)
        copies = []
        if copy_on_write:
            src = table[-1]
            table[-1] = self._take()  # src loses this table's reference: it is no longer in it
            copies.append((src, table[-1]))
        while len(table) < blocks_for(length + n, self.block_size):
            table.append(self._take())
        self.lengths[seq] = length + n
        return copies

    def fork(self, parent, child) -> None:
        check_seq("child", child)
        self._check_live(parent, "parent")
        if child in self.tables:
            raise ValueError(f"child {child!r} is already allocated")
        self.tables[child] = list(self.tables[parent])
        self.lengths[child] = self.lengths[parent]

    def free(self, seq) -> None:
        self._check_live(seq)
        table = self.tables.pop(seq)
        del self.lengths[seq]
        for block in reversed(table):
            if self.ref_count(block) == 0:  # no other table holds it
                self.free_blocks.insert(0, block)

    # -- helpers ----------------------------------------------------------------------------
    def _take(self) -> int:
        return self.free_blocks.pop(0)

    def _check_live(self, seq, name: str = "seq") -> None:
        check_seq(name, seq)
        if seq not in self.tables:
            raise KeyError(f"{name} {seq!r} is not allocated (never allocated, or already freed)")

    def _check_free(self, seq, need: int) -> None:
        if need > self.num_free_blocks:
            raise ValueError(f"out of blocks: seq {seq!r} needs {need}, {self.num_free_blocks} free")
