"""Parallel sampling: n branches of one prompt sharing its KV through copy-on-write (course 08.06).

The course's claim: spend the budget sideways (best-of-n, self-consistency: n samples of one
prompt) and price it properly -- "n branches share one prompt prefix but each own their divergent
KV, so the cost is sublinear in memory and linear in decode". The prompt is prefilled once; the n
branches are *forks* of it in the paged KV cache (concept ``paged``: ``BlockAllocator.fork``
shares every block, ``append`` copies a shared partial last block before writing into it), so the
prompt's full blocks are held once, whatever n, and each branch holds only the blocks of its own
tokens. Every branch still decodes its own tokens: n x the decode work.

The memory law (closed forms; ``B`` = ``block_size``, ``P`` = prompt tokens, ``F = P // B`` full
prompt blocks, ``k_i`` = the tokens branch i has written after the prompt, ``A`` = the branches
with ``k_i > 0``, ``n`` branches, all forked from the prompt's sequence):

    shared_blocks       = F + sum_{i: k_i > 0} (ceil((P + k_i) / B) - F) + [P % B > 0 and A < n]
    independent_blocks  = sum_i ceil((P + k_i) / B)                (n separate copies of the prompt)
    copy_on_write_count = A - [A == n]   if P % B > 0,   else 0

The prompt's partial last block (``P % B > 0``) is the one block copied on write: each branch that
writes into it while another still holds it gets a copy; the last holder writes in place, so if
every branch writes, n - 1 copies are made. Neither count depends on the order in which the
branches write. A full shared block is never copied. Freeing a branch frees exactly the blocks
that no other branch holds.

Contract
--------
``shared_blocks(prompt_len, new_tokens, block_size) -> int``,
``independent_blocks(prompt_len, new_tokens, block_size) -> int``,
``copy_on_write_count(prompt_len, new_tokens, block_size) -> int``
    the closed forms above: ``prompt_len`` an int >= 0, ``new_tokens`` a non-empty list or tuple of
    ints >= 0 (one per branch: ``k_i``), ``block_size`` an int >= 1.

``BranchKV(num_blocks, block_size, *, layers=1, kv_heads=1, head_dim=1, dtype=torch.float32,
device="cpu")``: a paged K/V pool of ``num_blocks`` blocks of ``block_size`` token slots for every
layer, and the block tables of its sequences (ids: ints or strs). Block tables, reference counts,
copy-on-write and the errors of the ids are exactly those of ``paged.BlockAllocator`` (same method
names and meanings); in addition the K/V data moves with them. ``k``/``v`` arguments are tensors
of shape ``(layers, n, kv_heads, head_dim)`` and the pool's dtype (``n >= 0`` new tokens).

``add(seq, k, v) -> None``
    a new sequence holding these ``n`` tokens' K/V in ``ceil(n / block_size)`` fresh blocks.
``fork(parent, child) -> None``
    the child shares every block of the parent (no block taken, no data copied).
``append(seq, k, v) -> list[tuple[int, int]]``
    grows ``seq`` by ``n`` tokens and returns the copy-on-write list ``[(src, dst)]`` (as
    ``paged.BlockAllocator.append``); the K/V of every slot of ``src``, in every layer, are copied
    into ``dst`` before the new tokens are written, so no other sequence's K/V changes.
``free(seq) -> None``
    drops the sequence; a block no other sequence holds goes back to the pool.
``read(seq) -> (k, v)``
    the sequence's K/V, ``(layers, num_tokens, kv_heads, head_dim)`` each, in token order (copies).
``block_table(seq)``, ``num_tokens(seq)``, ``sequences()``, ``ref_count(block)``, the properties
    ``num_free_blocks`` and ``blocks_in_use`` (``num_blocks - num_free_blocks``), the attributes
    ``num_blocks`` and ``block_size``.

``parallel_sample(model, prompt, n, max_tokens, sample_fn, *, seeds=None, block_size=16,
num_blocks=None) -> ParallelSamples``
    ``model`` a reference ``Transformer``; ``prompt`` a non-empty list or tuple of token ids in
    ``[0, vocab_size)``; ``n`` branches (int >= 1), each generating exactly ``max_tokens`` tokens
    (int >= 1, ``len(prompt) + max_tokens <= max_seq_len``); ``sample_fn(logits, generator) ->
    tokens`` as in concept ``generate`` (``logits`` (1, vocab), returns an integer tensor of shape
    (1,) with ids in the vocabulary), called once per branch per token with that branch's own
    generator, ``torch.Generator().manual_seed(seeds[i])`` (a CPU generator, the same object for
    all of the branch's calls); ``seeds`` a list or tuple of n ints in ``[0, 2**63)``, default
    ``[0, 1, ..., n - 1]``. The prompt is prefilled once into a ``BranchKV`` of ``num_blocks``
    blocks (default None: exactly ``shared_blocks(len(prompt), [max_tokens - 1] * n,
    block_size)``, what the run needs), the branches are forks of it, and each step feeds every
    branch its last token (the last token is never fed). Returns ``ParallelSamples``:

    - ``tokens[i]``: branch i's ``max_tokens`` token ids (ints);
    - ``logits[i]``: ``(max_tokens, vocab)`` in the model's dtype, row t the logits token t was
      sampled from (row 0, the prompt's last logits, is the same for every branch);
    - ``block_tables[i]``: branch i's block table at the end (``ceil((P + max_tokens - 1) / B)``
      block ids in ``[0, num_blocks)``);
    - ``blocks_in_use[t]``: the pool's blocks in use once every branch has sampled token t
      (each branch's KV then holds ``P + t`` tokens): ``shared_blocks(P, [t] * n, B)``;
    - ``copies``: every copy-on-write made, ``(branch, src, dst)`` in the order made.

    The law: branch i's tokens and logits are those of ``generate(model, [prompt], max_tokens,
    sample_fn=sample_fn, generator=torch.Generator().manual_seed(seeds[i]))`` -- n independent
    runs -- within the tolerance rule (a token may differ only at a genuine near-tie of the float64
    logits, docs/parallel_sampling.md); the block counts and copies obey the closed forms; the
    tables share exactly the prompt's full blocks.

Choices the law leaves open (checked only as the law allows): which free block a call takes (the
spec compares block structure, never ids) and so which branch keeps the prompt's partial block
(the reference's branches write in branch order each step, so branch n - 1 keeps it).

Bad input (checked before anything changes; a rejected call leaves the cache as it was): sizes not
ints >= 1 (``num_blocks``, ``block_size``, ``layers``, ``kv_heads``, ``head_dim``), ``dtype`` not a
floating torch dtype (``TypeError``); ``k``/``v`` not tensors (``TypeError``), of another rank or
shape, or ``k`` and ``v`` of different shapes (``ValueError`` naming ``k`` or ``v``), of another
dtype (``TypeError``); the ids' errors of ``paged.BlockAllocator`` (``TypeError``, ``KeyError`` for
an unknown or freed sequence, ``ValueError`` for a live one and for *out of blocks*);
``prompt_len``/``new_tokens``/``block_size`` of the closed forms; ``parallel_sample``'s ``model``
(no ``config``: ``TypeError``), ``prompt`` (not a non-empty list/tuple of ints in the vocabulary),
``n``, ``max_tokens`` (past ``max_seq_len``: ``ValueError`` naming ``max_tokens``), ``sample_fn``
(not callable: ``TypeError``; returning anything but integer ids of shape (1,) in the vocabulary:
``ValueError``), ``seeds`` (not n ints in ``[0, 2**63)``), ``block_size``, ``num_blocks`` (not
None or an int >= 1; fewer than the run needs: ``ValueError`` naming ``num_blocks``, "out of
blocks"). A bool is not an int here. Each message names the argument.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from reference._checks import FLOAT_DTYPES, check_int, is_int
from reference.batching import forward_batch
from reference.paged import BlockAllocator, blocks_for

__all__ = ["shared_blocks", "independent_blocks", "copy_on_write_count", "BranchKV", "parallel_sample",
           "ParallelSamples"]  # the contract
__optional__: list[str] = []

SEED_LIMIT = 2 ** 63


# (functional form: the annotations stay types under ``from __future__ import annotations``)
ParallelSamples = NamedTuple("ParallelSamples", [("tokens", list), ("logits", list), ("block_tables", list),
                                                 ("blocks_in_use", list), ("copies", list)])
ParallelSamples.__doc__ = ("What :func:`parallel_sample` returns: each branch's tokens and logits, its final block "
                           "table, the blocks in use after each token, the copies on write (module docstring).")


# --- the closed forms ---------------------------------------------------------------------------
def _check_branches(prompt_len, new_tokens, block_size) -> tuple[int, list, int]:
    check_int("prompt_len", prompt_len, minimum=0)
    if not isinstance(new_tokens, (list, tuple)):
        raise TypeError(f"new_tokens must be a list or tuple of ints (one per branch), got {type(new_tokens).__name__}")
    if not new_tokens:
        raise ValueError("new_tokens must hold one count per branch, got none")
    for k in new_tokens:
        check_int("new_tokens", k, minimum=0)
    return prompt_len, list(new_tokens), check_int("block_size", block_size, minimum=1)


def shared_blocks(prompt_len: int, new_tokens, block_size: int) -> int:
    """Blocks in use when ``len(new_tokens)`` branches forked from one prompt of ``prompt_len``
    tokens have written ``new_tokens[i]`` tokens each: the prompt's full blocks once, each
    branch's own blocks, and the prompt's partial block while a branch that never wrote holds it."""
    p, ks, b = _check_branches(prompt_len, new_tokens, block_size)
    full = p // b
    grown = [k for k in ks if k > 0]
    own = sum(blocks_for(p + k, b) - full for k in grown)
    return full + own + (1 if p % b and len(grown) < len(ks) else 0)


def independent_blocks(prompt_len: int, new_tokens, block_size: int) -> int:
    """Blocks the same branches hold as independent sequences, each with its own prompt copy."""
    p, ks, b = _check_branches(prompt_len, new_tokens, block_size)
    return sum(blocks_for(p + k, b) for k in ks)


def copy_on_write_count(prompt_len: int, new_tokens, block_size: int) -> int:
    """Copies of the prompt's partial last block: one per branch that writes while another holds it."""
    p, ks, b = _check_branches(prompt_len, new_tokens, block_size)
    grown = sum(1 for k in ks if k > 0)
    return grown - (grown == len(ks)) if p % b else 0


# --- the K/V pool with copy-on-write ------------------------------------------------------------
class BranchKV:
    """Paged K/V storage whose sequences fork and copy on write (module docstring: the contract)."""

    def __init__(self, num_blocks: int, block_size: int, *, layers: int = 1, kv_heads: int = 1,
                 head_dim: int = 1, dtype: torch.dtype = torch.float32, device="cpu"):
        self.allocator = BlockAllocator(num_blocks, block_size)
        self.num_blocks, self.block_size = num_blocks, block_size
        shape = (check_int("layers", layers, minimum=1), num_blocks, block_size,
                 check_int("kv_heads", kv_heads, minimum=1), check_int("head_dim", head_dim, minimum=1))
        if dtype not in FLOAT_DTYPES:
            raise TypeError(f"dtype must be one of {FLOAT_DTYPES}, got {dtype!r}")
        self.k_pool = torch.zeros(shape, dtype=dtype, device=device)
        self.v_pool = torch.zeros(shape, dtype=dtype, device=device)

    # -- observables (the allocator's) --------------------------------------------------------
    @property
    def num_free_blocks(self) -> int:
        return self.allocator.num_free_blocks

    @property
    def blocks_in_use(self) -> int:
        return self.num_blocks - self.allocator.num_free_blocks

    def block_table(self, seq) -> list[int]:
        return self.allocator.block_table(seq)

    def num_tokens(self, seq) -> int:
        return self.allocator.num_tokens(seq)

    def sequences(self) -> list:
        return self.allocator.sequences()

    def ref_count(self, block: int) -> int:
        return self.allocator.ref_count(block)

    def read(self, seq) -> tuple[torch.Tensor, torch.Tensor]:
        """(k, v) of ``seq``: (layers, num_tokens, kv_heads, head_dim), in token order."""
        blocks, slots = self._slots(seq, 0, self.allocator.num_tokens(seq))
        return self.k_pool[:, blocks, slots].clone(), self.v_pool[:, blocks, slots].clone()

    # -- operations ---------------------------------------------------------------------------
    def add(self, seq, k: torch.Tensor, v: torch.Tensor) -> None:
        n = self._check_kv(k, v)
        self.allocator.allocate(seq, n)
        self._write(seq, 0, k, v)

    def fork(self, parent, child) -> None:
        self.allocator.fork(parent, child)

    def append(self, seq, k: torch.Tensor, v: torch.Tensor) -> list[tuple[int, int]]:
        n = self._check_kv(k, v)
        start = self.allocator.num_tokens(seq)
        copies = self._grow(seq, n)
        self._write(seq, start, k, v)
        return copies

    def free(self, seq) -> None:
        self.allocator.free(seq)

    # -- helpers ------------------------------------------------------------------------------
    def _check_kv(self, k, v) -> int:
        layers, _, _, kv_heads, head_dim = self.k_pool.shape
        for name, t in (("k", k), ("v", v)):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
            if t.dim() != 4 or t.shape[0] != layers or t.shape[2:] != (kv_heads, head_dim):
                raise ValueError(f"{name} must be (layers={layers}, n, kv_heads={kv_heads}, head_dim={head_dim}), "
                                 f"got {tuple(t.shape)}")
            if t.dtype != self.k_pool.dtype:
                raise TypeError(f"{name} must have the pool's dtype {self.k_pool.dtype}, got {t.dtype}")
        if k.shape != v.shape:
            raise ValueError(f"k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}")
        return k.shape[1]

    def _slots(self, seq, start: int, stop: int):
        """(block ids, slot indices) of positions start..stop-1 of ``seq``."""
        table = torch.tensor(self.allocator.block_table(seq), dtype=torch.long, device=self.k_pool.device)
        positions = torch.arange(start, stop, device=self.k_pool.device)
        return table[positions // self.block_size], positions % self.block_size

    def _grow(self, seq, n: int) -> list[tuple[int, int]]:
        """Room for ``n`` more tokens; the data of every copied-on-write block moves with it."""
        copies = self.allocator.append(seq, n)
        for src, dst in copies:
            self.k_pool[:, dst] = self.k_pool[:, src]
            self.v_pool[:, dst] = self.v_pool[:, src]
        return copies

    def _write(self, seq, start: int, k: torch.Tensor, v: torch.Tensor, layer: int | None = None) -> None:
        """Write positions start.. of ``seq`` (every layer, or ``layer`` alone with k/v of its shape)."""
        blocks, slots = self._slots(seq, start, start + k.shape[-3])
        where = (slice(None),) if layer is None else (layer,)
        self.k_pool[where + (blocks, slots)] = k
        self.v_pool[where + (blocks, slots)] = v


class _BranchView:
    """KVCache's interface (``append(layer, k, v)``, ``seq_len``) over one sequence of a
    ``BranchKV`` for one forward pass of ``forward_batch``: the first layer's append grows the
    sequence (copy-on-write logged as ``(branch, src, dst)``), every layer writes its K/V."""

    def __init__(self, kv: BranchKV, seq, copies: list):
        self.kv, self.seq, self.copies = kv, seq, copies
        self.lengths = [kv.num_tokens(seq)] * kv.k_pool.shape[0]

    @property
    def seq_len(self) -> int:
        return self.lengths[0]

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        start, n = self.lengths[layer], k.shape[2]
        grow = start + n - self.kv.num_tokens(self.seq)     # n at the first layer, 0 at the others
        self.copies.extend((self.seq, src, dst) for src, dst in self.kv._grow(self.seq, grow))
        self.kv._write(self.seq, start, k.squeeze(0).permute(1, 0, 2), v.squeeze(0).permute(1, 0, 2), layer)
        self.lengths[layer] = start + n
        blocks, slots = self.kv._slots(self.seq, 0, start + n)
        return (self.kv.k_pool[layer, blocks, slots].permute(1, 0, 2)[None],
                self.kv.v_pool[layer, blocks, slots].permute(1, 0, 2)[None])


# --- n branches of one prompt ------------------------------------------------------------------
def _check_run(model, prompt, n, max_tokens, sample_fn, seeds, block_size, num_blocks) -> tuple[list, list, int]:
    config = getattr(model, "config", None)
    if config is None or not callable(model):
        raise TypeError(f"model must be a Transformer (a callable with a config), got {type(model).__name__}")
    if not isinstance(prompt, (list, tuple)):
        raise TypeError(f"prompt must be a list or tuple of int token ids, got {type(prompt).__name__}")
    if not prompt:
        raise ValueError("prompt must hold at least one token")
    for t in prompt:
        check_int("prompt", t, minimum=0)
        if t >= config.vocab_size:
            raise ValueError(f"prompt: token id {t} is outside [0, {config.vocab_size})")
    check_int("n", n, minimum=1)
    check_int("max_tokens", max_tokens, minimum=1)
    if len(prompt) + max_tokens > config.max_seq_len:
        raise ValueError(f"max_tokens: prompt ({len(prompt)}) + max_tokens ({max_tokens}) exceeds the model's "
                         f"max_seq_len={config.max_seq_len}")
    if not callable(sample_fn):
        raise TypeError(f"sample_fn must be callable, got {type(sample_fn).__name__}")
    if seeds is None:
        seeds = list(range(n))
    if not isinstance(seeds, (list, tuple)):
        raise TypeError(f"seeds must be a list or tuple of n ints, got {type(seeds).__name__}")
    if len(seeds) != n:
        raise ValueError(f"seeds must hold n = {n} ints, got {len(seeds)}")
    for s in seeds:
        if not is_int(s):
            raise TypeError(f"seeds must hold ints, got {s!r}")
        if not 0 <= s < SEED_LIMIT:
            raise ValueError(f"seeds must be in [0, 2**63), got {s}")
    need = shared_blocks(len(prompt), [max_tokens - 1] * n, check_int("block_size", block_size, minimum=1))
    if check_int("num_blocks", num_blocks, minimum=1, allow_none=True) is None:
        num_blocks = need
    if num_blocks < need:
        raise ValueError(f"num_blocks: out of blocks: {n} branches of {len(prompt)} + {max_tokens} tokens need "
                         f"{need} blocks of {block_size}, the pool has {num_blocks}")
    return list(prompt), list(seeds), num_blocks


def _draw(sample_fn, logits: torch.Tensor, generator: torch.Generator, vocab: int) -> int:
    token = sample_fn(logits, generator)
    if not isinstance(token, torch.Tensor) or tuple(token.shape) != (1,) or token.dtype.is_floating_point \
            or token.dtype.is_complex or token.dtype == torch.bool:
        raise ValueError(f"sample_fn must return an integer tensor of shape (1,), got {token!r}")
    value = int(token.item())
    if not 0 <= value < vocab:
        raise ValueError(f"sample_fn returned token id {value}, outside [0, {vocab})")
    return value


@torch.no_grad()
def parallel_sample(model, prompt, n: int, max_tokens: int, sample_fn, *, seeds=None, block_size: int = 16,
                    num_blocks: int | None = None) -> ParallelSamples:
    """n branches of ``prompt``, prefilled once and forked with copy-on-write (module docstring)."""
    prompt, seeds, num_blocks = _check_run(model, prompt, n, max_tokens, sample_fn, seeds, block_size, num_blocks)
    c = model.config
    kv = BranchKV(num_blocks, block_size, layers=c.n_layers, kv_heads=c.n_kv_heads, head_dim=c.head_dim,
                  dtype=model.dtype, device=model.device)
    empty = torch.empty(c.n_layers, 0, c.n_kv_heads, c.head_dim, dtype=model.dtype, device=model.device)
    copies: list = []
    kv.add(0, empty, empty)
    prefill = forward_batch(model, [torch.tensor(prompt, device=model.device)], [_BranchView(kv, 0, copies)])
    for b in range(1, n):
        kv.fork(0, b)
    generators = [torch.Generator().manual_seed(s) for s in seeds]
    step = [prefill[0][-1:]] * n
    tokens, logits, in_use = [[] for _ in range(n)], [[] for _ in range(n)], []
    for t in range(max_tokens):
        if t > 0:   # every branch feeds its last token: one ragged forward over the n branches
            fed = [torch.tensor(tokens[b][-1:], device=model.device) for b in range(n)]
            step = forward_batch(model, fed, [_BranchView(kv, b, copies) for b in range(n)])   # (1, vocab) each
        for b in range(n):
            tokens[b].append(_draw(sample_fn, step[b], generators[b], c.vocab_size))
            logits[b].append(step[b])
        in_use.append(kv.blocks_in_use)
    return ParallelSamples(tokens, [torch.cat(rows) for rows in logits], [kv.block_table(b) for b in range(n)],
                           in_use, copies)
