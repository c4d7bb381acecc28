"""A correct block allocator that always hands out the free block with the highest id
(test-only; not a contract).

A fresh pool of ``num_blocks`` hands out ``num_blocks - 1`` first, then ``num_blocks - 2``, ...;
whatever the history, the next block is the largest free id (a max-heap). The reference uses a
LIFO stack that starts at block 0; the contract lets an implementation take any free block, so
the paged spec must pass this file (spec_tests/suite/test_paged_alternatives.py runs it as a
submission).

Self-contained on purpose (no import of reference/ or optimized/): a heap of negated free ids,
a list of reference counts, tables and lengths in two dicts.
"""
from __future__ import annotations

import heapq


def _check_int(name, value, minimum=None):
    if type(value) is not int:
        raise TypeError(f"{name}: expected an int, got {type(value).__name__} {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name}: must be at least {minimum}, got {value}")
    return value


def _check_seq(name, seq):
    if type(seq) not in (int, str):
        raise TypeError(f"{name}: a sequence id is an int or a str, got {seq!r}")


class BlockAllocator:
    def __init__(self, num_blocks, block_size):
        self.num_blocks = _check_int("num_blocks", num_blocks, 1)
        self.block_size = _check_int("block_size", block_size, 1)
        self._heap = [-b for b in range(num_blocks - 1, -1, -1)]  # already a heap
        heapq.heapify(self._heap)
        self._refs = [0] * num_blocks
        self._tables: dict = {}
        self._lengths: dict = {}

    @property
    def num_free_blocks(self):
        return len(self._heap)

    def _blocks(self, n_tokens):
        return -(-n_tokens // self.block_size)

    def _live(self, seq, name="seq"):
        _check_seq(name, seq)
        if seq not in self._tables:
            raise KeyError(f"{name}: no live sequence {seq!r}")
        return self._tables[seq]

    def _enough(self, seq, k):
        if k > len(self._heap):
            raise ValueError(f"sequence {seq!r}: out of blocks (needs {k}, {len(self._heap)} free)")

    def _take(self):
        block = -heapq.heappop(self._heap)
        self._refs[block] = 1
        return block

    def ref_count(self, block):
        _check_int("block", block)
        if not 0 <= block < self.num_blocks:
            raise ValueError(f"block: {block} is not a block of this pool")
        return self._refs[block]

    def sequences(self):
        return sorted(self._tables, key=repr)

    def block_table(self, seq):
        return list(self._live(seq))

    def num_tokens(self, seq):
        self._live(seq)
        return self._lengths[seq]

    def can_allocate(self, n_tokens):
        _check_int("n_tokens", n_tokens, 0)
        return self._blocks(n_tokens) <= len(self._heap)

    def slot_mapping(self, seq, positions):
        table = self._live(seq)
        if isinstance(positions, (str, bytes, int)) or not hasattr(positions, "__iter__"):
            raise TypeError(f"positions: expected a list of ints, got {positions!r}")
        positions = list(positions)
        n = self._lengths[seq]
        for p in positions:
            _check_int("positions", p)
            if p < 0 or p >= n:
                raise ValueError(f"positions: {p} is past the {n} tokens of {seq!r}")
        bs = self.block_size
        return [table[p // bs] * bs + p % bs for p in positions]

    def allocate(self, seq, n_tokens):
        _check_seq("seq", seq)
        _check_int("n_tokens", n_tokens, 0)
        if seq in self._tables:
            raise ValueError(f"seq: {seq!r} is live already")
        k = self._blocks(n_tokens)
        self._enough(seq, k)
        self._tables[seq] = [self._take() for _ in range(k)]
        self._lengths[seq] = n_tokens
        return list(self._tables[seq])

    def append(self, seq, n=1):
        _check_int("n", n, 0)
        table = self._live(seq)
        if not n:
            return []
        old = self._lengths[seq]
        shared_partial = old % self.block_size and self._refs[table[-1]] > 1
        grow = self._blocks(old + n) - len(table)
        self._enough(seq, grow + (1 if shared_partial else 0))
        copies = []
        if shared_partial:
            src = table.pop()
            self._refs[src] -= 1
            table.append(self._take())
            copies.append((src, table[-1]))
        for _ in range(grow):
            table.append(self._take())
        self._lengths[seq] = old + n
        return copies

    def fork(self, parent, child):
        _check_seq("child", child)
        table = self._live(parent, "parent")
        if child in self._tables:
            raise ValueError(f"child: {child!r} is live already")
        for b in table:
            self._refs[b] += 1
        self._tables[child] = list(table)
        self._lengths[child] = self._lengths[parent]

    def free(self, seq):
        table = self._live(seq)
        del self._tables[seq], self._lengths[seq]
        for b in table:
            self._refs[b] -= 1
            if self._refs[b] == 0:
                heapq.heappush(self._heap, -b)
