"""Independent oracles, written differently from the reference, in float64; and the magnitudes
that set the rounding floor of attention's outputs (conformance/tolerance.py, ``floor_from``)."""
from __future__ import annotations

import math

import torch


def attention_brute_force(q, k, v, *, causal=False, window=None, scale=None):
    """Float64 attention written apart from the reference: the keys each query sees are listed
    with Python ints (query i at position i + kv_len - q_len), K/V heads are materialised by
    repeat, the softmax is an explicit max / exp / sum. Returns (out, lse) in float64 on the
    inputs' device (a GPU run computes its oracle on the GPU: no per-example work on the host)."""
    q, k, v = (t.detach().to(torch.float64) for t in (q, k, v))
    batch, q_heads, q_len, head_dim = q.shape
    kv_heads, kv_len = k.shape[1], k.shape[2]
    k = k.repeat_interleave(q_heads // kv_heads, dim=1)
    v = v.repeat_interleave(q_heads // kv_heads, dim=1)
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    visible = [[(not causal or j <= i + kv_len - q_len) and (window is None or j >= i + kv_len - q_len - window)
                for j in range(kv_len)] for i in range(q_len)]
    visible = torch.tensor(visible, dtype=torch.bool, device=q.device).reshape(q_len, kv_len)
    s = torch.einsum("bhid,bhjd->bhij", q, k) * scale
    s = torch.where(visible, s, -math.inf)
    m = s.amax(dim=-1, keepdim=True) if kv_len else s.new_full((batch, q_heads, q_len, 1), -math.inf)
    m = torch.where(torch.isfinite(m), m, 0.0)                   # a row that sees no key
    w = torch.exp(s - m)                                          # 0 where not visible
    denom = w.sum(dim=-1, keepdim=True)
    out = torch.einsum("bhij,bhjd->bhid", w / torch.where(denom > 0, denom, 1.0), v)
    lse = torch.where(denom > 0, m + torch.log(denom), -math.inf).squeeze(-1)
    return out, lse


# ------------------------------------------------------------------ rounding-floor magnitudes
# A correct implementation's error on out_i = sum_j p_ij v_j comes mostly from its scores, and a
# score s_ij = scale q_i.k_j is rounded twice: its dot product is accumulated in float32 (an error
# at the magnitude S = max |scale| sum_d |q_id k_jd|, not at |s_ij|: the terms cancel), and the
# contract's data flow lets the score be rounded to the input dtype (an error at max |s_ij|).
# Neither is at the magnitude of out (a query over a few keys with large scores has |out| ~ 1 but
# score errors of ulp(30)); the score error reaches out through the values:
# d out_i = sum_j p_ij ds_ij (v_j - out_i). So the floor of out (2 ulps of its dtype at a
# magnitude) is taken at rms(v) * (max|s| + S * eps32 / eps_dtype), never below max |out|; that of
# lse (float32) at S + log kv_len + max|s| * eps_dtype / eps32 (|lse| <= S + log kv_len).
# Torch's own SDPA, wrapped as a submission, failed the output-magnitude floor in about 2 of
# 4,000 single-query float32 cases (spec_tests/attention/third_party.py; docs/suite-power.md).

def _magnitudes(q: torch.Tensor, k: torch.Tensor, scale: float | None) -> tuple[float, float]:
    """(S, max |s|) over every (query, key) pair of a head and its KV head (masked pairs
    included: upper bounds). q (..., q_heads, q_len, d), k (..., kv_heads, kv_len, d)."""
    if q.numel() == 0 or k.numel() == 0:
        return 0.0, 0.0
    q, k = q.detach().to(torch.float64), k.detach().to(torch.float64)
    k = k.repeat_interleave(q.shape[-3] // k.shape[-3], dim=-3)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else abs(float(scale))
    big = float((q.abs() @ k.abs().transpose(-1, -2)).max()) * scale
    top = float((q @ k.transpose(-1, -2)).abs().max()) * scale
    return big, top


def _eps(dtype: torch.dtype) -> float:
    return torch.finfo(dtype).eps


def out_floor_from(q, k, v, scale, oracle_out: torch.Tensor) -> torch.Tensor:
    """``floor_from`` for attention outputs (dtype q.dtype): the larger of max |out| and
    rms(v) * (max|s| + S * eps32 / eps_dtype)."""
    big, top = _magnitudes(q, k, scale)
    rms_v = float(v.detach().to(torch.float64).pow(2).mean().sqrt()) if v.numel() else 0.0
    ratio = _eps(torch.float32) / _eps(q.dtype) if q.dtype != torch.float64 else 1.0
    return torch.cat([oracle_out.detach().to("cpu", torch.float64).reshape(-1),
                      torch.tensor([rms_v * (top + big * ratio)], dtype=torch.float64)])


def lse_floor_from(q, k, scale) -> torch.Tensor:
    """``floor_from`` for lse (float32; float64 has no floor): S + log(kv_len) bounds |lse|, plus
    the input dtype's rounding of the largest score, in float32 terms."""
    big, top = _magnitudes(q, k, scale)
    ratio = _eps(q.dtype) / _eps(torch.float32) if q.dtype != torch.float64 else 1.0
    return torch.tensor([big + math.log(max(k.shape[-2], 1)) + top * ratio], dtype=torch.float64)


def packed_as_batch(t: torch.Tensor) -> torch.Tensor:
    """(total, heads, d) -> (1, heads, total, d): a packed batch as one sequence, so the
    magnitudes above (an upper bound over every pair, across sequences too) apply to it."""
    return t.transpose(0, 1).unsqueeze(0)
