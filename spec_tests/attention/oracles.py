"""Independent oracles: computations written differently from the reference, in float64."""
from __future__ import annotations

import math

import torch


def attention_brute_force(q, k, v, *, causal=False, window=None, scale=None):
    """Float64 attention one query position at a time, visible keys listed with Python ints and
    K/V heads materialised by repeat. Returns (out, lse) in float64 on the CPU."""
    q, k, v = (t.detach().to("cpu", torch.float64) for t in (q, k, v))
    batch, q_heads, q_len, head_dim = q.shape
    kv_heads, kv_len = k.shape[1], k.shape[2]
    k = k.repeat_interleave(q_heads // kv_heads, dim=1)
    v = v.repeat_interleave(q_heads // kv_heads, dim=1)
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    out = torch.zeros(batch, q_heads, q_len, head_dim, dtype=torch.float64)
    lse = torch.full((batch, q_heads, q_len), -math.inf, dtype=torch.float64)
    for i in range(q_len):
        pos = i + kv_len - q_len
        keys = [j for j in range(kv_len)
                if (not causal or j <= pos) and (window is None or j >= pos - window)]
        if not keys:
            continue
        s = torch.einsum("bhd,bhjd->bhj", q[:, :, i], k[:, :, keys]) * scale
        m = s.max(dim=-1, keepdim=True).values
        w = torch.exp(s - m)
        denom = w.sum(dim=-1, keepdim=True)
        out[:, :, i] = torch.einsum("bhj,bhjd->bhd", w / denom, v[:, :, keys])
        lse[:, :, i] = (m + torch.log(denom)).squeeze(-1)
    return out, lse
