"""Plain softmax over a fully masked row: exp(-inf - (-inf)) = NaN leaks into the output instead
of the specified 0 (and lse = -inf)."""
import math

import torch

import reference.attention as ref

TARGET = "attention"


def attention(q, k, v, *, causal=False, window=None, scale=None, return_lse=False):
    ref.check_attention_inputs(q, k, v, window, scale)
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    s = (q @ k.transpose(-1, -2)).to(acc) * scale
    mask = ref.visible_mask(q.shape[2], k.shape[2], causal=causal, window=window, device=q.device)
    s = s.masked_fill(~mask, float("-inf"))
    p = torch.softmax(s, dim=-1)
    out = p.to(v.dtype) @ v
    return (out, torch.logsumexp(s, -1)) if return_lse else out
