"""A wrapped third-party engine for `prefix_cache`: nano-vllm's ``BlockManager``
(GeeeekExplorer/nano-vllm, ``nanovllm/engine/block_manager.py`` at the commit in ``UPSTREAM``),
with its ``Sequence`` (``nanovllm/engine/sequence.py``) and ``SamplingParams``
(``nanovllm/sampling_params.py``). The files are fetched, never copied here: they are loaded,
unmodified, from ``conformance.upstream.locate`` (``.upstream/`` of the checkout; ``inferspec
upstream`` fetches them), and this module raises ``conformance.upstream.Unavailable`` at import
when they are absent.

Stubbed imports: ``xxhash``, only when it is not installed -- a stand-in with upstream's API
(``xxh64()``, ``update``, ``intdigest``) over ``hashlib.blake2b`` with an 8-byte digest. Hash
values differ from xxh64's; block keys stay chained the way upstream chains them (the parent's
64-bit hash, then the block's tokens as int64 bytes), and no test depends on the values.
``numpy`` is imported as upstream does.

How the contract maps onto upstream (upstream's logic runs as is; what is written here is
argument checking, bookkeeping of sequence ids and the stats, which upstream does not keep):

* ``allocate(seq, tokens, extra_key)``: a ``Sequence`` of the tokens (its ``block_size`` set on
  the instance; upstream's engine sets the class attribute), ``can_allocate`` (``-1``: out of
  blocks -> ``ValueError``) then ``allocate(seq, num_cached_blocks)``; the hit tokens are
  ``seq.num_cached_tokens``. nano-vllm has no extra key (LoRA, cache salt): the adapter tags each
  token with it -- the pair ``(extra_key, token)`` is interned to a fresh integer id per cache --
  so the same tokens under two keys are different blocks, as when the key enters the first
  block's hash and the chain carries it (the contract's semantics).
* ``mark_computed(seq, n)``: what nano-vllm's scheduler does after a prefill step
  (``Scheduler.postprocess``): ``num_scheduled_tokens = n - num_cached_tokens``,
  ``hash_blocks(seq)``, ``num_cached_tokens += num_scheduled_tokens``; nothing when ``n`` is not
  past ``num_cached_tokens``.
* ``lookup(tokens, extra_key)``: upstream's ``can_allocate`` walk gives the number of hit blocks
  (run with the free list's length read as unbounded, so a lookup never fails for capacity); the
  blocks are read from ``hash_to_block_id`` along upstream's chained ``compute_hash``, as
  ``allocate`` does.
* ``free(seq)``: ``deallocate``. ``num_free_blocks`` and ``free_queue_order()``: ``free_block_ids``
  (a deque, popped at the head, freed blocks appended at the tail, last block first);
  ``ref_count(b)``: ``blocks[b].ref_count``; ``block_table``: ``seq.block_table``;
  ``is_cached(b)``: block ``b`` holds a hash and ``hash_to_block_id`` maps that hash to ``b``.

The law (spec_tests/prefix_cache/oracle.py ``LawModel``): nano-vllm passes it.

Choices where nano-vllm differs from the reference (reported "token-exact ✗", not failures):
when the same full block is computed twice, ``hash_blocks`` points the hash at the *newest* block
(``hash_to_block_id[h] = block.block_id``): the older block is no longer cached (its ``hash``
stays set, so evicting it later leaves the key alone), where the reference keeps the first block
and leaves the duplicate uncached. After that, hits and evictions follow different blocks, so the
choice-marked tests (``test_exhaustive_reference_choices``,
``test_state_machine_reference_choices``, ``test_duplicate_block_first_keeps_the_key``) fail.
nano-vllm also never caches a block again once its key was moved away and the new holder evicted
(``hash_blocks`` starts at ``num_cached_tokens``): lawful, the reference would re-cache it.
"""
from __future__ import annotations

import hashlib
import importlib.util
import sys
import types

from conformance.upstream import locate

__all__ = ["PrefixCache"]

UPSTREAM = ("GeeeekExplorer/nano-vllm", "bb823b3e06983d71485a8e1f23715ebd87d98ef8",
            ("nanovllm/engine/block_manager.py", "nanovllm/engine/sequence.py",
             "nanovllm/sampling_params.py"))

_ROOT = locate(*UPSTREAM)


class _Xxh64Standin:
    """``xxhash.xxh64`` over blake2b (8 bytes), used only when xxhash is not installed."""

    def __init__(self):
        self._h = hashlib.blake2b(digest_size=8)

    def update(self, data) -> None:
        self._h.update(data)

    def intdigest(self) -> int:
        return int.from_bytes(self._h.digest(), "little")


def _load(name: str, rel: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, _ROOT / rel)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _load_upstream():
    try:
        import xxhash  # noqa: F401
    except ImportError:
        sys.modules["xxhash"] = types.SimpleNamespace(xxh64=_Xxh64Standin)
    for pkg in ("nanovllm", "nanovllm.engine"):
        if pkg not in sys.modules:
            mod = types.ModuleType(pkg)
            mod.__path__ = [str(_ROOT / pkg.replace(".", "/"))]
            sys.modules[pkg] = mod
    _load("nanovllm.sampling_params", "nanovllm/sampling_params.py")
    seq_mod = _load("nanovllm.engine.sequence", "nanovllm/engine/sequence.py")
    bm_mod = _load("nanovllm.engine.block_manager", "nanovllm/engine/block_manager.py")
    return seq_mod.Sequence, bm_mod.BlockManager


Sequence, BlockManager = _load_upstream()


# --- argument checks: the contract's bad-input rules (upstream asserts or trusts its caller) -----
def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _check_size(name: str, value) -> int:
    if not _is_int(value):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return value


def _check_seq(seq) -> None:
    if not (_is_int(seq) or isinstance(seq, str)):
        raise TypeError(f"seq must be an int or a str (a sequence id), got {seq!r}")


def _check_tokens(tokens) -> list:
    if not isinstance(tokens, (list, tuple)):
        raise TypeError(f"tokens must be a list or tuple of ints, got {type(tokens).__name__}")
    if not tokens:
        raise ValueError("tokens must not be empty")
    for t in tokens:
        if not _is_int(t):
            raise TypeError(f"tokens must be ints, got {t!r}")
        if t < 0:
            raise ValueError(f"tokens must be >= 0, got {t}")
    return list(tokens)


def _check_extra_key(extra_key) -> None:
    try:
        hash(extra_key)
    except TypeError:
        raise TypeError(f"extra_key must be hashable, got {type(extra_key).__name__}") from None


class _Unbounded:
    """A stand-in for the free list while ``lookup`` runs upstream's ``can_allocate`` walk: its
    length never limits the answer (can_allocate reads only ``len``)."""

    def __len__(self) -> int:
        return sys.maxsize


class PrefixCache:
    def __init__(self, num_blocks: int, block_size: int):
        self.num_blocks = _check_size("num_blocks", num_blocks)
        self.block_size = _check_size("block_size", block_size)
        self.bm = BlockManager(num_blocks, block_size)
        self.seqs: dict = {}        # seq id -> upstream Sequence
        self.ids: dict = {}         # (extra_key, token) -> the token id upstream sees
        self._stats = {"requests": 0, "query_tokens": 0, "hit_tokens": 0}

    def _sequence(self, tokens: list, extra_key):
        ids = [self.ids.setdefault((extra_key, t), len(self.ids)) for t in tokens]
        s = Sequence(ids)
        s.block_size = self.block_size
        return s

    def _live(self, seq):
        _check_seq(seq)
        if seq not in self.seqs:
            raise KeyError(f"seq {seq!r} is not allocated (never allocated, or already freed)")
        return self.seqs[seq]

    def lookup(self, tokens, extra_key=None) -> list:
        tokens = _check_tokens(tokens)
        _check_extra_key(extra_key)
        s = self._sequence(tokens, extra_key)   # a token never seen gets an id no block holds
        free, self.bm.free_block_ids = self.bm.free_block_ids, _Unbounded()
        try:
            n = self.bm.can_allocate(s)
        finally:
            self.bm.free_block_ids = free
        blocks, h = [], -1
        for i in range(n):
            h = self.bm.compute_hash(s.block(i), h)
            blocks.append(self.bm.hash_to_block_id[h])
        return blocks

    def allocate(self, seq, tokens, extra_key=None) -> int:
        _check_seq(seq)
        tokens = _check_tokens(tokens)
        _check_extra_key(extra_key)
        if seq in self.seqs:
            raise ValueError(f"seq {seq!r} is already allocated")
        s = self._sequence(tokens, extra_key)
        n = self.bm.can_allocate(s)
        if n == -1:
            raise ValueError(f"out of blocks: seq {seq!r} needs more than the "
                             f"{len(self.bm.free_block_ids)} free blocks")
        self.bm.allocate(s, n)
        self.seqs[seq] = s
        self._stats["requests"] += 1
        self._stats["query_tokens"] += len(tokens)
        self._stats["hit_tokens"] += s.num_cached_tokens
        return s.num_cached_tokens

    def mark_computed(self, seq, n_tokens: int) -> None:
        s = self._live(seq)
        if not _is_int(n_tokens):
            raise TypeError(f"n_tokens must be an int, got {type(n_tokens).__name__}")
        if not 0 <= n_tokens <= s.num_tokens:
            raise ValueError(f"n_tokens must be in [0, {s.num_tokens}], got {n_tokens}")
        if n_tokens <= s.num_cached_tokens:
            return
        s.num_scheduled_tokens = n_tokens - s.num_cached_tokens     # Scheduler.postprocess
        self.bm.hash_blocks(s)
        s.num_cached_tokens += s.num_scheduled_tokens
        s.num_scheduled_tokens = 0

    def free(self, seq) -> None:
        s = self._live(seq)
        self.bm.deallocate(s)
        del self.seqs[seq]

    @property
    def num_free_blocks(self) -> int:
        return len(self.bm.free_block_ids)

    def block_table(self, seq) -> list:
        return list(self._live(seq).block_table)

    def _check_block(self, block) -> None:
        if not _is_int(block):
            raise TypeError(f"block must be an int, got {type(block).__name__}")
        if not 0 <= block < self.num_blocks:
            raise ValueError(f"block must be in [0, {self.num_blocks}), got {block}")

    def ref_count(self, block: int) -> int:
        self._check_block(block)
        return self.bm.blocks[block].ref_count

    def is_cached(self, block: int) -> bool:
        self._check_block(block)
        h = self.bm.blocks[block].hash
        return h != -1 and self.bm.hash_to_block_id.get(h) == block

    def free_queue_order(self) -> list:
        return list(self.bm.free_block_ids)

    def stats(self) -> dict:
        return dict(self._stats)
