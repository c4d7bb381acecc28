"""Float64 oracles of the SmoothQuant spec, written from the paper's and the module doc's formulas
without the reference: symmetric INT8 quantisation, the W8A8 product and its error bound.

Roundoff: ``unit(dtype)`` is the unit roundoff of the dtype arithmetic happens in (2**-24 for
float32, the compute dtype of every lower precision; 2**-53 for float64).
"""
from __future__ import annotations

import torch

QMAX = 127


def unit(dtype: torch.dtype) -> float:
    """Unit roundoff (half an ulp at 1) of ``dtype``."""
    return torch.finfo(dtype).eps / 2


def compute_of(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def scale_of(absmax: torch.Tensor) -> torch.Tensor:
    """``absmax / 127`` in float64; 1 where absmax is 0."""
    absmax = absmax.to(torch.float64)
    return torch.where(absmax > 0, absmax / QMAX, torch.ones_like(absmax))


def row_absmax(t: torch.Tensor, per_row: bool) -> torch.Tensor:
    t = t.to(torch.float64).abs()
    if per_row:
        return t.amax(dim=1, keepdim=True) if t.shape[1] else t.new_zeros(t.shape[0], 1)
    return t.max() if t.numel() else t.new_zeros(())


def quantize(t: torch.Tensor, scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(q, ambiguous)``: ``q = clamp(round_half_even(t / scale), -127, 127)`` computed in
    float64 (int64), and the mask of entries whose ``t / scale`` lies so close to a rounding
    midpoint (within 8 units of roundoff of the lower-precision compute dtype, relative) that an
    implementation computing in that dtype may round it the other way."""
    r = t.to(torch.float64) / scale
    q = torch.clamp(torch.round(r), -QMAX, QMAX).to(torch.int64)
    frac = (r - torch.floor(r) - 0.5).abs()
    ambiguous = frac <= 8 * unit(compute_of(t.dtype)) * (r.abs() + 1)
    return q, ambiguous


def w8a8(x: torch.Tensor, w: torch.Tensor, *, per_token: bool, per_channel: bool, act_scale=None):
    """The W8A8 product in float64 from this file's quantisation, and the per-element slack for a
    ``+-1`` code at an ambiguous midpoint: ``(y, slack, sx, sw)`` with ``sx`` (tokens, 1) or (),
    ``sw`` (out, 1) or ()."""
    sx = (torch.tensor(float(act_scale), dtype=torch.float64) if act_scale is not None
          else scale_of(row_absmax(x, per_token)))
    sw = scale_of(row_absmax(w, per_channel))
    qx, ax = quantize(x, sx)
    qw, aw = quantize(w, sw)
    acc = qx @ qw.T  # int64: exact
    swr = sw.reshape(-1)
    y = acc.to(torch.float64) * sx * swr
    # a flipped code of x[i, k] moves y[i, j] by sx[i] * |qw[j, k]| * sw[j] (+ the same for w)
    slack = ((ax.double() * sx) @ ((qw.abs().double() + 1) * sw).T
             + ((qx.abs().double() + 1) * sx) @ (aw.double() * sw).T)
    return y, slack, sx, sw


def error_bound(x: torch.Tensor, w: torch.Tensor, sx: torch.Tensor, sw: torch.Tensor) -> torch.Tensor:
    """The module doc's per-element bound of ``|y - x @ w.T|`` (no saturation), float64:
    ``sum_k sx[i]/2 |w[j, k]| + sw[j]/2 |x[i, k]| + sx[i] sw[j] / 4``."""
    x64, w64 = x.to(torch.float64).abs(), w.to(torch.float64).abs()
    k = x.shape[1]
    swr = sw.reshape(-1)
    return (sx / 2) * w64.sum(dim=1) + x64.sum(dim=1, keepdim=True) * (swr / 2) + k * sx * swr / 4
