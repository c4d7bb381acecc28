"""A correct block allocator that hands out blocks in FIFO order (test-only; not a contract).

The free blocks form a queue, as in vLLM v1's ``BlockPool``: a fresh pool hands out 0, 1, 2, ...;
a freed block joins the *back* of the queue, so it is handed out again only after every block
that was free before it. The reference uses a LIFO stack instead; the contract lets an
implementation take any free block, so the paged spec must pass this file
(spec_tests/suite/test_paged_alternatives.py runs it as a submission).

Self-contained on purpose (no import of reference/ or optimized/), written the way a third party
would: a deque of free ids and a dict of reference counts.
"""
from __future__ import annotations

from collections import deque


def _int(name, value, minimum=None):
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def _seq(name, seq):
    if isinstance(seq, bool) or not isinstance(seq, (int, str)):
        raise TypeError(f"{name} must be an int or a str, got {seq!r}")


class BlockAllocator:
    def __init__(self, num_blocks, block_size):
        self.num_blocks = _int("num_blocks", num_blocks, 1)
        self.block_size = _int("block_size", block_size, 1)
        self._queue = deque(range(num_blocks))   # the front is handed out next
        self._refs: dict[int, int] = {}          # block -> references (absent: free)
        self._seqs: dict = {}                    # seq -> [table, num_tokens]

    @property
    def num_free_blocks(self):
        return len(self._queue)

    def _need(self, n_tokens):
        return (n_tokens + self.block_size - 1) // self.block_size

    def _get(self, seq, name="seq"):
        _seq(name, seq)
        if seq not in self._seqs:
            raise KeyError(f"{name} {seq!r} is unknown or freed")
        return self._seqs[seq]

    def _reserve(self, seq, k):
        if k > len(self._queue):
            raise ValueError(f"out of blocks for seq {seq!r}: {k} needed, {len(self._queue)} free")

    def _pop(self):
        block = self._queue.popleft()
        self._refs[block] = 1
        return block

    def ref_count(self, block):
        _int("block", block)
        if block < 0 or block >= self.num_blocks:
            raise ValueError(f"block {block} is outside the pool of {self.num_blocks}")
        return self._refs.get(block, 0)

    def sequences(self):
        return list(self._seqs)

    def block_table(self, seq):
        return list(self._get(seq)[0])

    def num_tokens(self, seq):
        return self._get(seq)[1]

    def can_allocate(self, n_tokens):
        return self._need(_int("n_tokens", n_tokens, 0)) <= len(self._queue)

    def slot_mapping(self, seq, positions):
        table, length = self._get(seq)
        if not isinstance(positions, (list, tuple, range)):
            raise TypeError(f"positions must be a list, tuple or range, got {positions!r}")
        for p in positions:
            _int("positions", p)
            if not 0 <= p < length:
                raise ValueError(f"positions: {p} not in [0, {length}) for seq {seq!r}")
        bs = self.block_size
        return [table[p // bs] * bs + p % bs for p in positions]

    def allocate(self, seq, n_tokens):
        _seq("seq", seq)
        _int("n_tokens", n_tokens, 0)
        if seq in self._seqs:
            raise ValueError(f"seq {seq!r} already exists")
        k = self._need(n_tokens)
        self._reserve(seq, k)
        table = [self._pop() for _ in range(k)]
        self._seqs[seq] = [table, n_tokens]
        return list(table)

    def append(self, seq, n=1):
        _int("n", n, 0)
        entry = self._get(seq)
        if n == 0:
            return []
        table, length = entry
        cow = length % self.block_size != 0 and self._refs[table[-1]] > 1
        grow = self._need(length + n) - len(table)
        self._reserve(seq, grow + cow)
        copies = []
        if cow:
            src = table[-1]
            self._refs[src] -= 1
            table[-1] = self._pop()
            copies.append((src, table[-1]))
        table.extend(self._pop() for _ in range(grow))
        entry[1] = length + n
        return copies

    def fork(self, parent, child):
        _seq("child", child)
        table, length = self._get(parent, "parent")
        if child in self._seqs:
            raise ValueError(f"child {child!r} already exists")
        for block in table:
            self._refs[block] += 1
        self._seqs[child] = [list(table), length]

    def free(self, seq):
        table, _ = self._get(seq)
        del self._seqs[seq]
        for block in table:          # first to last, to the back of the queue
            self._refs[block] -= 1
            if self._refs[block] == 0:
                del self._refs[block]
                self._queue.append(block)
