"""FlashAttention's contract: variable-length (packed) batches and the nn.Module drop-in
(course 05.07; chapter 5).

The math is :func:`reference.attention.attention`'s, unchanged (layout, bottom-right causal, left
window, GQA by ``h // group``, a fully masked row gives out 0 and lse -inf). FlashAttention is an
IO result, not a new formula, so the reference of this concept is the plain attention applied
per sequence; what the concept adds is the *interface* a kernel exposes to an engine:

    attention_varlen   sequences of different lengths packed end to end, described by cumulative
                       lengths (no padding, so no FLOPs on padding)
    FlashAttention     the attention callable of a transformer layer (an ``nn.Module``)

and, through autograd, the backward pass (dq, dk, dv), which an optimized implementation
computes with its own kernels.

Defaults and edges are :func:`attention`'s: ``causal=False``, ``window=None``, ``scale=None``
(exactly ``1 / sqrt(head_dim)``), ``return_lse=False`` for ``attention_varlen``; omitting an
argument is passing its default. ``scale`` may be 0 or negative, ``window`` 0; head_dim >= 1;
empty sequences (and an all-empty batch) are legal.
"""
from __future__ import annotations

import torch

from reference._checks import FLOAT_DTYPES, check_tensor, compute_dtype
from reference.attention import attention, check_attention_inputs

__all__ = ["attention_varlen", "FlashAttention"]  # the contract: what an implementation must provide
__optional__ = []  # checked when an implementation provides them


def check_varlen_inputs(q, k, v, cu_seqlens_q, cu_seqlens_k, window=None, scale=None) -> None:
    """Raise TypeError/ValueError naming the bad argument for :func:`attention_varlen` inputs."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(name, t, ndim=3, dims="total_tokens, heads, head_dim", dtypes=FLOAT_DTYPES)
    # As a batch of one, (1, heads, total, head_dim), the padded form's checks apply unchanged.
    check_attention_inputs(*(t.transpose(0, 1).unsqueeze(0) for t in (q, k, v)), window, scale)
    for name, cu, t in (("cu_seqlens_q", cu_seqlens_q, q), ("cu_seqlens_k", cu_seqlens_k, k)):
        check_tensor(name, cu, dtypes=(torch.int32, torch.int64))
        if cu.dim() != 1 or cu.numel() < 2:
            raise ValueError(f"{name} must be 1-d with batch + 1 >= 2 entries, got shape {tuple(cu.shape)}")
        c = cu.cpu()
        if int(c[0]) != 0 or bool((c[1:] < c[:-1]).any()) or int(c[-1]) != t.shape[0]:
            raise ValueError(f"{name} must start at 0, never decrease and end at {t.shape[0]} "
                             f"(the packed length), got {c.tolist()}")
    if cu_seqlens_q.numel() != cu_seqlens_k.numel():
        raise ValueError(f"cu_seqlens_q ({cu_seqlens_q.numel()}) and cu_seqlens_k ({cu_seqlens_k.numel()}) "
                         f"must describe the same number of sequences")


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, *, causal: bool = False,
                     window: int | None = None, scale: float | None = None, return_lse: bool = False):
    """:func:`attention` over a packed batch of sequences of different lengths (course 05.07).

    ``q`` is (total_q, q_heads, head_dim) and ``k``/``v`` are (total_k, kv_heads, head_dim): the
    sequences laid end to end, sequence ``b`` occupying rows ``cu_seqlens_q[b]:cu_seqlens_q[b+1]``
    of ``q`` and ``cu_seqlens_k[b]:cu_seqlens_k[b+1]`` of ``k``/``v`` (cumulative lengths, int32 or
    int64, starting at 0). Each sequence attends only to its own keys, with masking aligned per
    sequence exactly as in :func:`attention` (bottom-right causal, left window). An empty
    sequence is allowed. Returns ``out`` (q's shape) or ``(out, lse)`` with ``lse`` (total_q,
    q_heads): like the padded form, lse has out's shape without head_dim.
    Bad input raises as in :func:`attention` (``TypeError`` for a wrong kind, ``ValueError`` for
    an illegal value), the message naming the argument as a word of its own: q, k, v of rank 3;
    ``cu_seqlens_*`` tensors (a list is a ``TypeError``), int32/int64, 1-d, starting at 0, never
    decreasing, ending at the packed length, both describing the same number of sequences (the
    message names both). As in :func:`attention`, a mismatch between q, k, v names every argument
    involved, and head_dim 0 names ``head_dim``.
    """
    check_varlen_inputs(q, k, v, cu_seqlens_q, cu_seqlens_k, window, scale)
    out = torch.zeros_like(q)
    lse = torch.full(q.shape[:2], float("-inf"), dtype=compute_dtype(q.dtype), device=q.device)
    cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    for b in range(len(cq) - 1):
        if cq[b + 1] == cq[b]:
            continue
        # (len, heads, head_dim) -> (1, heads, len, head_dim): one sequence as a batch of one.
        qb, kb, vb = (t[s:e].transpose(0, 1).unsqueeze(0)
                      for t, s, e in ((q, cq[b], cq[b + 1]), (k, ck[b], ck[b + 1]), (v, ck[b], ck[b + 1])))
        ob, lb = attention(qb, kb, vb, causal=causal, window=window, scale=scale, return_lse=True)
        out[cq[b]:cq[b + 1]] = ob[0].transpose(0, 1)
        lse[cq[b]:cq[b + 1]] = lb[0].transpose(0, 1)
    return (out, lse) if return_lse else out


class FlashAttention(torch.nn.Module):
    """The attention callable of a transformer layer: ``FlashAttention()(q, k, v, causal=True)``.

    ``forward(q, k, v, *, causal=False, window=None, scale=None) -> out`` with the semantics of
    :func:`attention` (same layout, masking, GQA). The reference wraps :func:`attention`; an
    optimized implementation runs its fused kernel here. No parameters, no state.
    """

    def __init__(self) -> None:
        super().__init__()

    def forward(self, q, k, v, *, causal: bool = False, window: int | None = None,
                scale: float | None = None):
        return attention(q, k, v, causal=causal, window=window, scale=scale)
