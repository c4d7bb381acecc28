"""The oracles of kv_quant, in float64, restated from the contract (reference/kv_quant.py's module
doc; docs/kv_quant.md derives them): the scale a row must get, the error one element may have
(the format's half step), and the bound of quantised attention against unquantised attention.

Nothing here imports reference/kv_quant.py: the bound is the judge's, computed from the original
values and the scale the contract defines, never from the implementation's own scales."""
from __future__ import annotations

import math

import torch

from reference.attention import attention

QMAX = {"fp8": 448.0, "int8": 127.0}
CODE = {"fp8": torch.float8_e4m3fn, "int8": torch.int8}
SCALE_MIN = 2.0 ** -126
SLACK = 2.0 ** -20          # float32 arithmetic: x / s, the scale's own rounding (relative 2^-24 each)


def fmt_of(dtype: torch.dtype) -> str:
    return {v: k for k, v in CODE.items()}[dtype]


def contract_scale(x: torch.Tensor, fmt: str) -> torch.Tensor:
    """max(absmax / QMAX, 2^-126) per row of the last axis, in float64."""
    return torch.clamp(x.double().abs().amax(dim=-1) / QMAX[fmt], min=SCALE_MIN)


def element_bound(x: torch.Tensor, fmt: str) -> torch.Tensor:
    """|x_hat - x| may be at most this, elementwise (float64): the format's half step at y = x / s,
    times s, plus SLACK (|x| + s) for the float32 arithmetic.

        INT8   s / 2
        E4M3   max(2^-4 |x|, 2^-10 s)     (3 mantissa bits: half step 2^-4 |y| for normals;
                                           subnormals below 2^-6 have step 2^-9)"""
    x = x.double()
    s = contract_scale(x, fmt)[..., None]
    if fmt == "int8":
        half = s / 2
    else:
        half = torch.maximum(x.abs() * 2.0 ** -4, s * 2.0 ** -10)
    return half + SLACK * (x.abs() + s)


def dequantized(codes: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """codes * scale exactly (float64: a code has <= 8 significant bits, a scale 24)."""
    return codes.double() * scale.double()[..., None]


def attention64(q, ks, vs, *, scale=None, window=None):
    """(out, lse) float64 of attention of q (batch, q_len, q_heads, d) over per-sequence contiguous
    K/V lists (seq_len, kv_heads, d): causal, bottom-right aligned (paged_attention's math). On the
    CPU whatever device the inputs are on (the oracle is CPU float64)."""
    outs, lses = [], []
    for b in range(q.shape[0]):
        qb, kb, vb = (t.detach().cpu().double().transpose(0, 1)[None] for t in (q[b], ks[b], vs[b]))
        o, l = attention(qb, kb, vb, causal=True, window=window, scale=scale,
                         return_lse=True)
        outs.append(o[0].transpose(0, 1))
        lses.append(l[0].transpose(0, 1))
    return torch.stack(outs), torch.stack(lses)


def attention_bound(q, ks, vs, fmt: str, *, scale=None, window=None):
    """(out_bound, lse_bound) float64, q-shaped (batch, q_len, q_heads[, d]): how far exact
    attention over the quantised K/V may be from exact attention over ks, vs (the originals).

    For a query (head h, KV head g) at position p seeing keys J = [lo, p]:
        eps      = tau * max_{j in J} sum_d |q_d| u(k_jd)          (|logit error| of each key)
        |d lse|  <= eps
        |d o_d|  <= max_{j in J} u(v_jd) + tanh(eps) * (max_J v_jd - min_J v_jd)
    with u the element bound; a query that sees nothing has bound 0 (out 0, lse -inf exactly)."""
    batch, q_len, q_heads, d = q.shape
    tau = 1.0 / math.sqrt(d) if scale is None else float(scale)
    out_b = torch.zeros(q.shape, dtype=torch.float64)
    lse_b = torch.zeros(q.shape[:-1], dtype=torch.float64)
    for b in range(batch):
        k, v = ks[b].double(), vs[b].double()
        n, kv_heads = k.shape[0], k.shape[1]
        group = q_heads // kv_heads
        uk, uv = element_bound(k, fmt), element_bound(v, fmt)        # (n, kv_heads, d)
        for i in range(q_len):
            pos = n - q_len + i
            lo = 0 if window is None else max(0, pos - window)
            if pos < 0 or lo > pos:
                continue
            for h in range(q_heads):
                g = h // group
                qa = q[b, i, h].double().abs()
                eps = tau * float((uk[lo:pos + 1, g] * qa).sum(-1).max())
                vj = v[lo:pos + 1, g]
                out_b[b, i, h] = uv[lo:pos + 1, g].amax(0) + math.tanh(eps) * (vj.amax(0) - vj.amin(0))
                lse_b[b, i, h] = eps
    return out_b, lse_b
