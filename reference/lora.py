"""Multi-LoRA serving: many low-rank adapters applied in one batch (course 06.08; Punica, S-LoRA).

A LoRA adapter fine-tunes a linear layer ``y = x W^T`` (W: d_out x d_in) by a low-rank update
``W + (alpha / r) B A`` with A: r x d_in, B: d_out x r, r << d_in, d_out. Serving many tenants'
fine-tunes from one base model keeps ONE copy of W and N small adapters (``N r (d_in + d_out)``
numbers instead of ``N d_out d_in``), and batches requests of different adapters together: each
row of the batch names its adapter.

**The batched layer** (:func:`lora_forward`). x (B, d_in); ``base_weight`` W (d_out, d_in); the
adapters stacked, ``lora_a`` (N, r, d_in) and ``lora_b`` (N, d_out, r) (one rank r for all: pad a
smaller adapter's A with zero rows and its B with zero columns, and scale its alpha by the padded
rank over its own, to keep its alpha / r); ``adapter_ids`` (B,), row i's adapter, or -1 for
"none" (the base model alone). Row i of the result::

    y[i] = x[i] W^T + (alpha / r) (x[i] A[a_i]^T) B[a_i]^T        (a_i = adapter_ids[i] >= 0)
    y[i] = x[i] W^T                                               (a_i = -1)

with ``alpha / r`` the scaling (alpha a real given by the caller, r = ``lora_a.shape[1]``): each
row is what its own adapter gives alone, whatever the other rows of the batch and their adapters
(the law: batched == per-request).

Precision (the contract's computation, to which the tolerance rule compares an implementation):
the base product and both LoRA products accumulate in the compute dtype (float32; float64 for
float64 x); the shrink ``x A^T`` stays in the compute dtype (not rounded); y = base + scaling x
expand is rounded to x's dtype once.

**Merging** (:func:`merge_lora`): ``W + (alpha / r) B A`` for one adapter, computed in the compute
dtype and rounded to W's dtype once: serving a single tenant from merged weights costs no extra
FLOPs (but needs a full copy of W per tenant).

Bad input (before any work; inputs are never modified): a tensor argument not a tensor, or of a
dtype outside float16/bfloat16/float32/float64 (int32/int64 for ``adapter_ids``) -> TypeError
naming it; weights of another dtype than x (than ``base_weight`` for merge_lora) -> TypeError
naming them; wrong ranks or mismatched sizes (d_in, d_out, r, N, B), r = 0 -> ValueError naming
the argument; tensors on different devices -> ValueError naming it; an adapter id outside
[-1, N) -> ValueError naming ``adapter_ids``; ``alpha`` not a real (a bool is not one) ->
TypeError, not finite -> ValueError naming ``alpha``.

Choices the law leaves open (the reference's): the precision above (the shrink not rounded to x's
dtype; one rounding at the end); -1 as the "no adapter" id.
"""
from __future__ import annotations

import torch

from reference._checks import FLOAT_DTYPES, check_real, check_tensor, compute_dtype

__all__ = ["lora_forward", "merge_lora"]  # the contract
__optional__: list[str] = []  # checked when an implementation provides them

NO_ADAPTER = -1  # the adapter id of a row that runs the base model alone
ID_DTYPES = (torch.int32, torch.int64)


def _check_same(x, named: dict) -> None:
    """Every tensor of ``named`` has x's dtype and device."""
    for name, t in named.items():
        if t.dtype != x.dtype:
            raise TypeError(f"{name} must have the dtype {x.dtype} of the input, got {t.dtype}")
    for name, t in named.items():
        if t.device != x.device:
            raise ValueError(f"{name} must be on the input's device {x.device}, got {t.device}")


def check_lora_inputs(x, base_weight, lora_a, lora_b, adapter_ids, alpha) -> float:
    """Every check of :func:`lora_forward` (module doc); returns ``alpha`` as a float."""
    check_tensor("x", x, ndim=2, dims="batch, d_in", dtypes=FLOAT_DTYPES)
    check_tensor("base_weight", base_weight, ndim=2, dims="d_out, d_in")
    check_tensor("lora_a", lora_a, ndim=3, dims="adapters, r, d_in")
    check_tensor("lora_b", lora_b, ndim=3, dims="adapters, d_out, r")
    check_tensor("adapter_ids", adapter_ids, ndim=1, dims="batch", dtypes=ID_DTYPES)
    alpha = check_real("alpha", alpha)
    _check_same(x, {"base_weight": base_weight, "lora_a": lora_a, "lora_b": lora_b})
    if adapter_ids.device != x.device:
        raise ValueError(f"adapter_ids must be on the input's device {x.device}, got {adapter_ids.device}")
    batch, d_in = x.shape
    d_out = base_weight.shape[0]
    adapters, rank = lora_a.shape[0], lora_a.shape[1]
    if base_weight.shape[1] != d_in:
        raise ValueError(f"base_weight must be (d_out, d_in={d_in}), got {tuple(base_weight.shape)}")
    if rank < 1:
        raise ValueError(f"lora_a must have rank r >= 1 (its second dimension), got {tuple(lora_a.shape)}")
    if lora_a.shape[2] != d_in:
        raise ValueError(f"lora_a must be (adapters, r, d_in={d_in}), got {tuple(lora_a.shape)}")
    if tuple(lora_b.shape) != (adapters, d_out, rank):
        raise ValueError(f"lora_b must be (adapters, d_out, r) = {(adapters, d_out, rank)}, got {tuple(lora_b.shape)}")
    if adapter_ids.shape[0] != batch:
        raise ValueError(f"adapter_ids must name one adapter per row of x ({batch}), got {adapter_ids.shape[0]}")
    if batch and (int(adapter_ids.min()) < NO_ADAPTER or int(adapter_ids.max()) >= adapters):
        raise ValueError(f"adapter_ids must be in [-1, {adapters}) (-1: no adapter), got values in "
                         f"[{int(adapter_ids.min())}, {int(adapter_ids.max())}]")
    return alpha


def lora_forward(x: torch.Tensor, base_weight: torch.Tensor, lora_a: torch.Tensor, lora_b: torch.Tensor,
                 adapter_ids: torch.Tensor, alpha: float) -> torch.Tensor:
    """The base layer plus each row's own adapter, scaled by ``alpha / r``; rows of id -1 get the
    base alone (module doc): (B, d_out) in x's dtype.

    Bad input: x a float tensor (B, d_in); ``base_weight`` (d_out, d_in), ``lora_a`` (N, r >= 1,
    d_in), ``lora_b`` (N, d_out, r) of x's dtype and device; ``adapter_ids`` an int32/int64 tensor
    (B,) with values in [-1, N); ``alpha`` a finite real -> else TypeError/ValueError naming it."""
    alpha = check_lora_inputs(x, base_weight, lora_a, lora_b, adapter_ids, alpha)
    cdt = compute_dtype(x.dtype)
    xc = x.to(cdt)
    y = xc @ base_weight.to(cdt).T
    scaling = alpha / lora_a.shape[1]
    for adapter in adapter_ids.unique().tolist():
        if adapter == NO_ADAPTER:
            continue
        rows = (adapter_ids == adapter).nonzero()[:, 0]
        shrink = xc[rows] @ lora_a[adapter].to(cdt).T
        y[rows] += scaling * (shrink @ lora_b[adapter].to(cdt).T)
    return y.to(x.dtype)


def merge_lora(base_weight: torch.Tensor, lora_a: torch.Tensor, lora_b: torch.Tensor, alpha: float) -> torch.Tensor:
    """One adapter merged into the base weight: ``W + (alpha / r) B A`` in the compute dtype,
    rounded to W's dtype once; (d_out, d_in).

    Bad input: ``base_weight`` a float tensor (d_out, d_in); ``lora_a`` (r >= 1, d_in) and
    ``lora_b`` (d_out, r) of its dtype and device; ``alpha`` a finite real -> else
    TypeError/ValueError naming it."""
    check_tensor("base_weight", base_weight, ndim=2, dims="d_out, d_in", dtypes=FLOAT_DTYPES)
    check_tensor("lora_a", lora_a, ndim=2, dims="r, d_in")
    check_tensor("lora_b", lora_b, ndim=2, dims="d_out, r")
    alpha = check_real("alpha", alpha)
    _check_same(base_weight, {"lora_a": lora_a, "lora_b": lora_b})
    d_out, d_in = base_weight.shape
    rank = lora_a.shape[0]
    if rank < 1 or lora_a.shape[1] != d_in:
        raise ValueError(f"lora_a must be (r >= 1, d_in={d_in}), got {tuple(lora_a.shape)}")
    if tuple(lora_b.shape) != (d_out, rank):
        raise ValueError(f"lora_b must be (d_out, r) = {(d_out, rank)}, got {tuple(lora_b.shape)}")
    cdt = compute_dtype(base_weight.dtype)
    merged = base_weight.to(cdt) + (alpha / rank) * (lora_b.to(cdt) @ lora_a.to(cdt))
    return merged.to(base_weight.dtype)
