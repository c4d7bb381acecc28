"""Oracles restated from the contract's text (reference/weight_quant.py's module doc), in float64,
without importing the reference: the exact dequantised weight, the grid's step per element and the
layer-output error."""
from __future__ import annotations

import torch


def expand(per_group: torch.Tensor, in_features: int) -> torch.Tensor:
    """(out, groups) -> (out, in_features): each group's value repeated over its columns."""
    return per_group.repeat_interleave(in_features // per_group.shape[1], dim=1)


def exact_dequant(codes, scales, zeros) -> torch.Tensor:
    """ŵ = s (u - z) in float64 (exact: a small integer times a float32/16 scale)."""
    k = codes.shape[1]
    return (codes.double() - expand(zeros.double(), k)) * expand(scales.double(), k)


def unpack_pairs(packed: torch.Tensor) -> torch.Tensor:
    """uint8 (n, b) -> int64 codes (n, 2b): byte i holds column 2i in its low nibble."""
    p = packed.long()
    out = torch.empty((p.shape[0], 2 * p.shape[1]), dtype=torch.int64, device=p.device)
    out[:, 0::2] = p % 16
    out[:, 1::2] = p // 16
    return out


def matmul_oracle(x, packed, scales, zeros) -> torch.Tensor:
    """x ŵᵀ in float64 (x's leading dimensions kept)."""
    w = exact_dequant(unpack_pairs(packed).cpu(), scales.cpu(), zeros.cpu())
    return x.detach().cpu().double() @ w.T


def float64_matmul_bound(x, packed, scales, zeros) -> torch.Tensor:
    """Elementwise bound on |fl(x ŵᵀ) − x ŵᵀ| for float64 x, in ANY order of the K products' sum:
    γ_K |x| |ŵ|ᵀ with γ_K = K u / (1 − K u), u = 2⁻⁵³ (Higham, Accuracy and Stability, 3.1). ŵ is
    exact in float64 (a small integer times a float32 scale), so this is the whole error; a float64
    result is not bit-fixed (a GPU and a CPU BLAS sum in different orders)."""
    w = exact_dequant(unpack_pairs(packed).cpu(), scales.cpu(), zeros.cpu())
    k, u = x.shape[-1], 2.0 ** -53
    return (k * u / (1 - k * u)) * (x.detach().cpu().double().abs() @ w.abs().T)


def low_precision_reference(x, packed, scales, zeros) -> torch.Tensor:
    """The contract's own low-precision computation: ŵ rounded to x's dtype, then x @ ŵᵀ."""
    w = exact_dequant(unpack_pairs(packed).cpu(), scales.cpu(), zeros.cpu())
    w = w if x.dtype == torch.float64 else w.float()          # dequantised in float32 (float64)
    return x.detach().cpu() @ w.to(x.dtype).T


def output_error(x, w, w_hat) -> float:
    """||X wᵀ − X ŵᵀ||²_F in float64."""
    xs = x.reshape(-1, x.shape[-1]).double()
    return float(((xs @ (w.double() - w_hat.double()).T) ** 2).sum())
