"""Causal mask aligned top-left (j <= i) instead of bottom-right (j <= i + kv_len - q_len): right
when q_len == kv_len, wrong for decode and chunked prefill."""
import torch

import reference.attention as ref
from conformance.mutants.attention__causal_off_by_one import _masked

TARGET = "attention"


def attention(q, k, v, *, causal=False, window=None, scale=None, return_lse=False):
    if not causal:
        return ref.attention(q, k, v, window=window, scale=scale, return_lse=return_lse)
    q_len, kv_len = q.shape[2], k.shape[2]
    i = torch.arange(q_len)[:, None]
    j = torch.arange(kv_len)[None, :]
    allowed = j <= i
    if window is not None:
        allowed &= j >= i + (kv_len - q_len) - window
    return _masked(q, k, v, allowed.to(q.device), scale, return_lse)
