"""GQA head mapping by modulo (h % kv_heads) instead of by group (h // group): right for MHA and
MQA, wrong for every real GQA model."""
import torch

import reference.attention as ref

TARGET = "attention"


def attention(q, k, v, *, causal=False, window=None, scale=None, return_lse=False):
    ref.check_attention_inputs(q, k, v, window, scale)
    group = q.shape[1] // k.shape[1]
    idx = torch.arange(q.shape[1], device=q.device) % k.shape[1]
    return ref.attention(q, k[:, idx], v[:, idx], causal=causal, window=window, scale=scale,
                         return_lse=return_lse) if group > 1 else ref.attention(
        q, k, v, causal=causal, window=window, scale=scale, return_lse=return_lse)
