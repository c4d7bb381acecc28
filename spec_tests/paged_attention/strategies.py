"""Paged-attention problems: contiguous per-sequence K/V scattered into a paged cache.

A :class:`PagedCase` is plain data (its repr is valid Python, so a falsifying example can be
pasted back). :meth:`PagedCase.build` draws each sequence's keys and values *contiguously* (the
oracle's input), then scatters them into a pool of blocks in a random order through a block table:

* block ids are a random permutation of the pool (non-contiguous, out of order);
* with ``shared_blocks`` > 0 every other sequence starts with the first full blocks of sequence 0
  (the same ids: a shared prompt prefix), and its keys there are sequence 0's;
* the table has ``spare_cols`` columns past the longest sequence's blocks; unused entries hold ids
  of blocks nobody owns;
* the pool is a view into a buffer with one NaN block on either side, so that an implementation
  reading block -1 or block num_blocks (padding it should ignore) gets NaN, not a segfault;
* every slot no query can see is NaN: the slots past ``seq_len`` in the partial last block, whole
  blocks left of the window, the spare blocks of the pool. An implementation that reads one of
  them (and lets it reach the output) returns NaN.

The builder restates the contract's positions from scratch (query ``i`` of ``q_len`` sits at
``seq_len - q_len + i`` and sees ``j >= pos - window``); it does not import the reference.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from conformance.strategies import DTYPES, generator, seeds


@dataclass(frozen=True)
class PagedInputs:
    q: torch.Tensor               # (batch, q_heads, d) or (batch, q_len, q_heads, d)
    k_cache: torch.Tensor         # (num_blocks, block_size, kv_heads, d), NaN where unowned
    v_cache: torch.Tensor
    block_tables: torch.Tensor    # (batch, width) int32
    seq_lens: torch.Tensor        # (batch,) int32
    k: tuple[torch.Tensor, ...]   # per sequence, contiguous (seq_len, kv_heads, d): the oracle's keys
    v: tuple[torch.Tensor, ...]

    @property
    def args(self) -> tuple:
        return self.q, self.k_cache, self.v_cache, self.block_tables, self.seq_lens


@dataclass(frozen=True)
class PagedCase:
    """One batch. ``q_len`` 0 means a rank-3 q (one decode token per sequence); >= 1 a rank-4 q."""

    seq_lens: tuple[int, ...]
    q_len: int
    q_heads: int
    kv_heads: int
    head_dim: int
    block_size: int
    window: int | None
    dtype: str
    seed: int
    shared_blocks: int = 0
    spare_cols: int = 1
    scale: float | None = None

    @property
    def kwargs(self) -> dict:
        return dict(scale=self.scale, window=self.window)

    @property
    def tokens(self) -> int:
        """Queries per sequence."""
        return max(self.q_len, 1)

    def first_seen(self, seq_len: int) -> int:
        """The first position any query of a sequence of ``seq_len`` tokens can see."""
        return 0 if self.window is None else max(0, seq_len - self.tokens - self.window)

    def build(self, device="cpu", dtype: torch.dtype | None = None) -> PagedInputs:
        dt = dtype or DTYPES[self.dtype]
        g = generator(self.seed)
        bs, batch = self.block_size, len(self.seq_lens)
        n_blocks = [-(-n // bs) for n in self.seq_lens]
        full = [n // bs for n in self.seq_lens]
        share = [0] + [min(self.shared_blocks, full[0], full[b]) for b in range(1, batch)]
        owned = sum(n - s for n, s in zip(n_blocks, share))
        pool = owned + 2                                    # two blocks nobody owns
        perm = torch.randperm(pool, generator=g).tolist()
        fresh, unowned = iter(perm[:owned]), perm[owned:]
        width = max(n_blocks, default=0) + self.spare_cols
        pad = torch.tensor(unowned)[torch.randint(0, len(unowned), (batch, width), generator=g)]
        table = pad.to(torch.int32)
        rows = []
        for b in range(batch):
            row = rows[0][:share[b]] if b else []
            row = row + [next(fresh) for _ in range(n_blocks[b] - share[b])]
            table[b, :len(row)] = torch.tensor(row, dtype=torch.int32)
            rows.append(row)

        shape = (self.kv_heads, self.head_dim)
        ks, vs = [], []
        for b, n in enumerate(self.seq_lens):
            k = torch.randn((n, *shape), generator=g)
            v = torch.randn((n, *shape), generator=g)
            if share[b]:                                     # a shared prefix holds sequence 0's tokens
                k[:share[b] * bs], v[:share[b] * bs] = ks[0][:share[b] * bs], vs[0][:share[b] * bs]
            ks.append(k)
            vs.append(v)
        k_cache = torch.full((pool, bs, *shape), float("nan"))
        v_cache = torch.full((pool, bs, *shape), float("nan"))
        for b, n in enumerate(self.seq_lens):
            lo = self.first_seen(n) // bs * bs             # whole blocks left of the window stay NaN
            pos = torch.arange(lo, n)
            blocks = table[b].long()[pos // bs]
            k_cache[blocks, pos % bs] = ks[b][lo:]
            v_cache[blocks, pos % bs] = vs[b][lo:]
        q_shape = (batch, self.q_heads, self.head_dim) if self.q_len == 0 else \
            (batch, self.q_len, self.q_heads, self.head_dim)
        q = torch.randn(q_shape, generator=g)
        to = dict(device=device, dtype=dt)
        k_cache, v_cache = (_with_margin(c.to(**to)) for c in (k_cache, v_cache))
        return PagedInputs(q.to(**to), k_cache, v_cache, table.to(device),
                           torch.tensor(self.seq_lens, dtype=torch.int32, device=device),
                           tuple(k.to(**to) for k in ks), tuple(v.to(**to) for v in vs))


def _with_margin(cache: torch.Tensor) -> torch.Tensor:
    """``cache`` as a view into a buffer with one NaN block before and after it."""
    buf = torch.full((cache.shape[0] + 2, *cache.shape[1:]), float("nan"), dtype=cache.dtype, device=cache.device)
    buf[1:-1] = cache
    return buf[1:-1]


def lengths(max_len: int, tile: int = 16) -> st.SearchStrategy[int]:
    """Sequence lengths, half of them within one of a multiple of ``tile`` (tile, split and block
    boundaries are where paging and split-KV kernels go wrong), 0 and 1 included."""
    near = st.builds(lambda m, d: max(0, m * tile + d), st.integers(0, max_len // tile), st.integers(-1, 1))
    return st.one_of(st.integers(0, max_len), near, st.sampled_from([0, 1]))


BLOCK_SIZES = (1, 2, 4, 8, 16, 32, 64, 128)


@st.composite
def paged_cases(draw, *, q_lens=(0,), max_len: int = 80, max_batch: int = 3, head_dims=(16, 32),
                groups=(1, 2, 4), max_kv_heads: int = 2, dtypes=("float16", "bfloat16", "float32"),
                block_sizes=BLOCK_SIZES):
    batch = draw(st.integers(1, max_batch))
    seq_lens = tuple(draw(st.lists(lengths(max_len), min_size=batch, max_size=batch)))
    kv_heads = draw(st.integers(1, max_kv_heads))
    return PagedCase(
        seq_lens=seq_lens, q_len=draw(st.sampled_from(q_lens)),
        q_heads=kv_heads * draw(st.sampled_from(groups)), kv_heads=kv_heads,
        head_dim=draw(st.sampled_from(head_dims)), block_size=draw(st.sampled_from(block_sizes)),
        window=draw(st.one_of(st.none(), st.none(), st.integers(0, max_len))),
        dtype=draw(st.sampled_from(dtypes)), seed=draw(seeds),
        shared_blocks=draw(st.sampled_from([0, 0, 1, 3])), spare_cols=draw(st.integers(0, 3)),
        scale=draw(st.one_of(st.none(), st.just(0.0), st.floats(0.05, 1.0))))
