"""Planted bugs of `paged` (each must make a paged test fail)."""
from conformance.declarations import Patch


MUTANTS = [
    Patch("leak_on_free",
          "free drops the sequence's table but never returns its blocks to the pool.",
          "            if refs[block] == 0:\n                free.append(block)\n",
          "            pass\n", module="optimized"),
    Patch("free_ignores_ref_count",
          "free returns every block of the table to the pool, even a block a forked sibling still "
          "holds (its ref count is not checked).",
          "            refs[block] -= 1\n            if refs[block] == 0:\n                free.append(block)\n",
          "            refs[block] = 0\n            free.append(block)\n", module="optimized"),
    Patch("no_copy_on_write",
          "append writes into a shared, partly filled last block in place: no copy, no new block.",
          "        cow = length % self.block_size != 0 and refs[table[-1]] > 1\n",
          "        cow = False\n", module="optimized"),
    Patch("cow_keeps_source_ref",
          "copy-on-write takes a new block but forgets to drop the source block's reference.",
          "            refs[src] -= 1\n",
          "", module="optimized"),
    Patch("failed_allocate_leaks",
          "an allocation that runs out of blocks takes the blocks that are free before it raises "
          "(no rollback).",
          "        self._check_free(seq, need)\n        table = self._take(need)\n",
          "        free_before = len(self._free)\n"
          "        table = self._take(min(need, free_before))\n"
          "        if need > free_before:\n"
          "            raise ValueError(f'out of blocks: seq {seq!r} needs {need}, {free_before} free')\n", module="optimized"),
    Patch("slot_off_by_one_at_boundary",
          "slot_mapping looks up the previous block for the first position of every block but the "
          "first (an off-by-one at the block boundary).",
          "        return [table[p // size] * size + p % size for p in positions]\n",
          "        return [table[max(p - 1, 0) // size] * size + p % size for p in positions]\n", module="optimized"),
    Patch("append_default_zero",
          "append's n defaults to 0 instead of the documented 1: every call that passes n is right, "
          "append(seq) (one decode token) appends nothing.",
          "    def append(self, seq, n: int = 1) -> list[tuple[int, int]]:\n",
          "    def append(self, seq, n: int = 0) -> list[tuple[int, int]]:\n", module="optimized"),
]

# Found by the bounded-exhaustive exploration (issue 22): the random state machine missed it on
# fresh seeds (it shows only when the pool is nearly full and the last block has room).
MUTANTS += [
    Patch("append_capacity_ignores_room",
          "append's out-of-blocks check counts the blocks the new tokens would fill on their own, not "
          "the room left in the last block: an append that fits in the free blocks is rejected.",
          "        self._check_free(seq, grow + cow)\n",
          "        self._check_free(seq, blocks_for(n, self.block_size) + cow)\n", module="optimized"),
    Patch("append_zero_copies",
          "append without the n == 0 early return: append(seq, 0) on a shared, partly filled last "
          "block still copies it (a new block, a copy list, the source's ref count dropped), though "
          "no token is written.",
          "        if n == 0:\n            return []\n        length = self._lengths[seq]\n",
          "        length = self._lengths[seq]\n", module="optimized"),
]
