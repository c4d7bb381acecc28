"""SmoothQuant: W8A8 with the activation outliers migrated into the weights (course 05.04-05.05).

The course's claim (05.04): quantising activations as well as weights is harder than weights
alone, because a few outlier *channels* of the activations carry a range 10-100x the others;
SmoothQuant (Xiao et al. 2023, "SmoothQuant: Accurate and Efficient Post-Training Quantization for
Large Language Models", ICML) migrates that difficulty into the weights, where it is cheap.

Layout. A linear layer is ``Y = X @ W.T`` with activations ``X`` (tokens, in) and the weight ``W``
(out, in) as torch stores it (``nn.Linear``). Input channel ``j`` is column ``j`` of both.

Migration (paper eq. 3). For any positive per-channel factors ``s`` (in,)::

    X' = X diag(s)^-1        (column j of X divided by s_j)
    W' = W diag(s)           (column j of W multiplied by s_j)
    X' @ W'.T = X @ W.T      exactly in real arithmetic; in floats within rounding.

Smoothing factors (paper eq. 4), with ``max|X_j|`` from calibration and ``max|W_j|`` the largest
``|W[:, j]|`` over the output channels::

    s_j = max|X_j|^alpha / max|W_j|^(1 - alpha),   alpha in [0, 1] (the migration strength)

so that ``max|X'_j| = (max|X_j| max|W_j|)^(1 - alpha)`` and ``max|W'_j| = (max|X_j| max|W_j|)^alpha``:
alpha = 1 gives every activation channel absmax 1 (all difficulty in the weights), alpha = 0 every
weight column absmax 1, alpha = 0.5 balances the two (the paper's default).
Guard for zero columns: where ``max|X_j| = 0`` or ``max|W_j| = 0`` the channel carries nothing to
migrate and ``s_j = 1`` (the formula would give 0, inf or nan there).

INT8, symmetric (no zero point). A scale per tensor, per token (row of X) or per output channel
(row of W)::

    scale = absmax / 127                  (absmax 0 -> scale 1: every code 0, dequantised exactly 0)
    q     = clamp(round(t / scale), -127, 127)    round half to even (torch.round); -128 unused

Dequantised ``q * scale`` is within ``scale / 2`` of ``t`` (no saturation with the dynamic scale:
``|t| / scale <= 127``). A *static* activation scale (from calibration) saturates values beyond it.

W8A8 matmul: ``acc = x_q @ w_q.T`` summed in int32, exact while ``in <= 131071`` (every product is
at most 128 * 128 = 2**14 in magnitude, so 131071 of them stay below 2**31), then rescaled:
``y[i, j] = acc[i, j] * sx[i] * sw[j]``. Error bound per element (no saturation), with ``sx[i]``,
``sw[j]`` the scales of row i of X and row j of W::

    |y[i, j] - (X @ W.T)[i, j]| <= sum_k ( sx[i]/2 |W[j, k]| + sw[j]/2 |X[i, k]| + sx[i] sw[j] / 4 )

(from ``x_hat w_hat - x w = e w + x f + e f`` with ``|e| <= sx/2``, ``|f| <= sw/2``) plus the
float rounding of the scales and the rescale (a few units of the compute dtype's roundoff).

Calibration (05.05): the per-channel ``max|X_j|`` is the running absmax over calibration batches,
equal to the absmax over their concatenation.
"""
from __future__ import annotations

import torch

from reference._checks import FLOAT_DTYPES, check_real, check_tensor, compute_dtype

__all__ = ["calibrate_absmax", "smoothing_factors", "smooth", "quantize_activations",
           "quantize_weights", "int8_matmul", "w8a8_linear"]
__optional__ = []

QMAX = 127  # symmetric INT8: codes -127..127
MAX_IN_FEATURES = (2**31 - 1) // (128 * 128)  # 131071: int32 accumulation cannot overflow


def _float_matrix(name: str, t, dims: str, *, rows_may_be_empty: bool = False) -> torch.Tensor:
    """A finite float matrix with at least one column (and one row unless ``rows_may_be_empty``)."""
    check_tensor(name, t, ndim=2, dims=dims, dtypes=FLOAT_DTYPES)
    if t.shape[1] == 0 or (t.shape[0] == 0 and not rows_may_be_empty):
        raise ValueError(f"{name} must not be empty ({dims}), got shape {tuple(t.shape)}")
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} must be finite (no nan or inf)")
    return t


def _check_bool(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {value!r}")
    return value


def calibrate_absmax(batches) -> torch.Tensor:
    """Per-channel activation absmax over calibration batches: ``max|X_j|`` of the module doc.

    ``batches`` is a non-empty list or tuple of float tensors (tokens, in) of one dtype and one
    ``in >= 1``; a batch of 0 tokens is legal and contributes nothing. Returns a tensor (in,) of the
    compute dtype (float64 for float64 batches, else float32), the running maximum of ``|x|``
    over every batch, exactly the absmax of the batches concatenated (max is exact in floats);
    0 for a channel never seen non-zero. Bad input: ``batches`` not a list/tuple -> ``TypeError``,
    empty -> ``ValueError``; a batch that is not a float tensor -> ``TypeError``, not 2-D, of
    another ``in``, of another dtype or holding nan/inf -> ``ValueError`` / ``TypeError``; every
    message names ``batches``."""
    if not isinstance(batches, (list, tuple)):
        raise TypeError(f"batches must be a list or tuple of tensors, got {type(batches).__name__}")
    if len(batches) == 0:
        raise ValueError("batches must hold at least one calibration batch")
    for i, x in enumerate(batches):
        if not isinstance(x, torch.Tensor) or x.dtype not in FLOAT_DTYPES:
            raise TypeError(f"batches[{i}] must be a float tensor, got {getattr(x, 'dtype', type(x).__name__)}")
    first = batches[0]
    for i, x in enumerate(batches):
        if x.dim() != 2 or first.dim() != 2 or x.shape[1] != first.shape[1] or x.shape[1] == 0:
            raise ValueError(f"batches[{i}] must be (tokens, in) with in >= 1 equal to batches[0]'s, "
                             f"got {tuple(x.shape)} (batches[0]: {tuple(first.shape)})")
        if x.dtype != first.dtype:
            raise TypeError(f"batches[{i}] has dtype {x.dtype}, batches[0] {first.dtype}: one dtype")
        if not bool(torch.isfinite(x).all()):
            raise ValueError(f"batches[{i}] must be finite (no nan or inf)")
    absmax = torch.zeros(first.shape[1], dtype=compute_dtype(first.dtype), device=first.device)
    for x in batches:
        if x.shape[0] > 0:
            absmax = torch.maximum(absmax, x.abs().amax(dim=0).to(absmax.dtype))
    return absmax


def smoothing_factors(act_absmax: torch.Tensor, weight: torch.Tensor, alpha: float = 0.5) -> torch.Tensor:
    """``s_j = max|X_j|^alpha / max|W_j|^(1 - alpha)`` (paper eq. 4), a tensor (in,).

    ``act_absmax`` (in,): the calibrated ``max|X_j|`` (finite, >= 0); ``weight`` (out, in);
    ``alpha`` in [0, 1], default 0.5. ``max|W_j|`` is the absmax of column j of ``weight`` (over
    the output channels). The result is positive and finite, of the compute dtype (float64 when
    either input is float64, else float32). Choice (the paper leaves it open): where
    ``max|X_j| = 0`` or ``max|W_j| = 0``, ``s_j = 1``. Bad input: a non-tensor or non-float
    tensor -> ``TypeError``; ``act_absmax`` not 1-D of length ``in``, negative or non-finite,
    ``weight`` not 2-D, empty or non-finite -> ``ValueError``; ``alpha`` not a real number (a bool
    neither) -> ``TypeError``, outside [0, 1] -> ``ValueError``; each names its argument."""
    check_tensor("act_absmax", act_absmax, ndim=1, dims="in", dtypes=FLOAT_DTYPES)
    _float_matrix("weight", weight, "out, in")
    alpha = check_real("alpha", alpha, minimum=0.0, maximum=1.0)
    if act_absmax.shape[0] != weight.shape[1]:
        raise ValueError(f"act_absmax must have length in={weight.shape[1]}, got {act_absmax.shape[0]}")
    if not bool(torch.isfinite(act_absmax).all()) or bool((act_absmax < 0).any()):
        raise ValueError("act_absmax must be finite and >= 0 (an absmax)")
    dtype = torch.float64 if torch.float64 in (act_absmax.dtype, weight.dtype) else torch.float32
    x_max = act_absmax.to(dtype)
    w_max = weight.to(dtype).abs().amax(dim=0)  # max over output channels: one value per input channel
    s = x_max.pow(alpha) / w_max.pow(1.0 - alpha)
    return torch.where((x_max > 0) & (w_max > 0), s, torch.ones_like(s))


def smooth(x: torch.Tensor, weight: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The migration: ``(x / s, weight * s)`` with ``s`` broadcast over the rows of both, so that
    ``x' @ weight'.T == x @ weight.T`` up to rounding.

    ``x`` (tokens, in), ``weight`` (out, in), ``s`` (in,) positive and finite. Each result keeps
    its input's dtype (computed in the compute dtype, then rounded once more for fp16/bf16); the
    inputs are not modified; ``x`` may have 0 tokens. Bad input: a non-tensor or non-float tensor
    -> ``TypeError``; a wrong rank, an empty ``weight`` or 0 columns, an ``in`` that differs from ``weight``'s, nan/inf, or an ``s`` <= 0 ->
    ``ValueError`` naming the argument."""
    _float_matrix("x", x, "tokens, in", rows_may_be_empty=True)
    _float_matrix("weight", weight, "out, in")
    check_tensor("s", s, ndim=1, dims="in", dtypes=FLOAT_DTYPES)
    if x.shape[1] != weight.shape[1]:
        raise ValueError(f"x must have in={weight.shape[1]} columns (weight's), got {x.shape[1]}")
    if s.shape[0] != weight.shape[1]:
        raise ValueError(f"s must have length in={weight.shape[1]}, got {s.shape[0]}")
    if not bool(torch.isfinite(s).all()) or not bool((s > 0).all()):
        raise ValueError("s must be finite and > 0")
    x_smooth = (x.to(compute_dtype(x.dtype)) / s.to(compute_dtype(x.dtype))).to(x.dtype)
    w_smooth = (weight.to(compute_dtype(weight.dtype)) * s.to(compute_dtype(weight.dtype))).to(weight.dtype)
    return x_smooth, w_smooth


def _scale_of(absmax: torch.Tensor) -> torch.Tensor:
    """``absmax / 127``; 1 where absmax is 0 (all codes 0, dequantised exactly 0)."""
    return torch.where(absmax > 0, absmax / QMAX, torch.ones_like(absmax))


def _to_int8(t: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``clamp(round(t / scale), -127, 127)`` as int8; torch.round rounds half to even."""
    return torch.clamp(torch.round(t / scale), -QMAX, QMAX).to(torch.int8)


def quantize_activations(x: torch.Tensor, *, per_token: bool = True,
                         scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric INT8 of activations ``x`` (tokens, in): returns ``(x_q, x_scale)``.

    Dynamic (``scale=None``): ``per_token=True`` (default) gives one scale per row, ``x_scale``
    (tokens, 1); ``per_token=False`` one for the tensor, ``x_scale`` of shape (). ``x_scale =
    absmax / 127`` (1 where absmax is 0), of the compute dtype; ``x_q`` int8 (tokens, in) with
    ``x_q = round_half_even(x / x_scale)``, so ``|x - x_q * x_scale| <= x_scale / 2`` and the
    absmax element maps to +-127. Static (``scale`` a positive real, from calibration:
    ``absmax / 127``): per-tensor with that scale, ``per_token`` must be False; values beyond
    ``127 * scale`` saturate to +-127. A 0-token ``x`` is legal. Bad input: ``x`` not a float
    tensor -> ``TypeError``, not 2-D, of 0 columns or non-finite -> ``ValueError``; ``per_token`` not a bool ->
    ``TypeError``; ``scale`` not a real -> ``TypeError``, not finite and > 0, or given with
    ``per_token=True`` -> ``ValueError``; each names its argument."""
    _float_matrix("x", x, "tokens, in", rows_may_be_empty=True)
    _check_bool("per_token", per_token)
    dtype = compute_dtype(x.dtype)
    xc = x.to(dtype)
    if scale is not None:
        scale = check_real("scale", scale)
        if scale <= 0:
            raise ValueError(f"scale must be > 0, got {scale}")
        if per_token:
            raise ValueError("scale is a static per-tensor scale: pass per_token=False with it")
        x_scale = torch.tensor(scale, dtype=dtype, device=x.device)
    elif per_token:
        x_scale = _scale_of(xc.abs().amax(dim=1, keepdim=True))
    else:
        x_scale = _scale_of(xc.abs().max() if xc.numel() else xc.new_zeros(()))
    return _to_int8(xc, x_scale), x_scale


def quantize_weights(weight: torch.Tensor, *, per_channel: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric INT8 of a weight (out, in): returns ``(w_q, w_scale)``.

    ``per_channel=True`` (default): one scale per output channel (row), ``w_scale`` (out, 1);
    ``per_channel=False``: one for the tensor, shape (). ``w_scale = absmax / 127`` (1 where
    absmax is 0), of the compute dtype; ``w_q`` int8 with ``w_q = round_half_even(weight /
    w_scale)``, ``|weight - w_q * w_scale| <= w_scale / 2``. Bad input: ``weight`` not a float
    tensor -> ``TypeError``, not 2-D, empty or non-finite -> ``ValueError``; ``per_channel`` not a bool
    -> ``TypeError``; each names its argument."""
    _float_matrix("weight", weight, "out, in")
    _check_bool("per_channel", per_channel)
    wc = weight.to(compute_dtype(weight.dtype))
    if per_channel:
        w_scale = _scale_of(wc.abs().amax(dim=1, keepdim=True))
    else:
        w_scale = _scale_of(wc.abs().max())
    return _to_int8(wc, w_scale), w_scale


def int8_matmul(x_q: torch.Tensor, w_q: torch.Tensor) -> torch.Tensor:
    """``x_q @ w_q.T`` of int8 matrices, accumulated in int32: exact, an int32 tensor (tokens, out).

    ``x_q`` (tokens, in), ``w_q`` (out, in), both int8 (every code -128..127 allowed). Exact for
    ``in <= 131071`` (module doc); a larger ``in`` could overflow int32 and is rejected. Bad
    input: not an int8 tensor -> ``TypeError``; not 2-D, ``in`` differing, or ``in > 131071``
    -> ``ValueError``; each names its argument."""
    check_tensor("x_q", x_q, ndim=2, dims="tokens, in", dtypes=(torch.int8,))
    check_tensor("w_q", w_q, ndim=2, dims="out, in", dtypes=(torch.int8,))
    if x_q.shape[1] != w_q.shape[1]:
        raise ValueError(f"w_q must have in={x_q.shape[1]} columns (x_q's), got {w_q.shape[1]}")
    if x_q.shape[1] > MAX_IN_FEATURES:
        raise ValueError(f"x_q has in={x_q.shape[1]} > {MAX_IN_FEATURES}: the int32 sum could overflow")
    return torch.matmul(x_q.to(torch.int32), w_q.to(torch.int32).T)


def w8a8_linear(x: torch.Tensor, weight: torch.Tensor, *, per_token: bool = True, per_channel: bool = True,
                act_scale: float | None = None) -> torch.Tensor:
    """``x @ weight.T`` through W8A8: quantise ``x`` (:func:`quantize_activations` with
    ``per_token`` and the static ``act_scale``) and ``weight`` (:func:`quantize_weights` with
    ``per_channel``), multiply in int32 (:func:`int8_matmul`), rescale by ``x_scale[i] *
    w_scale[j]`` in the compute dtype; returns (tokens, out) in ``x``'s dtype.

    ``x`` (tokens, in) and ``weight`` (out, in) of one float dtype. The error bound per element
    is the module doc's. Smoothing is not applied here: pass ``smooth``'s outputs to smooth.
    Bad input: as the functions it calls (``act_scale`` as their ``scale``, named ``act_scale``),
    and ``weight`` of another dtype than ``x`` -> ``TypeError``, of another ``in`` ->
    ``ValueError``, each naming ``weight``."""
    _float_matrix("x", x, "tokens, in", rows_may_be_empty=True)
    _float_matrix("weight", weight, "out, in")
    if weight.dtype != x.dtype:
        raise TypeError(f"weight must have x's dtype {x.dtype}, got {weight.dtype}")
    if weight.shape[1] != x.shape[1]:
        raise ValueError(f"weight must have in={x.shape[1]} columns (x's), got {weight.shape[1]}")
    if act_scale is not None:
        act_scale = check_real("act_scale", act_scale)
        if act_scale <= 0 or per_token:
            raise ValueError(f"act_scale must be > 0 and given with per_token=False (a static per-tensor "
                             f"scale), got {act_scale} with per_token={per_token!r}")
    x_q, x_scale = quantize_activations(x, per_token=per_token, scale=act_scale)
    w_q, w_scale = quantize_weights(weight, per_channel=per_channel)
    acc = int8_matmul(x_q, w_q)
    y = acc.to(x_scale.dtype) * x_scale * w_scale.reshape(-1)
    return y.to(x.dtype)
