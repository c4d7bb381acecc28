"""Prefix cache with O(1) free-queue operations and chained 64-bit block hashes.

Same contract as ``reference/prefix_cache.py`` (read its docstring for the semantics). What is
faster here:

- the free queue is an ``OrderedDict`` (a hash map over a doubly linked list): pop the head,
  append at the tail and take a re-hit block out of the middle are all O(1) (vLLM's
  ``FreeKVCacheBlockQueue`` is the same structure written by hand); the reference uses a list;
- the key of full block ``i`` stands for the whole prefix it ends, as a chained hash does, but is
  computed without a Python-level loop: each block gets a digest ``hash((extra_key, i,
  block_bytes))`` (Python's built-in hash: SipHash of the block's tokens as unsigned 64-bit
  bytes, its position and the extra key), and the key of block ``i`` is the XOR of the digests
  of blocks ``0 .. i`` (``itertools.accumulate``), so it depends on every token of the prefix,
  their positions and the extra key. Slicing, hashing, accumulating and the dict probes run as
  C iterators (``map``/``zip``/``accumulate``/``takewhile``), once per block, stopping at the
  first miss. Keys are computed once per block of a live sequence (kept for ``mark_computed``).
  It is not collision-free: two different prefixes whose keys collide (about 2**-64 per pair
  for non-adversarial input) would share a block; vLLM offers the same trade (``builtin`` hash)
  next to sha256;
- token validation is two C passes instead of a per-token Python check: ``array('Q', tokens)``
  (rejects non-integers and negative or >= 2**64 values) and a numpy ``min`` over its buffer:
  only a token equal to 0 or 1 can be a ``True``/``False``, so only those positions are checked.
  Any other failure falls back to the reference's ``check_tokens`` for its error. ``array``
  accepts any object with ``__index__`` (a numpy integer), which the contract rejects: one
  ``sum`` of the tokens (an ``int`` only if every token is one) catches those.
"""
from __future__ import annotations

from array import array
from collections import OrderedDict
from functools import partial
from itertools import accumulate, repeat, takewhile
from operator import is_not, xor

import numpy as np

from reference._checks import check_int
from reference.prefix_cache import check_extra_key, check_seq, check_tokens

__all__ = ["PrefixCache"]
__optional__: list[str] = []

_NOT_NONE = partial(is_not, None)
_MAX_PROBES = 8


def _has_bool(tokens, data: bytes) -> bool:
    """Whether ``tokens`` (stored in ``data`` by ``array("Q")``) holds ``True`` or ``False``: only
    a token equal to 0 or 1 can be a bool, so find those (one numpy pass) and check them; past a
    few candidates, check every token's type in one C pass."""
    words = np.frombuffer(data, dtype=np.uint64)
    if words.min() > 1:
        return False
    where = np.flatnonzero(words <= 1)
    if len(where) > _MAX_PROBES:
        return bool in map(type, tokens)
    return any(tokens[i] is True or tokens[i] is False for i in where.tolist())


def _token_bytes(tokens):
    """Validate ``tokens`` (the reference's rules and messages); return them as bytes, 8 per token
    (unsigned 64-bit), or None when they are valid but some token is >= 2**64."""
    if type(tokens) in (list, tuple) and tokens:
        try:
            data = array("Q", tokens).tobytes()
            # array() takes any object with __index__ (a numpy integer); the contract takes ints
            # only. A sum of ints is an int, and one numpy (or tensor) element makes it not one.
            plain = type(sum(tokens)) is int
        except (TypeError, OverflowError, ValueError):
            data, plain = None, False
        if plain and not _has_bool(tokens, data):
            return data
    check_tokens(tokens)           # raises the contract's error for a bad token
    return None                    # valid: some token does not fit in 64 bits


def _block_repr(block: tuple):
    """A block's bytes as ``_token_bytes`` makes them, or the tuple itself if a token is huge."""
    try:
        return array("Q", block).tobytes()
    except OverflowError:
        return block


_SLICES: dict = {}   # block size -> [slice of block i's bytes]


def _slices(block_size: int, n: int) -> list:
    got = _SLICES.get(block_size)
    if got is None or len(got) < n:
        width = 8 * block_size
        got = [slice(i * width, (i + 1) * width) for i in range(max(n, 2 * len(got or ()), 64))]
        _SLICES[block_size] = got
    return got


def _keys(tokens, data, extra_key, block_size: int, n: int):
    """The keys of the first ``n`` full blocks, lazily: XOR-accumulated block digests."""
    if data is not None:
        blocks = map(data.__getitem__, _slices(block_size, n)[:n])
    else:
        blocks = (_block_repr(tuple(tokens[i * block_size:(i + 1) * block_size])) for i in range(n))
    return accumulate(map(hash, zip(repeat(extra_key), range(n), blocks)), xor)


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

    def _hashes(self, tokens, data, extra_key) -> list:
        """The key of every full block of ``tokens``."""
        return list(_keys(tokens, data, extra_key, self.block_size, len(tokens) // self.block_size))

    def _hits(self, hashes: list, n_tokens: int) -> list:
        n = (n_tokens - 1) // self.block_size      # the last token is never a hit
        return list(takewhile(_NOT_NONE, map(self.cache.get, hashes[:n])))

    def lookup(self, tokens, extra_key=None) -> list:
        data = _token_bytes(tokens)
        check_extra_key(extra_key)
        n = (len(tokens) - 1) // self.block_size  # the last token is never a hit
        keys = _keys(tokens, data, extra_key, self.block_size, n)
        return list(takewhile(_NOT_NONE, map(self.cache.get, keys)))   # stops at the first miss

    def allocate(self, seq, tokens, extra_key=None) -> int:
        check_seq(seq)
        data = _token_bytes(tokens)
        check_extra_key(extra_key)
        if seq in self.tables:
            raise ValueError(f"seq {seq!r} is already allocated")
        hashes = self._hashes(tokens, data, extra_key)
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
