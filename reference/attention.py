"""Scaled dot-product attention: the specification (course 03.02, 03.05, 05.07; chapters 2 and 5).

Layout is PyTorch SDPA's: ``q`` is (batch, q_heads, q_len, head_dim); ``k`` and ``v`` are
(batch, kv_heads, kv_len, head_dim).

    scores[i, j] = scale * q_i . k_j          (scale defaults to 1 / sqrt(head_dim))
    out_i        = sum_j softmax_j(scores[i, :] over visible j) * v_j
    lse_i        = log sum_j exp(scores[i, j]) over visible j

Masking (which keys j a query i may see):
    causal   -- aligned *bottom-right*: query i sits at absolute position p_i = i + kv_len - q_len
                (the last query is the last key, as in decode and chunked prefill), and sees
                j <= p_i. When q_len > kv_len the first q_len - kv_len queries see no key.
    window   -- sliding window of ``window`` keys to the left (FlashAttention's left window):
                j >= p_i - window. ``window=0`` sees only its own position. Combined with causal
                this is Mistral-style local attention (Mistral's sliding_window W is window=W-1).
A query that sees no key (a *fully masked row*) outputs 0 and has lse = -inf; it never yields NaN.

Arguments and their edges. Defaults: ``causal=False``, ``window=None`` (no window),
``scale=None`` meaning exactly ``1 / sqrt(head_dim)``, ``return_lse=False`` (out alone); omitting
an argument is the same as passing its default. ``scale`` is any finite real: 0 gives every
visible key the same weight (out = the mean of the visible values, lse = log of their count) and a
negative scale is the softmax of the negated scores. ``window=0`` sees only the query's own
position. Empty is legal: q_len 0, batch 0 or q_heads 0 give empty results, kv_len 0 makes every
row fully masked. head_dim must be >= 1.

Heads: MHA (q_heads == kv_heads), GQA (q_heads a multiple of kv_heads: query head h reads KV
head h // (q_heads // kv_heads)) and MQA (kv_heads == 1). Callers never repeat K/V themselves.

Precision: scores are computed with a matmul in the input dtype, softmax in float32 (float64 for
float64 inputs), probabilities are cast back to the input dtype for the P @ V matmul, exactly the
data flow of a FlashAttention kernel. The float64 run of this same function is the oracle of the
tolerance rule; ``lse`` is float32 (float64 for float64 inputs).
"""
from __future__ import annotations

import math

import torch

from reference._checks import FLOAT_DTYPES, check_int, check_real, check_tensor, compute_dtype

__all__ = ["attention"]  # the contract: what an implementation must provide
__optional__ = ["attention_tiled"]  # checked when an implementation provides them


def check_attention_inputs(q, k, v, window=None, scale=None) -> None:
    """Raise TypeError/ValueError naming the bad argument; shared by every implementation."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(name, t, ndim=4, dims="batch, heads, seq_len, head_dim", dtypes=FLOAT_DTYPES)
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v must share a dtype, got q {q.dtype}, k {k.dtype}, v {v.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k, v must be on one device, got {q.device}, {k.device}, {v.device}")
    if k.shape != v.shape:
        raise ValueError(f"k and v must have the same shape, got k {tuple(k.shape)} and v {tuple(v.shape)}")
    if q.shape[0] != k.shape[0]:
        raise ValueError(f"q batch ({q.shape[0]}) != k batch ({k.shape[0]})")
    if q.shape[3] != k.shape[3]:
        raise ValueError(f"q head_dim ({q.shape[3]}) != k head_dim ({k.shape[3]})")
    if q.shape[3] == 0:
        raise ValueError("head_dim of q, k, v must be >= 1, got 0")
    if k.shape[1] == 0 or q.shape[1] % k.shape[1] != 0:
        raise ValueError(f"q heads ({q.shape[1]}) must be a multiple of k heads ({k.shape[1]})")
    check_int("window", window, minimum=0, allow_none=True)
    check_real("scale", scale, allow_none=True)


def visible_mask(q_len: int, kv_len: int, *, causal: bool, window: int | None, device=None) -> torch.Tensor:
    """Boolean (q_len, kv_len) mask: True where query i may attend to key j (see module doc)."""
    pos_q = torch.arange(q_len, device=device)[:, None] + (kv_len - q_len)
    pos_k = torch.arange(kv_len, device=device)[None, :]
    mask = torch.ones(q_len, kv_len, dtype=torch.bool, device=device)
    if causal:
        mask &= pos_k <= pos_q
    if window is not None:
        mask &= pos_k >= pos_q - window
    return mask


def attention(q, k, v, *, causal: bool = False, window: int | None = None,
              scale: float | None = None, return_lse: bool = False):
    """Attention of ``q`` over ``k``/``v`` (module doc: layout, masking, heads, precision).

    Returns ``out`` (q's shape and dtype) or ``(out, lse)`` with ``lse`` (batch, q_heads, q_len).
    Bad input raises, the message naming the argument: ``TypeError`` for a wrong kind of value
    (q, k, v not tensors, not floating, dtypes differing; window not an int, a bool is not one;
    scale not a real, nor a bool), ``ValueError`` for an illegal one (rank != 4, shapes that do
    not fit together, q, k, v on different devices, head_dim 0, window < 0, scale not finite).
    Names are whole words of the message (the ``q`` of "seq_len" does not count). Where
    arguments do not fit together (dtypes, devices, batch, heads, head_dim, k/v shapes) the
    message names every argument involved (e.g. ``q`` and ``k``); head_dim 0 names ``head_dim``.
    """
    check_attention_inputs(q, k, v, window, scale)
    batch, q_heads, q_len, head_dim = q.shape
    kv_heads, kv_len = k.shape[1], k.shape[2]
    group = q_heads // kv_heads
    scale = 1.0 / math.sqrt(head_dim) if scale is None else float(scale)
    acc = compute_dtype(q.dtype)

    # GQA without repeating K/V: view the query heads as (kv_heads, group).
    qg = q.reshape(batch, kv_heads, group, q_len, head_dim)
    scores = torch.matmul(qg, k.unsqueeze(2).transpose(-1, -2)).to(acc) * scale
    mask = visible_mask(q_len, kv_len, causal=causal, window=window, device=q.device)
    scores = scores.masked_fill(~mask, float("-inf"))

    lse = torch.logsumexp(scores, dim=-1)                       # -inf on fully masked rows
    probs = torch.exp(scores - lse.unsqueeze(-1).clamp(min=torch.finfo(acc).min))
    probs = torch.nan_to_num(probs, nan=0.0)                    # exp(-inf - (-inf)) on masked rows
    out = torch.matmul(probs.to(v.dtype), v.unsqueeze(2))
    out = out.reshape(batch, q_heads, q_len, head_dim)
    lse = lse.reshape(batch, q_heads, q_len)
    return (out, lse) if return_lse else out


def attention_tiled(q, k, v, *, causal: bool = False, window: int | None = None,
                    scale: float | None = None, return_lse: bool = False,
                    block_q: int = 16, block_k: int = 16):
    """The same function as :func:`attention`, computed the FlashAttention way (online softmax).

    For each tile of ``block_q`` queries, stream over tiles of ``block_k`` keys keeping a running
    row max ``m``, a running denominator ``l`` and an unnormalised accumulator ``acc``. When a new
    tile raises the max from ``m`` to ``m_new``, everything accumulated so far is rescaled by
    ``exp(m - m_new)`` (the step a buggy kernel forgets). The full (q_len, kv_len) score matrix is
    never formed: this is what makes FlashAttention an IO result, not a new formula. Tile sizes
    are ints >= 1, 16 by default; any sizes give the same function (the last tile of a length that
    is not a multiple is ragged).
    """
    check_attention_inputs(q, k, v, window, scale)
    check_int("block_q", block_q, minimum=1)
    check_int("block_k", block_k, minimum=1)
    batch, q_heads, q_len, head_dim = q.shape
    kv_heads, kv_len = k.shape[1], k.shape[2]
    group = q_heads // kv_heads
    scale = 1.0 / math.sqrt(head_dim) if scale is None else float(scale)
    acc_dtype = compute_dtype(q.dtype)
    out = torch.zeros_like(q)
    lse = torch.full((batch, q_heads, q_len), float("-inf"), dtype=acc_dtype, device=q.device)
    mask = visible_mask(q_len, kv_len, causal=causal, window=window, device=q.device)

    for h in range(q_heads):
        kh, vh = k[:, h // group], v[:, h // group]              # the KV head this query head reads
        for i0 in range(0, q_len, block_q):
            qi = q[:, h, i0:i0 + block_q]
            rows = qi.shape[1]
            m = torch.full((batch, rows), float("-inf"), dtype=acc_dtype, device=q.device)
            l = torch.zeros((batch, rows), dtype=acc_dtype, device=q.device)
            acc = torch.zeros((batch, rows, head_dim), dtype=acc_dtype, device=q.device)
            for j0 in range(0, kv_len, block_k):
                s = torch.matmul(qi, kh[:, j0:j0 + block_k].transpose(-1, -2)).to(acc_dtype) * scale
                s = s.masked_fill(~mask[i0:i0 + block_q, j0:j0 + block_k], float("-inf"))
                m_new = torch.maximum(m, s.amax(dim=-1))
                m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
                alpha = torch.exp(m - m_safe)                    # rescale of what came before
                p = torch.exp(s - m_safe.unsqueeze(-1))
                l = l * alpha + p.sum(dim=-1)
                pv = torch.matmul(p.to(v.dtype), vh[:, j0:j0 + block_k]).to(acc_dtype)
                acc = acc * alpha.unsqueeze(-1) + pv
                m = m_new
            seen = l > 0
            safe_l = torch.where(seen, l, torch.ones_like(l))
            out[:, h, i0:i0 + block_q] = torch.where(seen.unsqueeze(-1), acc / safe_l.unsqueeze(-1), 0.0).to(q.dtype)
            lse[:, h, i0:i0 + block_q] = torch.where(seen, m + torch.log(safe_l), float("-inf"))
    return (out, lse) if return_lse else out
