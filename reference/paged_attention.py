"""Paged attention: decode attention over a block table (course 03.06-03.08; chapter 3, vLLM).

A paged KV cache is a pool of fixed-size *blocks* of ``block_size`` token slots. A sequence does
not own a contiguous stretch of memory: its *block table* lists the blocks holding its tokens, in
order, so token position ``j`` of sequence ``b`` lives in

    block  block_tables[b, j // block_size]      slot  j % block_size

Blocks need not be contiguous, in order, or private: sequences that share a prompt prefix share
its blocks (the same id in several rows). ``seq_lens[b]`` counts the tokens of sequence ``b`` in
the cache, *including* the query tokens themselves (their K/V were written before attention runs,
as in vLLM). This module is the math of attention over such a cache; allocating the blocks is the
``paged`` concept.

Layout ("NHD", vLLM v1's and FlashInfer's default):

    q                  (batch, q_heads, head_dim)            one decode token per sequence, or
                       (batch, q_len, q_heads, head_dim)     a few (speculative) tokens each
    k_cache, v_cache   (num_blocks, block_size, kv_heads, head_dim)
    block_tables       (batch, max_blocks_per_seq)  int32/int64
    seq_lens           (batch,)                     int32/int64

Why (num_blocks, block_size, kv_heads, head_dim): appending a token writes one contiguous row of
``kv_heads * head_dim`` values per layer (one store for all heads, the write side of every decode
step), every slot of a block is one contiguous chunk, and one head's key is ``head_dim``
contiguous values, which a kernel reads as whole 128- or 256-byte rows. The per-head layout
(num_blocks, kv_heads, block_size, head_dim) makes a head's block contiguous instead but scatters
a token's write over ``kv_heads`` places; vLLM v1 and FlashInfer (``kv_layout="NHD"``) chose this
one, and so does this contract.

Math: sequence ``b`` is attention (reference/attention.py) of its queries over the keys and
values of its first ``seq_lens[b]`` positions, causal and bottom-right aligned: query ``i`` of
``q_len`` sits at position ``p_i = seq_len - q_len + i`` and sees keys ``j <= p_i`` (and, with a
``window``, ``j >= p_i - window``: FlashAttention's left window). GQA/MQA: query head ``h`` reads
KV head ``h // (q_heads // kv_heads)``. Precision is attention's: scores and P @ V in the input
dtype, softmax in float32 (float64 for float64 inputs); ``lse`` is float32 (float64).

Edge cases (pinned by the tests):
    seq_lens[b] == 0       allowed (a padding row of a batch, e.g. a CUDA-graph-padded decode
                           step): its output is 0 and its lse -inf, as for any query that sees
                           no key; seq_len < q_len likewise masks the first q_len - seq_len queries
    unused table entries   entries past ceil(seq_len / block_size) are ignored: neither read nor
                           validated (engines pad with 0 or -1)
    never read             an implementation reads only slots of positions its queries can see:
                           the partial last block's slots past seq_len, blocks entirely left of
                           the window (an engine may have freed and reused them) and every other
                           block of the pool may hold anything, NaN included
Bad input raises TypeError/ValueError naming the argument as a word of its own
(``check_paged_attention_inputs``): ``TypeError`` for a wrong kind (non-tensors, non-floating
``q``/caches, a cache dtype other than ``q``'s, ``block_tables``/``seq_lens`` not int32/int64, a
float or bool ``window``, a ``scale`` that is not a real number), ``ValueError`` for an illegal
value (ranks, shapes, lengths, block ids, a negative window, a non-finite scale). Where the sizes
of two arguments disagree the message names the dimension: ``heads`` (q heads not a multiple of
kv heads), ``head_dim`` (q's and the caches' differ); a table row too short for its length names
both ``block_tables`` and ``seq_lens``.

Defaults: ``scale=None`` is ``1 / sqrt(head_dim)``, ``window=None`` no window,
``return_lse=False`` returns ``out`` alone; omitting an argument is passing its default.
"""
from __future__ import annotations

import math

import torch

from reference._checks import FLOAT_DTYPES, check_as_planned, check_int, check_real, check_tensor, compute_dtype
from reference.attention import attention

__all__ = ["paged_attention"]  # the contract: what an implementation must provide
__optional__ = ["PagedAttentionPlan"]  # checked when an implementation provides them

INDEX_DTYPES = (torch.int32, torch.int64)


def check_paged_attention_inputs(q, k_cache, v_cache, block_tables, seq_lens, window=None,
                                 scale=None) -> list[int]:
    """Raise TypeError/ValueError naming the bad argument; return ``seq_lens`` as Python ints.

    The value checks (lengths, block ids) need ``seq_lens`` and ``block_tables`` on the host: on
    a GPU this is a device-to-host copy of both (small: batch x max_blocks_per_seq ints)."""
    check_tensor("q", q, dtypes=FLOAT_DTYPES)
    if q.dim() not in (3, 4):
        raise ValueError("q must have rank 3 (batch, q_heads, head_dim) or 4 (batch, q_len, q_heads, "
                         f"head_dim), got shape {tuple(q.shape)}")
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        check_tensor(name, t, ndim=4, dims="num_blocks, block_size, kv_heads, head_dim", dtypes=FLOAT_DTYPES)
        if t.dtype != q.dtype:
            raise TypeError(f"{name} must have q's dtype {q.dtype}, got {t.dtype}")
    if k_cache.shape != v_cache.shape:
        raise ValueError(f"v_cache must have k_cache's shape {tuple(k_cache.shape)}, got {tuple(v_cache.shape)}")
    check_tensor("block_tables", block_tables, ndim=2, dims="batch, max_blocks_per_seq", dtypes=INDEX_DTYPES)
    check_tensor("seq_lens", seq_lens, ndim=1, dims="batch", dtypes=INDEX_DTYPES)
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache), ("block_tables", block_tables),
                    ("seq_lens", seq_lens)):
        if t.device != q.device:
            raise ValueError(f"{name} must be on q's device {q.device}, got {t.device}")
    batch, q_heads, head_dim = q.shape[0], q.shape[-2], q.shape[-1]
    num_blocks, block_size, kv_heads, cache_head_dim = k_cache.shape
    if block_size < 1:
        raise ValueError(f"k_cache block_size (dim 1) must be >= 1, got shape {tuple(k_cache.shape)}")
    if cache_head_dim != head_dim:
        raise ValueError(f"k_cache head_dim ({cache_head_dim}) != q head_dim ({head_dim})")
    if kv_heads < 1 or q_heads % kv_heads != 0:
        raise ValueError(f"q heads ({q_heads}) must be a multiple of k_cache kv_heads ({kv_heads})")
    if block_tables.shape[0] != batch:
        raise ValueError(f"block_tables must have one row per sequence ({batch}), got {block_tables.shape[0]}")
    if seq_lens.shape[0] != batch:
        raise ValueError(f"seq_lens must have one entry per sequence ({batch}), got {seq_lens.shape[0]}")
    check_int("window", window, minimum=0, allow_none=True)
    check_real("scale", scale, allow_none=True)

    lens = seq_lens.tolist()
    width = block_tables.shape[1]
    for b, n in enumerate(lens):
        if n < 0:
            raise ValueError(f"seq_lens[{b}] must be >= 0, got {n}")
        if -(-n // block_size) > width:
            raise ValueError(f"block_tables row {b} holds {width} blocks = {width * block_size} slots, "
                             f"too few for seq_lens[{b}] = {n} (block_size {block_size})")
    table = block_tables.cpu()
    used = torch.arange(width)[None, :] < torch.tensor([-(-n // block_size) for n in lens]).reshape(-1, 1)
    bad = used & ((table < 0) | (table >= num_blocks))
    if bad.any():
        b, i = bad.nonzero()[0].tolist()
        raise ValueError(f"block_tables[{b}, {i}] = {int(table[b, i])} is not a block of the cache "
                         f"(num_blocks = {num_blocks})")
    return lens


def first_visible(seq_len: int, q_len: int, window: int | None) -> int:
    """The first position any of the ``q_len`` last positions can see (0 without a window)."""
    return 0 if window is None else max(0, seq_len - q_len - window)


def gather_cache(cache: torch.Tensor, table_row: torch.Tensor, start: int, stop: int) -> torch.Tensor:
    """Positions ``start .. stop - 1`` of one sequence, contiguous: (stop - start, kv_heads, head_dim).
    Position ``j`` is slot ``j % block_size`` of block ``table_row[j // block_size]``."""
    block_size = cache.shape[1]
    pos = torch.arange(start, stop, device=cache.device)
    blocks = table_row.to(cache.device, torch.int64)[pos // block_size]
    return cache[blocks, pos % block_size]


def paged_attention(q, k_cache, v_cache, block_tables, seq_lens, *, scale: float | None = None,
                    window: int | None = None, return_lse: bool = False):
    """Attention of each sequence's queries over its paged K/V (module doc: layout, math, edges).

    Returns ``out`` (q's shape and dtype) or ``(out, lse)`` with ``lse`` q's shape without
    head_dim: (batch, q_heads) or (batch, q_len, q_heads), float32 (float64 for float64 q).

    The plain way: gather the sequence's visible positions from its blocks into a contiguous K and
    V, then call :func:`reference.attention.attention` (causal, bottom-right aligned).
    """
    lens = check_paged_attention_inputs(q, k_cache, v_cache, block_tables, seq_lens, window, scale)
    q4 = q.unsqueeze(1) if q.dim() == 3 else q          # (batch, q_len, q_heads, head_dim)
    batch, q_len, q_heads, head_dim = q4.shape
    out = torch.zeros_like(q4)
    lse = torch.full((batch, q_len, q_heads), float("-inf"), dtype=compute_dtype(q.dtype), device=q.device)
    for b, seq_len in enumerate(lens):
        start = first_visible(seq_len, q_len, window)  # keys left of every query's window: never read
        k = gather_cache(k_cache, block_tables[b], start, seq_len)
        v = gather_cache(v_cache, block_tables[b], start, seq_len)
        # (len, heads, head_dim) -> (1, heads, len, head_dim): attention's layout, a batch of one.
        ob, lb = attention(q4[b].transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None],
                           causal=True, window=window, scale=scale, return_lse=True)
        out[b] = ob[0].transpose(0, 1)
        lse[b] = lb[0].transpose(0, 1)
    if q.dim() == 3:
        out, lse = out[:, 0], lse[:, 0]
    return (out, lse) if return_lse else out


# ------------------------------------------------------------------- plan once, run many
class PagedAttentionPlan:
    """``paged_attention`` in two steps, the way engines call it (FlashInfer's ``plan()`` then
    ``run()``): ``plan`` once per batch layout on the host, ``run`` many times on the device.

    ``plan(q, k_cache, v_cache, block_tables, seq_lens, *, scale=None, window=None,
    max_seq_len=None)`` reads the batch's host-side metadata -- the shapes, dtypes and devices of
    all five tensors, and the *values* of ``block_tables`` and ``seq_lens`` (q's and the caches'
    values are not read: they may be the empty buffers a CUDA graph will fill) -- and validates it
    completely: every error of ``paged_attention``, unchanged, and ``max_seq_len``, the longest
    sequence any run of this plan may see (an int >= every ``seq_lens[b]`` and <= the slots of a
    table row, default ``max(seq_lens)``; TypeError/ValueError naming it). ``scale``
    and ``window`` are fixed by the plan. A plan that raises leaves the object as it was (its
    previous plan, if any, still runs).

    ``run(q, k_cache, v_cache, block_tables, seq_lens, *, return_lse=False)`` is
    ``paged_attention(q, k_cache, v_cache, block_tables, seq_lens, scale=, window=, return_lse=)``
    on the tensors' values *at the time of the run*. It reads no tensor value on the host (no
    device-to-host copy, no sync) and allocates only its outputs, so it can be captured in a CUDA
    graph and replayed after the tensors were updated in place. It checks what the host knows
    without a sync: a run before any plan is a RuntimeError naming ``plan``; a tensor whose shape,
    dtype or device differs from the planned one is a TypeError (dtype) or ValueError naming the
    argument. What it cannot check without a sync is the caller's promise, unchecked: every
    ``seq_lens[b]`` in ``0 .. max_seq_len`` and every table entry a visible position uses a block
    of the cache. Breaking it gives an unspecified result (on a GPU possibly a memory fault), never
    an error.

    The plain way, below: attend over the first ``max_seq_len`` positions of every table row and
    mask, on the device, every key no query of the row can see (past ``seq_lens[b]``, causal,
    left of the window); masked keys are replaced by 0 before use, so what their slots hold (NaN,
    or a block id that is not one) never matters.
    """

    def __init__(self):
        self._plan: dict | None = None

    def plan(self, q, k_cache, v_cache, block_tables, seq_lens, *, scale: float | None = None,
             window: int | None = None, max_seq_len: int | None = None) -> None:
        lens = check_paged_attention_inputs(q, k_cache, v_cache, block_tables, seq_lens, window, scale)
        max_seq_len = check_max_seq_len(max_seq_len, lens, block_tables, k_cache)
        self._plan = dict(meta=run_metadata(q, k_cache, v_cache, block_tables, seq_lens),
                          scale=scale, window=window, max_seq_len=max_seq_len)

    def run(self, q, k_cache, v_cache, block_tables, seq_lens, *, return_lse: bool = False):
        if self._plan is None:
            raise RuntimeError("run before plan: call plan(...) with this batch's metadata first")
        p = self._plan
        check_run_metadata(p["meta"], q, k_cache, v_cache, block_tables, seq_lens)
        q4 = q.unsqueeze(1) if q.dim() == 3 else q
        out, lse = masked_paged_attention(q4, k_cache, v_cache, block_tables, seq_lens, p["max_seq_len"],
                                          scale=p["scale"], window=p["window"])
        if q.dim() == 3:
            out, lse = out[:, 0], lse[:, 0]
        return (out, lse) if return_lse else out


def check_max_seq_len(max_seq_len, lens: list[int], block_tables, k_cache) -> int:
    """``max_seq_len`` (None: the longest of ``lens``) as an int >= every length that the table
    rows can hold (``max_blocks_per_seq * block_size`` slots) and, if > 0, a cache with a block;
    TypeError / ValueError naming it."""
    longest = max(lens, default=0)
    if max_seq_len is None:
        return longest
    check_int("max_seq_len", max_seq_len, minimum=0)
    if max_seq_len < longest:
        raise ValueError(f"max_seq_len must be >= every seq_lens value (the longest is {longest}), got {max_seq_len}")
    slots = block_tables.shape[1] * k_cache.shape[1]
    if max_seq_len > slots:
        raise ValueError(f"max_seq_len = {max_seq_len} is more than a block_tables row holds ({slots} slots)")
    if max_seq_len > 0 and k_cache.shape[0] == 0:
        raise ValueError(f"max_seq_len = {max_seq_len} > 0 with a cache of no blocks (k_cache num_blocks 0)")
    return max_seq_len


RUN_ARGS = ("q", "k_cache", "v_cache", "block_tables", "seq_lens")


def run_metadata(*tensors) -> tuple:
    """What a run may not change: each tensor's (shape, dtype, device), in RUN_ARGS order."""
    return tuple((tuple(t.shape), t.dtype, t.device) for t in tensors)


def check_run_metadata(planned: tuple, *tensors) -> None:
    """TypeError (a dtype) or ValueError (a shape or device; a non-tensor is a TypeError) naming the
    first argument that differs from the plan: host-side metadata only, no tensor value is read."""
    for name, meta, t in zip(RUN_ARGS, planned, tensors):
        check_as_planned(name, t, meta)


def masked_paged_attention(q4, k_cache, v_cache, block_tables, seq_lens, max_seq_len: int, *,
                           scale=None, window=None) -> tuple[torch.Tensor, torch.Tensor]:
    """(out, lse) for q4 (batch, q_len, q_heads, head_dim) without reading any value on the host:
    every row gathers positions ``0 .. max_seq_len - 1`` through its table and masks on the device
    the keys no query sees. Attention's precision (reference/attention.py)."""
    batch, q_len, q_heads, head_dim = q4.shape
    block_size, kv_heads = k_cache.shape[1], k_cache.shape[2]
    group = q_heads // kv_heads
    scale = 1.0 / math.sqrt(head_dim) if scale is None else float(scale)
    acc = compute_dtype(q4.dtype)
    device = q4.device

    pos = torch.arange(max_seq_len, device=device)                            # key positions
    qpos = seq_lens.to(device, torch.int64)[:, None] - q_len + torch.arange(q_len, device=device)
    visible = pos[None, None, :] <= qpos[:, :, None]                          # causal, bottom-right
    if window is not None:
        visible &= pos[None, None, :] >= qpos[:, :, None] - window
    read = visible.any(dim=1)                                                 # (batch, L): some query sees it
    blocks = torch.where(read, block_tables.to(torch.int64)[:, pos // block_size], 0)   # block 0 stands in
    k = torch.where(read[..., None, None], k_cache[blocks, pos % block_size], 0)   # (batch, L, kv_heads, d)
    v = torch.where(read[..., None, None], v_cache[blocks, pos % block_size], 0)

    qg = q4.permute(0, 2, 1, 3).reshape(batch, kv_heads, group, q_len, head_dim)
    kt = k.permute(0, 2, 3, 1).unsqueeze(2)                                   # (batch, kv_heads, 1, d, L)
    scores = torch.matmul(qg, kt).to(acc) * scale                            # (batch, kv_heads, group, q_len, L)
    scores = scores.masked_fill(~visible[:, None, None], float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)                                     # -inf where nothing is seen
    probs = torch.exp(scores - lse.unsqueeze(-1).clamp(min=torch.finfo(acc).min))
    probs = torch.nan_to_num(probs, nan=0.0)
    out = torch.matmul(probs.to(v.dtype), v.permute(0, 2, 1, 3).unsqueeze(2))  # (batch, kv_heads, group, q_len, d)
    out = out.reshape(batch, q_heads, q_len, head_dim).transpose(1, 2)
    return out.contiguous(), lse.reshape(batch, q_heads, q_len).transpose(1, 2).contiguous()
