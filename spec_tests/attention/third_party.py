"""A third-party "must pass" submission for `attention`: PyTorch's own
``torch.nn.functional.scaled_dot_product_attention`` (SDPA), wrapped to the contract's interface.

Everything numerical in ``out`` is SDPA's (its math backend on CPU; whatever backend it picks on a
GPU). This file only translates the contract to SDPA's arguments and adds what SDPA does not do:

- Masking: SDPA's ``is_causal=True`` is aligned top-left; the contract's causal mask is aligned
  bottom-right and has a left ``window``. Both are passed to SDPA as an explicit boolean
  ``attn_mask`` built here from positions (query i sits at i + kv_len - q_len).
- GQA/MQA: SDPA's ``enable_gqa=True`` (query head h reads KV head h // group, as in the contract).
- Fully masked rows: the contract says out 0; some SDPA backends give NaN there, so those rows
  are set to 0 (``torch.where`` on the mask).
- ``lse``: SDPA's public API does not return the log-sum-exp. With ``return_lse=True`` it is
  computed separately, with plain torch ops only (``torch.logsumexp`` of the masked scores, in
  float32, float64 for float64 inputs), none of them from this repository's reference.
- Argument checks (the contract's bad-input rules: SDPA raises RuntimeError or nothing), written
  here from the contract's text, not imported from reference/.

Run: ``pytest spec_tests/attention --impl spec_tests/attention/third_party.py``
(spec_tests/attention/test_third_party.py requires it to pass).
"""
from __future__ import annotations

import math
from numbers import Real

import torch
import torch.nn.functional as F

__all__ = ["attention"]

_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _check(q, k, v, window, scale) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(f"{name} must be 4-d (batch, heads, len, head_dim), got {tuple(t.shape)}")
        if t.dtype not in _FLOATS:
            raise TypeError(f"{name} must be a floating tensor, got {t.dtype}")
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(f"k and v must have q's dtype: q {q.dtype}, k {k.dtype}, v {v.dtype}")
    if not q.device == k.device == v.device:
        raise ValueError(f"q, k, v must be on one device: {q.device}, {k.device}, {v.device}")
    if k.shape != v.shape:
        raise ValueError(f"k {tuple(k.shape)} and v {tuple(v.shape)} must have one shape")
    if k.shape[0] != q.shape[0] or k.shape[3] != q.shape[3]:
        raise ValueError(f"k {tuple(k.shape)} must match q {tuple(q.shape)} in batch and head_dim")
    if q.shape[3] == 0:
        raise ValueError("head_dim must be >= 1, got 0")
    if k.shape[1] == 0 or q.shape[1] % k.shape[1]:
        raise ValueError(f"q heads ({q.shape[1]}) must be a multiple of k heads ({k.shape[1]})")
    if window is not None:
        if not isinstance(window, int) or isinstance(window, bool):
            raise TypeError(f"window must be an int or None, got {window!r}")
        if window < 0:
            raise ValueError(f"window must be >= 0, got {window}")
    if scale is not None:
        if not isinstance(scale, Real) or isinstance(scale, bool):
            raise TypeError(f"scale must be a real number or None, got {scale!r}")
        if not math.isfinite(scale):
            raise ValueError(f"scale must be finite, got {scale}")


def _mask(q_len: int, kv_len: int, causal: bool, window: int | None, device) -> torch.Tensor:
    """Boolean (q_len, kv_len): True where query i may see key j (bottom-right alignment)."""
    pos = torch.arange(q_len, device=device)[:, None] + (kv_len - q_len)
    j = torch.arange(kv_len, device=device)[None, :]
    keep = torch.ones(q_len, kv_len, dtype=torch.bool, device=device)
    if causal:
        keep = keep & (j <= pos)
    if window is not None:
        keep = keep & (j >= pos - window)
    return keep


def attention(q, k, v, *, causal: bool = False, window: int | None = None,
              scale: float | None = None, return_lse: bool = False):
    _check(q, k, v, window, scale)
    q_len, kv_len, head_dim = q.shape[2], k.shape[2], q.shape[3]
    scale = 1.0 / math.sqrt(head_dim) if scale is None else float(scale)
    keep = _mask(q_len, kv_len, causal, window, q.device)
    seen = keep.any(-1)[:, None]                                    # (q_len, 1): a visible key
    if min(q.numel(), k.numel()) == 0:                              # nothing to attend to
        out = torch.zeros_like(q)
    else:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, scale=scale, enable_gqa=True)
        out = torch.where(seen, out, torch.zeros((), dtype=out.dtype, device=out.device))
    if not return_lse:
        return out
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    group = q.shape[1] // k.shape[1]
    scores = (q.to(acc) @ k.to(acc).repeat_interleave(group, dim=1).transpose(-1, -2)) * scale
    lse = torch.logsumexp(scores.masked_fill(~keep, -math.inf), dim=-1)
    return out, lse
