"""Online softmax that forgets to rescale the accumulator when the running max grows: the exact
bug FlashAttention's correction step exists to prevent. Plain attention is correct."""
import math

import torch

import reference.attention as ref
from reference.attention import attention  # noqa: F401  (the plain form is correct)

TARGET = "attention"


def attention_tiled(q, k, v, *, causal=False, window=None, scale=None, return_lse=False,
                    block_q=16, block_k=16):
    ref.check_attention_inputs(q, k, v, window, scale)
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    acc_t = torch.float64 if q.dtype == torch.float64 else torch.float32
    mask = ref.visible_mask(q.shape[2], k.shape[2], causal=causal, window=window, device=q.device)
    m = torch.full(q.shape[:3], float("-inf"), dtype=acc_t, device=q.device)
    l = torch.zeros(q.shape[:3], dtype=acc_t, device=q.device)
    acc = torch.zeros(q.shape, dtype=acc_t, device=q.device)
    for j0 in range(0, k.shape[2], block_k):
        s = (q @ k[:, :, j0:j0 + block_k].transpose(-1, -2)).to(acc_t) * scale
        s = s.masked_fill(~mask[:, j0:j0 + block_k], float("-inf"))
        m_new = torch.maximum(m, s.amax(-1))
        m_safe = torch.where(torch.isinf(m_new), 0.0, m_new)
        p = torch.exp(s - m_safe.unsqueeze(-1))
        l = l + p.sum(-1)                      # BUG: l and acc not multiplied by exp(m - m_new)
        acc = acc + (p.to(v.dtype) @ v[:, :, j0:j0 + block_k]).to(acc_t)
        m = m_new
    seen = l > 0
    out = torch.where(seen.unsqueeze(-1), acc / torch.where(seen, l, 1.0).unsqueeze(-1), 0.0).to(q.dtype)
    lse = torch.where(seen, m + torch.log(torch.where(seen, l, 1.0)), float("-inf"))
    return (out, lse) if return_lse else out
