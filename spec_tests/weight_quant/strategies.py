"""Weight-quantisation problems as plain data (each repr is valid Python, so a falsifying example
can be pasted back).

* :class:`QuantCase` -- a weight (out_features, in_features) and a format (bits, group size,
  symmetric). ``kind`` shapes the weights: ``normal``; ``outliers`` (a few entries x 50, the
  absmax of their groups); ``positive`` (every weight > 0: the asymmetric range must still hold 0);
  ``zero_groups`` (some groups all 0); ``tiny`` (|w| ~ 1e-30, scales far below 1).
* :class:`MatmulCase` -- x (m, k) and a random 4-bit weight given directly as packed bytes, scales
  and zeros (not from ``quantize``: every byte value, every zero point 0-15), so the kernel is
  checked for what the math says about ANY codes.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from conformance.strategies import DTYPES, generator, seeds

KINDS = ("normal", "outliers", "positive", "zero_groups", "tiny")


@dataclass(frozen=True)
class QuantCase:
    out_features: int
    in_features: int
    group_size: int | None
    bits: int
    symmetric: bool
    dtype: str
    seed: int
    kind: str = "normal"

    @property
    def group(self) -> int:
        return self.in_features if self.group_size is None else self.group_size

    @property
    def kwargs(self) -> dict:
        return dict(bits=self.bits, group_size=self.group_size, symmetric=self.symmetric)

    def weight(self, device="cpu") -> torch.Tensor:
        g = generator(self.seed)
        w = torch.randn((self.out_features, self.in_features), generator=g, dtype=torch.float64)
        if self.kind == "outliers":
            hit = torch.rand(w.shape, generator=g) < 0.03
            w = torch.where(hit, w * 50, w)
        elif self.kind == "positive":
            w = w.abs() + 0.5
        elif self.kind == "zero_groups":
            groups = w.reshape(self.out_features, self.in_features // self.group, self.group)
            dead = torch.rand(groups.shape[:2], generator=g) < 0.4
            w = torch.where(dead[..., None], torch.zeros_like(groups), groups).reshape(w.shape)
        elif self.kind == "tiny":
            w = w * 1e-30
        return w.to(device=device, dtype=DTYPES[self.dtype])


@st.composite
def quant_cases(draw, *, max_out: int = 6, groups=(1, 2, 3), group_sizes=(2, 4, 16, 32, 64, 128),
                dtypes=("float32", "bfloat16", "float16", "float64"), kinds=KINDS):
    group = draw(st.sampled_from(group_sizes))
    n_groups = draw(st.sampled_from(groups))
    per_channel = draw(st.booleans()) and n_groups == 1
    kind = draw(st.sampled_from(kinds))
    dtype = draw(st.sampled_from(dtypes))
    if kind == "tiny" and dtype in ("float16", "bfloat16"):
        dtype = "float32"                               # 1e-30 is 0 in float16
    return QuantCase(draw(st.integers(0, max_out)), group * n_groups, None if per_channel else group,
                     draw(st.sampled_from((4, 8))), draw(st.booleans()), dtype, draw(seeds), kind)


@dataclass(frozen=True)
class MatmulCase:
    """x (m, k) in ``dtype``; a weight of n rows, k columns, groups of ``group``, as packed bytes."""
    m: int
    n: int
    k: int
    group: int
    dtype: str
    seed: int
    scales_dtype: str = "float32"
    batch: tuple[int, ...] = ()          # leading dimensions of x: x is (*batch, m, k)

    def build(self, device="cpu"):
        g = generator(self.seed)
        x = torch.randn((*self.batch, self.m, self.k), generator=g)
        packed = torch.randint(0, 256, (self.n, self.k // 2), generator=g, dtype=torch.int32).to(torch.uint8)
        groups = self.k // self.group
        scales = torch.rand((self.n, groups), generator=g) * 0.2 + 0.01
        zeros = torch.randint(0, 16, (self.n, groups), generator=g, dtype=torch.int32).to(torch.uint8)
        return (x.to(device=device, dtype=DTYPES[self.dtype]), packed.to(device),
                scales.to(device=device, dtype=DTYPES[self.scales_dtype]), zeros.to(device))


@st.composite
def matmul_cases(draw, *, ms=(1, 2, 3, 4, 5, 8, 16, 17), max_n: int = 40, ks=(32, 64, 96, 128, 256),
                 groups=(32, 64, 128, None), dtypes=("bfloat16", "float16"),
                 scales_dtypes=("float32", "bfloat16", "float16")):
    k = draw(st.sampled_from(ks))
    group = draw(st.sampled_from([g for g in groups if g is None or k % g == 0]))
    return MatmulCase(draw(st.sampled_from(ms)), draw(st.integers(1, max_n)), k, k if group is None else group,
                      draw(st.sampled_from(dtypes)), draw(seeds), draw(st.sampled_from(scales_dtypes)))
