"""Automatic prefix caching over a paged pool: hash-chained full blocks (course 03.09-03.11).

vLLM v1 semantics (``vllm/v1/core/block_pool.py``, ``kv_cache_manager.py``, ``kv_cache_utils.py``):

- A *full* block of a sequence is identified by the whole prefix it ends: its hash chains the
  parent block's hash, the block's own tokens and the extra key (an adapter id or cache salt,
  which enters the first block only -- through the chain it then covers every block). The same
  block content at another position, or after another parent, is another key and never hits.
  This reference uses the exact key ``(extra_key, tuple(tokens[:end]))``: it is what an ideal
  chained hash stands for, so the reference has no hash collisions. A partial block (the tail of a
  prompt shorter than a block) is never cached.
- ``lookup(tokens)`` returns the cached blocks of the longest block-aligned cached prefix, but at
  most ``len(tokens) - 1`` tokens: the last prompt token is always recomputed (its logits are
  needed), so a fully cached prompt still recomputes its last block.
- ``allocate`` takes the hits (ref count + 1; a hit on a free block takes it off the free queue)
  and then pops fresh blocks off the head of the free queue for the rest; a popped block that was
  cached loses its hash then (eviction happens at reuse, not at free).
- ``mark_computed(seq, n_tokens)``: the first ``n_tokens`` tokens of ``seq`` have their KV written;
  every full block among them becomes cached (if its key is not cached already).
- ``free(seq)`` drops one reference from each of its blocks; blocks whose count reaches 0 go to the
  *tail* of the free queue, the sequence's last block first (so the chain is evicted from its end
  and never leaves an orphaned tail). They stay cached until their slot is reused. The free queue
  starts as blocks ``0 .. num_blocks - 1`` in order; eviction takes the head: least recently freed
  first.
- ``stats()``: one ``allocate`` is one request; ``query_tokens`` sums the prompt lengths and
  ``hit_tokens`` the tokens served from the cache.

Where this differs from vLLM v1 (docs/prefix_cache.md): no reserved null block (vLLM keeps block
0 aside); the extra key is one hashable value (vLLM chains LoRA and multimodal keys per block and
the cache salt in the first block -- equivalent under chaining); when two sequences compute the
same block, the first one cached keeps the key and the duplicate stays uncached (vLLM keeps both
under one hash: a choice, below); stats count admitted requests (``allocate``), not every lookup.

The law and the reference's choices. Everything above is the law (what any correct prefix cache
of this contract does), except one choice, checked only for implementations that declare
``TOKEN_EXACT = True``:

- *which block keeps a key computed twice.* Two sequences can fill the same full block (same extra
  key, same prefix) independently: the second was allocated before the first cached it, or its
  hit was capped by the last-token rule. The reference keeps the first block cached and leaves the
  duplicate uncached (and caches the duplicate if a later ``mark_computed`` covers it after the
  key was evicted); nano-vllm moves the key to the newest block; vLLM keeps both. The law allows
  each of these: after ``mark_computed`` a key is held by some of its old holders and the blocks
  that call computed for it, never by none if it was cached or was just computed for the first
  time; a hit is *any* block that is cached under that key. Because the blocks differ, the later
  free-queue order, evictions and block ids follow the engine's choice; the law follows them too
  (spec_tests/prefix_cache/oracle.py ``LawModel``). Hit lengths stay the longest run of block
  keys that have a cached holder -- so after evictions an engine that keeps both copies may hit
  where the reference misses; both are lawful.

Bad input. Every check runs before any state changes, so a call that raises changes nothing:
sizes are ints >= 1 (``TypeError`` / ``ValueError`` naming ``num_blocks`` or ``block_size``); a
sequence id is an int or str (``TypeError`` naming ``seq``); ``tokens`` is a non-empty list or
tuple of ints >= 0 (``TypeError`` for another type or a non-int element, ``ValueError`` for an
empty one or a negative token, naming ``tokens``); a bool is not an int anywhere here;
``extra_key`` is hashable (``TypeError`` naming ``extra_key``); allocating a live seq is a
``ValueError`` naming ``seq``; an unknown (or freed) seq a ``KeyError`` whose message shows the
seq's ``repr``; ``n_tokens`` an int (``TypeError``) in ``[0, len(tokens)]`` (``ValueError``),
naming ``n_tokens``; a pool that cannot hold the request -- counting the free cached blocks its
hits take off the queue -- raises ``ValueError`` saying "out of blocks".
"""
from __future__ import annotations

from reference._checks import check_int, is_int

__all__ = ["PrefixCache"]  # the contract: what an implementation must provide
__optional__: list[str] = []


def check_seq(seq) -> None:
    if not (is_int(seq) or isinstance(seq, str)):
        raise TypeError(f"seq must be an int or a str (a sequence id), got {seq!r}")


def check_tokens(tokens) -> tuple:
    if not isinstance(tokens, (list, tuple)):
        raise TypeError(f"tokens must be a list or tuple of ints, got {type(tokens).__name__}")
    if not tokens:
        raise ValueError("tokens must not be empty")
    for t in tokens:
        if not is_int(t):
            raise TypeError(f"tokens must be ints, got {t!r}")
        if t < 0:
            raise ValueError(f"tokens must be >= 0, got {t}")
    return tuple(tokens)


def check_extra_key(extra_key) -> None:
    try:
        hash(extra_key)
    except TypeError:
        raise TypeError(f"extra_key must be hashable, got {type(extra_key).__name__}") from None


class PrefixCache:
    """A pool of ``num_blocks`` blocks of ``block_size`` tokens with automatic prefix caching."""

    def __init__(self, num_blocks: int, block_size: int):
        self.num_blocks = check_int("num_blocks", num_blocks, minimum=1)
        self.block_size = check_int("block_size", block_size, minimum=1)
        self.refs = [0] * self.num_blocks
        self.free_queue = list(range(self.num_blocks))   # head = next to reuse
        self.cache: dict = {}                            # key -> block
        self.block_key: dict = {}                        # block -> key (cached blocks only)
        self.tables: dict = {}                           # seq -> [block]
        self.prompts: dict = {}                          # seq -> (tokens, extra_key)
        self._stats = {"requests": 0, "query_tokens": 0, "hit_tokens": 0}

    # --- keys -----------------------------------------------------------------------------------
    def _key(self, tokens: tuple, extra_key, i: int):
        """The key of full block ``i``: the extra key and every token up to the block's end."""
        return (extra_key, tokens[:(i + 1) * self.block_size])

    def _hits(self, tokens: tuple, extra_key) -> list:
        max_blocks = (len(tokens) - 1) // self.block_size   # the last token is never a hit
        hits = []
        for i in range(max_blocks):
            block = self.cache.get(self._key(tokens, extra_key, i))
            if block is None:
                break
            hits.append(block)
        return hits

    # --- the contract ---------------------------------------------------------------------------
    def lookup(self, tokens, extra_key=None) -> list:
        """The cached blocks of the longest block-aligned prefix of ``tokens`` (at most
        ``len(tokens) - 1`` tokens). A read: changes nothing, not even the stats."""
        tokens = check_tokens(tokens)
        check_extra_key(extra_key)
        return self._hits(tokens, extra_key)

    def allocate(self, seq, tokens, extra_key=None) -> int:
        """Give ``seq`` a block table for ``tokens``: the cached prefix's blocks (shared), then
        fresh blocks from the head of the free queue. Returns the number of tokens served from
        the cache (a multiple of ``block_size``, at most ``len(tokens) - 1``)."""
        check_seq(seq)
        tokens = check_tokens(tokens)
        check_extra_key(extra_key)
        if seq in self.tables:
            raise ValueError(f"seq {seq!r} is already allocated")
        hits = self._hits(tokens, extra_key)
        need = -(-len(tokens) // self.block_size) - len(hits)
        revived = sum(1 for b in hits if self.refs[b] == 0)
        if need + revived > len(self.free_queue):
            raise ValueError(f"out of blocks: seq {seq!r} needs {need + revived}, "
                             f"{len(self.free_queue)} free")
        for b in hits:
            if self.refs[b] == 0:
                self.free_queue.remove(b)      # off the free queue (O(n) here; O(1) in optimized)
            self.refs[b] += 1
        table = list(hits)
        for _ in range(need):
            b = self.free_queue.pop(0)         # least recently freed
            key = self.block_key.pop(b, None)
            if key is not None:                # evicted: its slot is reused
                del self.cache[key]
            self.refs[b] = 1
            table.append(b)
        self.tables[seq] = table
        self.prompts[seq] = (tokens, extra_key)
        hit_tokens = len(hits) * self.block_size
        self._stats["requests"] += 1
        self._stats["query_tokens"] += len(tokens)
        self._stats["hit_tokens"] += hit_tokens
        return hit_tokens

    def mark_computed(self, seq, n_tokens: int) -> None:
        """The first ``n_tokens`` tokens of ``seq`` are in the KV cache: cache its full blocks."""
        check_seq(seq)
        if seq not in self.tables:
            raise KeyError(f"seq {seq!r} is not allocated (never allocated, or already freed)")
        tokens, extra_key = self.prompts[seq]
        check_int("n_tokens", n_tokens, minimum=0)
        if n_tokens > len(tokens):
            raise ValueError(f"n_tokens must be <= len(tokens) = {len(tokens)}, got {n_tokens}")
        full = n_tokens // self.block_size
        for i in range(full):
            b = self.tables[seq][i]
            key = self._key(tokens, extra_key, i)
            if b in self.block_key or key in self.cache:
                continue                       # already cached (by this block or another)
            self.cache[key] = b
            self.block_key[b] = key

    def free(self, seq) -> None:
        """Drop ``seq``: each block loses a reference; those at 0 join the free queue's tail,
        the last block first. They stay cached until reused."""
        check_seq(seq)
        if seq not in self.tables:
            raise KeyError(f"seq {seq!r} is not allocated (never allocated, or already freed)")
        table = self.tables.pop(seq)
        del self.prompts[seq]
        for b in reversed(table):
            self.refs[b] -= 1
            if self.refs[b] == 0:
                self.free_queue.append(b)

    # --- observation ----------------------------------------------------------------------------
    @property
    def num_free_blocks(self) -> int:
        """Blocks with ref count 0 (cached or not): what an allocation can take."""
        return len(self.free_queue)

    def block_table(self, seq) -> list:
        check_seq(seq)
        if seq not in self.tables:
            raise KeyError(f"seq {seq!r} is not allocated (never allocated, or already freed)")
        return list(self.tables[seq])

    def ref_count(self, block: int) -> int:
        check_int("block", block, minimum=0)
        if block >= self.num_blocks:
            raise ValueError(f"block must be in [0, {self.num_blocks}), got {block}")
        return self.refs[block]

    def is_cached(self, block: int) -> bool:
        """Whether ``block`` holds a cached full block (a hit for the prefix it ends)."""
        check_int("block", block, minimum=0)
        if block >= self.num_blocks:
            raise ValueError(f"block must be in [0, {self.num_blocks}), got {block}")
        return block in self.block_key

    def free_queue_order(self) -> list:
        """The free blocks, next to be reused first."""
        return list(self.free_queue)

    def stats(self) -> dict:
        """``{"requests", "query_tokens", "hit_tokens"}`` summed over every ``allocate``."""
        return dict(self._stats)
