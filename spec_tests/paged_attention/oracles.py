"""The oracle: plain attention over each sequence's keys stored contiguously, in float64.

``reference.attention.attention`` is itself checked against a float64 brute force
(spec_tests/attention); here it gets each sequence's contiguous K/V (never the paged cache), with
bottom-right causal masking and the window, so paging is the only thing under test."""
from __future__ import annotations

import torch

from reference.attention import attention


def contiguous_oracle(inputs, *, scale=None, window=None, dtype=torch.float64):
    """(out, lse) of every sequence, shaped like the contract's: out like q, lse q's shape
    without head_dim; computed in ``dtype`` (float64: the oracle; q's dtype: the same contiguous
    computation in low precision)."""
    q = inputs.q if inputs.q.dim() == 4 else inputs.q.unsqueeze(1)
    outs, lses = [], []
    for b in range(q.shape[0]):
        qb = q[b].transpose(0, 1)[None].to(dtype)                 # (1, q_heads, q_len, d)
        kb = inputs.k[b].transpose(0, 1)[None].to(dtype)          # (1, kv_heads, seq_len, d)
        vb = inputs.v[b].transpose(0, 1)[None].to(dtype)
        o, l = attention(qb, kb, vb, causal=True, window=window, scale=scale, return_lse=True)
        outs.append(o[0].transpose(0, 1))
        lses.append(l[0].transpose(0, 1))
    out, lse = torch.stack(outs), torch.stack(lses)
    if inputs.q.dim() == 3:
        out, lse = out[:, 0], lse[:, 0]
    return out, lse
