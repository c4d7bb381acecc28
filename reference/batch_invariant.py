"""Batch-invariant reductions (course 08.10, 08.11): the same row gives the same bits, whoever
shares its batch.

Floating-point addition is not associative: ``(1e8 + -1e8) + 1 = 1`` but ``1e8 + (-1e8 + 1) = 0``
in float32. A kernel that picks its reduction order from the batch (split-K above some M, a tile
or block size chosen from the number of rows, an atomic add that lands in arrival order, a KV
split count chosen from the batch) gives a request different bits depending on what else is in
the batch, and greedy decoding turns one different bit into a different token.

Contract. Every function here reduces in ONE fixed order that depends only on the row's own
length, never on the number of rows, the row's position or the other rows:

* **The fixed order.** A reduction of ``L`` terms ``t_0 .. t_{L-1}`` (float32; float64 for
  float64 inputs) runs over blocks of ``BLOCK`` = 16 consecutive terms. Inside a block the terms
  are added left to right starting from the first term; the block partials are added left to
  right to an accumulator that starts at +0.0. (:func:`fixed_order_sum`.)
* ``matmul(a, b)``: ``a`` (M, K) @ ``b`` (K, N); element (i, j) is the fixed-order sum over k of
  ``a[i, k] * b[k, j]`` (each product rounded to the compute dtype, never fused), cast to
  ``a.dtype``. No split-K, the block size is ``BLOCK`` whatever M is.
* ``rms_norm(x, weight, eps)``: ``weight * (x / sqrt(mean(x^2) + eps))`` along the last dim, the
  sum of squares in the fixed order; computed in the compute dtype, cast to ``x.dtype`` before
  the weight is applied (as reference/model.py does).
* ``log_softmax(x)`` / ``softmax(x)`` along the last dim: row max (exact, order-free), the sum of
  ``exp(x - max)`` in the fixed order; cast to ``x.dtype``.
* ``row_sum(x)`` / ``row_mean(x)`` along the last dim: the fixed-order sum (mean = sum / L);
  result in ``x.dtype``.
* ``decode_attention(q, k, v, lengths)``: one query per sequence, ``q`` (B, H, D), ``k``/``v``
  (B, Hkv, S, D) with ``Hkv`` dividing ``H`` (GQA: query head h reads KV head h // (H / Hkv);
  MHA is Hkv = H, MQA Hkv = 1), ``lengths`` (B,) ints in [1, S]: ragged, sequence b attends to
  its first ``lengths[b]`` keys. Scores are fixed-order dots times ``1/sqrt(D)``; the keys are
  cut into splits of ``KV_SPLIT`` = 32 positions (a fixed size, never a count chosen from the
  batch: a sequence of length n has ceil(n / 32) splits, the last one ragged); each split keeps
  its max ``m``, its fixed-order sum ``l`` of ``exp(s - m)`` and its fixed-order weighted sum
  ``o`` of values (float32, p never rounded to a 16-bit dtype); the splits are merged left to
  right (``m' = max(m, m_j)``, ``l' = l exp(m - m') + l_j exp(m_j - m')``, ``o`` likewise), and
  the result is ``o / l``. Result (B, H, D) in ``q.dtype``; depends only on sequence b's own
  query, keys, values and length (not on S, the padding, B, b, or the other sequences).
* ``invariant_mode()``: a context manager under which torch's ``mm``, ``addmm``, ``bmm``,
  ``_log_softmax``, ``_softmax`` and ``mean.dim`` (CPU and CUDA) compute through the functions above, so an
  unmodified model's (reference/model.py) matmuls, norms and softmaxes become batch invariant
  (not its attention's ``logsumexp``, which is not overridden); the original kernels are
  restored on exit, also when the block raises. Only reductions over the LAST dimension are made
  invariant (log_softmax/softmax over another dim are moved to the last; a mean over other dims
  is torch's sum over the count, not routed); ``bmm`` is one ``matmul`` per batch entry.

Rows are computed vectorised over the batch with elementwise operations only: each element of
a row goes through exactly the sequence of roundings it would go through alone.

The law is the invariance (a row's bits alone = at any position of any batch) and the accuracy
(the plain op within the tolerance rule of a float64 oracle). Choices the law leaves open
(checked only at the token-exact level): the fixed order itself (blocks of ``BLOCK`` left to
right; any order that depends only on the row's own length is as invariant), and ``bmm`` under
the mode as one ``matmul`` per batch entry (bit for bit).

Edge cases: M = 0 rows gives an empty result; K = 0 gives zeros; a row of -inf in log_softmax
gives NaN (as torch); float16/bfloat16/float32/float64 inputs only. Bad input: ``TypeError`` for
a non-tensor or a wrong dtype, ``ValueError`` for a wrong rank or mismatched sizes; the message
names the argument.
"""
from __future__ import annotations

import contextlib
import math
import warnings

import torch

from reference._checks import FLOAT_DTYPES, check_real, check_tensor, compute_dtype

__all__ = ["fixed_order_sum", "matmul", "rms_norm", "log_softmax", "softmax",
           "row_sum", "row_mean", "decode_attention", "invariant_mode"]
__optional__: list[str] = []

BLOCK = 16      # terms per block of every reduction (fixed: never chosen from the batch)
KV_SPLIT = 32   # key positions per split of decode attention (fixed: never chosen from the batch)


def fixed_order_sum(term, length: int, dtype: torch.dtype, shape, device=None) -> torch.Tensor:
    """Sum of ``term(0) .. term(length - 1)`` (tensors of ``shape``) in the fixed order: blocks of
    BLOCK terms added left to right inside the block, block partials added left to right to +0."""
    total = torch.zeros(shape, dtype=dtype, device=device)
    for k0 in range(0, length, BLOCK):
        part = term(k0)
        for k in range(k0 + 1, min(k0 + BLOCK, length)):
            part = part + term(k)
        total = total + part
    return total


def _float_tensor(name, value, ndim=None, dims=""):
    return check_tensor(name, value, ndim=ndim, dims=dims, dtypes=FLOAT_DTYPES)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a (M, K) @ b (K, N) in the fixed order over k; result in a.dtype."""
    _float_tensor("a", a, 2, "M, K")
    _float_tensor("b", b, 2, "K, N")
    if a.dtype != b.dtype:
        raise TypeError(f"b must have a's dtype {a.dtype}, got {b.dtype}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"b must have {a.shape[1]} rows (a's K), got shape {tuple(b.shape)}")
    (M, K), N = a.shape, b.shape[1]
    cd = compute_dtype(a.dtype)
    af, bf = a.to(cd), b.to(cd)
    out = fixed_order_sum(lambda k: af[:, k, None] * bf[None, k, :], K, cd, (M, N), a.device)
    return out.to(a.dtype)


def _last_dim(name, x):
    _float_tensor(name, x)
    if x.dim() < 1:
        raise ValueError(f"{name} must have at least one dimension, got a scalar")
    return x


def _sum_last(xf: torch.Tensor) -> torch.Tensor:
    """Fixed-order sum of the last dim of a compute-dtype tensor (keepdim)."""
    L = xf.shape[-1]
    return fixed_order_sum(lambda k: xf[..., k:k + 1], L, xf.dtype, (*xf.shape[:-1], 1), xf.device)


def row_sum(x: torch.Tensor) -> torch.Tensor:
    """Sum of the last dim in the fixed order; shape x.shape[:-1], dtype x.dtype."""
    _last_dim("x", x)
    return _sum_last(x.to(compute_dtype(x.dtype)))[..., 0].to(x.dtype)


def row_mean(x: torch.Tensor) -> torch.Tensor:
    """row_sum(x) / L (L = x.shape[-1]; NaN for L = 0, as torch.mean); dtype x.dtype."""
    _last_dim("x", x)
    L = x.shape[-1]
    s = _sum_last(x.to(compute_dtype(x.dtype)))[..., 0]
    return (s / L if L else torch.full_like(s, math.nan)).to(x.dtype)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """weight * x / sqrt(mean(x^2) + eps) along the last dim, sum of squares in the fixed order."""
    _last_dim("x", x)
    _float_tensor("weight", weight, 1, "D")
    if weight.shape[0] != x.shape[-1]:
        raise ValueError(f"weight must have {x.shape[-1]} elements (x's last dim), got {weight.shape[0]}")
    eps = check_real("eps", eps, minimum=0.0)
    cd = compute_dtype(x.dtype)
    xf = x.to(cd)
    ms = _sum_last(xf * xf) / x.shape[-1]
    normed = xf * torch.rsqrt(ms + eps)
    return weight * normed.to(x.dtype)


def _log_softmax_cd(xf: torch.Tensor) -> torch.Tensor:
    m = xf.amax(dim=-1, keepdim=True)       # a max is exact in any order
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    shifted = xf - m
    e = torch.exp(shifted)
    return shifted - torch.log(_sum_last(e))


def log_softmax(x: torch.Tensor) -> torch.Tensor:
    """log_softmax along the last dim; sum of exp(x - max) in the fixed order; dtype x.dtype."""
    _last_dim("x", x)
    if x.shape[-1] == 0:
        return x.clone()
    return _log_softmax_cd(x.to(compute_dtype(x.dtype))).to(x.dtype)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """softmax along the last dim: exp(x - max) / (fixed-order sum); dtype x.dtype."""
    _last_dim("x", x)
    if x.shape[-1] == 0:
        return x.clone()
    xf = x.to(compute_dtype(x.dtype))
    m = xf.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(xf - m)
    return (e / _sum_last(e)).to(x.dtype)


def _check_decode(q, k, v, lengths) -> list[int]:
    """decode_attention's argument checks (shared with optimized/); returns lengths as ints."""
    _float_tensor("q", q, 3, "B, H, D")
    _float_tensor("k", k, 4, "B, Hkv, S, D")
    _float_tensor("v", v, 4, "B, Hkv, S, D")
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise TypeError(f"k and v must have q's dtype {q.dtype}, got {k.dtype} and {v.dtype}")
    B, H, D = q.shape
    Hkv = k.shape[1]
    if k.shape[0] != B or k.shape[3] != D or v.shape != k.shape or Hkv == 0 or H % Hkv:
        raise ValueError(f"k and v must have shape (B={B}, Hkv, S, D={D}) with Hkv dividing H={H}, "
                         f"got {tuple(k.shape)} and {tuple(v.shape)}")
    S = k.shape[2]
    if not isinstance(lengths, torch.Tensor):
        raise TypeError(f"lengths must be a torch.Tensor of ints, got {type(lengths).__name__}")
    if lengths.dtype.is_floating_point or lengths.dtype == torch.bool or lengths.dtype.is_complex:
        raise TypeError(f"lengths must have an integer dtype, got {lengths.dtype}")
    if lengths.shape != (B,):
        raise ValueError(f"lengths must have shape ({B},), got {tuple(lengths.shape)}")
    lens = [int(n) for n in lengths.tolist()]
    if any(n < 1 or n > S for n in lens):
        raise ValueError(f"lengths must be in [1, S={S}], got {lens}")
    return lens


def decode_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     lengths: torch.Tensor) -> torch.Tensor:
    """One decode query per sequence (GQA) against its first lengths[b] keys; splits of KV_SPLIT keys."""
    lens = _check_decode(q, k, v, lengths)
    B, H, D = q.shape
    heads = torch.arange(H, device=q.device) // (H // k.shape[1])   # the KV head of each query head
    cd = compute_dtype(q.dtype)
    scale = 1.0 / math.sqrt(D)
    out = torch.empty(B, H, D, dtype=q.dtype, device=q.device)
    for b, n in enumerate(lens):                      # each sequence alone: no other row involved
        qb = q[b].to(cd)                                                          # (H, D)
        kb, vb = k[b, heads, :n].to(cd), v[b, heads, :n].to(cd)                   # (H, n, D)
        scores = fixed_order_sum(lambda d: qb[:, None, d] * kb[:, :, d], D, cd, (H, n), q.device) * scale
        m_all = l_all = o_all = None
        for s0 in range(0, n, KV_SPLIT):              # fixed split size: never a count from B
            s1 = min(s0 + KV_SPLIT, n)
            sc = scores[:, s0:s1]
            m = sc.amax(dim=-1)                                                   # (H,)
            p = torch.exp(sc - m[:, None])
            l = fixed_order_sum(lambda t: p[:, t], s1 - s0, cd, (H,), q.device)
            o = fixed_order_sum(lambda t: p[:, t, None] * vb[:, s0 + t], s1 - s0, cd, (H, D), q.device)
            if m_all is None:
                m_all, l_all, o_all = m, l, o
            else:                                     # merge splits left to right
                m_new = torch.maximum(m_all, m)
                a_old, a_new = torch.exp(m_all - m_new), torch.exp(m - m_new)
                l_all = l_all * a_old + l * a_new
                o_all = o_all * a_old[:, None] + o * a_new[:, None]
                m_all = m_new
        out[b] = (o_all / l_all[:, None]).to(q.dtype)
    return out


# --- invariant mode: route torch's aten ops through the functions above -------------------------
def _last_dim_index(x, dim) -> bool:
    return dim == -1 or dim == x.dim() - 1


def _routes(fns) -> dict:
    """aten overloads -> implementations built from ``fns`` (a module or namespace with this
    contract's names). Shapes the functions do not cover raise NotImplementedError."""
    mm = fns.matmul

    def _mm(a, b):
        return mm(a, b)

    def _addmm(bias, a, b, beta=1, alpha=1):
        out = mm(a, b)
        if alpha != 1:
            out = out * alpha
        return out + bias * beta if beta != 0 else out

    def _bmm(a, b):
        return torch.stack([mm(a[i], b[i]) for i in range(a.shape[0])]) if a.shape[0] else \
            a.new_empty(0, a.shape[1], b.shape[2])

    def _lsm(x, dim, half_to_float):
        if not _last_dim_index(x, dim):
            x_t = x.movedim(dim, -1)
            out = fns.log_softmax(x_t.contiguous()).movedim(-1, dim)
        else:
            out = fns.log_softmax(x)
        return out.float() if half_to_float else out

    def _sm(x, dim, half_to_float):
        if not _last_dim_index(x, dim):
            out = fns.softmax(x.movedim(dim, -1).contiguous()).movedim(-1, dim)
        else:
            out = fns.softmax(x)
        return out.float() if half_to_float else out

    def _mean(x, dim=None, keepdim=False, dtype=None):
        xx = x.to(dtype) if dtype is not None else x
        if dim is None or len(dim) != 1 or not _last_dim_index(x, dim[0]) or not xx.is_floating_point() \
                or xx.dtype not in FLOAT_DTYPES or x.dim() == 0:
            # other reductions are not routed: torch's sum (not overridden) over the count
            dims = list(range(x.dim())) if not dim else list(dim)
            count = math.prod(x.shape[d] for d in dims) if x.dim() else 1   # a 0-d tensor: its one value
            return torch.sum(xx, dims, keepdim=keepdim) / count
        out = fns.row_mean(xx)
        return out.unsqueeze(-1) if keepdim else out

    return {"mm": _mm, "addmm": _addmm, "bmm": _bmm, "_log_softmax": _lsm, "_softmax": _sm,
            "mean.dim": _mean}


@contextlib.contextmanager
def _routing(fns, keys):
    lib = torch.library.Library("aten", "IMPL")
    try:
        with warnings.catch_warnings():     # "Overriding a previously registered kernel": intended
            warnings.filterwarnings("ignore", message="(?s).*Overriding a previously registered kernel")
            for op, fn in _routes(fns).items():
                for key in keys:
                    lib.impl(op, fn, key)
        yield
    finally:
        lib._destroy()


def invariant_mode():
    """Context manager: torch's mm/addmm/bmm/_log_softmax/_softmax/mean.dim on CPU and CUDA tensors compute
    through this module's fixed-order functions; restored on exit."""
    import types
    fns = types.SimpleNamespace(matmul=matmul, log_softmax=log_softmax, softmax=softmax, row_mean=row_mean)
    return _routing(fns, ("CPU", "CUDA"))
