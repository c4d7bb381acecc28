"""Prefix cache with O(1) free-queue operations and chained 64-bit block hashes.

Same contract as ``reference/prefix_cache.py`` (read its docstring for the semantics). What is
faster here:

- the free queue is an ``OrderedDict`` (a hash map over a doubly linked list): pop the head,
  append at the tail and take a re-hit block out of the middle are all O(1) (vLLM's
  ``FreeKVCacheBlockQueue`` is the same structure written by hand); the reference uses a list;
- a block's hash is ``hash((parent_hash, block_tokens, extra_key if first block else None))``,
  Python's built-in 64-bit tuple hash, computed once per block of a live sequence (kept with the
  sequence for ``mark_computed``). It is not collision-free: two different prefixes whose chained
  hashes collide (probability about 2**-64 per pair for non-adversarial input) would share a
  block. vLLM offers the same trade (``builtin`` hash) next to sha256.
"""
from __future__ import annotations

from collections import OrderedDict

from reference._checks import check_int
from reference.prefix_cache import check_extra_key, check_seq, check_tokens

__all__ = ["PrefixCache"]
__optional__: list[str] = []

_ROOT = hash(("prefix_cache", "root"))
_INT = {int}


def _tokens(tokens) -> tuple:
    """check_tokens with a fast path for the common case (a list or tuple of plain ints >= 0)."""
    if type(tokens) in (list, tuple) and tokens and set(map(type, tokens)) == _INT and min(tokens) >= 0:
        return tuple(tokens)
    return check_tokens(tokens)


class PrefixCache:
    """A pool of ``num_blocks`` blocks of ``block_size`` tokens with automatic prefix caching."""

    def __init__(self, num_blocks: int, block_size: int):
        self.num_blocks = check_int("num_blocks", num_blocks, minimum=1)
        self.block_size = check_int("block_size", block_size, minimum=1)
        self.refs = [0] * self.num_blocks
        self.free_queue: OrderedDict = OrderedDict.fromkeys(range(self.num_blocks))
        self.cache: dict = {}          # hash -> block
        self.block_hash: dict = {}     # block -> hash (cached blocks only)
        self.tables: dict = {}         # seq -> [block]
        self.hashes: dict = {}         # seq -> [hash of each full block]
        self.lengths: dict = {}
        self._stats = {"requests": 0, "query_tokens": 0, "hit_tokens": 0}

    def _hashes(self, tokens: tuple, extra_key) -> list:
        bs = self.block_size
        out = []
        h = _ROOT
        key = extra_key
        for blk in zip(*[iter(tokens)] * bs):       # full blocks only (zip drops the partial tail)
            h = hash((h, blk, key))
            key = None
            out.append(h)
        return out

    def _hits(self, hashes: list, n_tokens: int) -> list:
        hits = []
        get = self.cache.get
        for h in hashes[:(n_tokens - 1) // self.block_size]:
            b = get(h)
            if b is None:
                break
            hits.append(b)
        return hits

    def lookup(self, tokens, extra_key=None) -> list:
        tokens = _tokens(tokens)
        check_extra_key(extra_key)
        bs = self.block_size
        n = (len(tokens) - 1) // bs                # the last token is never a hit
        hits = []
        if n == 0:
            return hits
        get = self.cache.get
        blocks = zip(*[iter(tokens[:n * bs])] * bs)   # the full blocks as tuples, made in C
        h = hash((_ROOT, next(blocks), extra_key))
        b = get(h)
        if b is None:
            return hits
        hits.append(b)
        for blk in blocks:                         # hash only as far as the hits go
            h = hash((h, blk, None))
            b = get(h)
            if b is None:
                break
            hits.append(b)
        return hits

    def allocate(self, seq, tokens, extra_key=None) -> int:
        check_seq(seq)
        tokens = _tokens(tokens)
        check_extra_key(extra_key)
        if seq in self.tables:
            raise ValueError(f"seq {seq!r} is already allocated")
        hashes = self._hashes(tokens, extra_key)
        hits = self._hits(hashes, len(tokens))
        refs, free_queue = self.refs, self.free_queue
        need = -(-len(tokens) // self.block_size) - len(hits)
        revived = sum(1 for b in hits if refs[b] == 0)
        if need + revived > len(free_queue):
            raise ValueError(f"out of blocks: seq {seq!r} needs {need + revived}, "
                             f"{len(free_queue)} free")
        for b in hits:
            if refs[b] == 0:
                del free_queue[b]
            refs[b] += 1
        table = list(hits)
        for _ in range(need):
            b, _ = free_queue.popitem(last=False)
            h = self.block_hash.pop(b, None)
            if h is not None:
                del self.cache[h]
            refs[b] = 1
            table.append(b)
        self.tables[seq] = table
        self.hashes[seq] = hashes
        self.lengths[seq] = len(tokens)
        hit_tokens = len(hits) * self.block_size
        self._stats["requests"] += 1
        self._stats["query_tokens"] += len(tokens)
        self._stats["hit_tokens"] += hit_tokens
        return hit_tokens

    def mark_computed(self, seq, n_tokens: int) -> None:
        check_seq(seq)
        if seq not in self.tables:
            raise KeyError(f"seq {seq!r} is not allocated (never allocated, or already freed)")
        check_int("n_tokens", n_tokens, minimum=0)
        if n_tokens > self.lengths[seq]:
            raise ValueError(f"n_tokens must be <= len(tokens) = {self.lengths[seq]}, got {n_tokens}")
        table, hashes = self.tables[seq], self.hashes[seq]
        for i in range(n_tokens // self.block_size):
            b, h = table[i], hashes[i]
            if b in self.block_hash or h in self.cache:
                continue
            self.cache[h] = b
            self.block_hash[b] = h

    def free(self, seq) -> None:
        check_seq(seq)
        if seq not in self.tables:
            raise KeyError(f"seq {seq!r} is not allocated (never allocated, or already freed)")
        table = self.tables.pop(seq)
        del self.hashes[seq], self.lengths[seq]
        refs, free_queue = self.refs, self.free_queue
        for b in reversed(table):
            refs[b] -= 1
            if refs[b] == 0:
                free_queue[b] = None

    @property
    def num_free_blocks(self) -> int:
        return len(self.free_queue)

    def block_table(self, seq) -> list:
        check_seq(seq)
        if seq not in self.tables:
            raise KeyError(f"seq {seq!r} is not allocated (never allocated, or already freed)")
        return list(self.tables[seq])

    def _check_block(self, block) -> None:
        check_int("block", block, minimum=0)
        if block >= self.num_blocks:
            raise ValueError(f"block must be in [0, {self.num_blocks}), got {block}")

    def ref_count(self, block: int) -> int:
        self._check_block(block)
        return self.refs[block]

    def is_cached(self, block: int) -> bool:
        self._check_block(block)
        return block in self.block_hash

    def free_queue_order(self) -> list:
        return list(self.free_queue)

    def stats(self) -> dict:
        return dict(self._stats)
