"""Scales q in place to save a multiply (q.mul_(scale)): the output is right, the caller's q is
silently changed."""
import math

import reference.attention as ref

TARGET = "attention"


def attention(q, k, v, *, causal=False, window=None, scale=None, return_lse=False):
    ref.check_attention_inputs(q, k, v, window, scale)
    s = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    q.mul_(s)
    return ref.attention(q, k, v, causal=causal, window=window, scale=1.0, return_lse=return_lse)
