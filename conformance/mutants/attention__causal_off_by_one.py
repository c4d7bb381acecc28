"""Causal mask off by one: each query also sees the next key (j <= p_i + 1), a classic bug when
porting a top-left-aligned mask to bottom-right alignment."""
import torch

import reference.attention as ref

TARGET = "attention"


def attention(q, k, v, *, causal=False, window=None, scale=None, return_lse=False):
    if not causal:
        return ref.attention(q, k, v, window=window, scale=scale, return_lse=return_lse)
    q_len, kv_len = q.shape[2], k.shape[2]
    # Emulate the bug through an explicit mask: visible if j <= p_i + 1.
    pos_q = torch.arange(q_len)[:, None] + (kv_len - q_len)
    allowed = torch.arange(kv_len)[None, :] <= pos_q + 1
    if window is not None:
        allowed &= torch.arange(kv_len)[None, :] >= pos_q - window
    return _masked(q, k, v, allowed.to(q.device), scale, return_lse)


def _masked(q, k, v, allowed, scale, return_lse):
    import math
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    s = (q @ k.transpose(-1, -2)).to(acc) * scale
    s = s.masked_fill(~allowed, float("-inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.nan_to_num(torch.exp(s - lse.unsqueeze(-1)), nan=0.0)
    out = (p.to(v.dtype) @ v)
    return (out, lse) if return_lse else out
