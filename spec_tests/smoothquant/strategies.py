"""Strategies and the outlier model of the SmoothQuant spec. Cases are frozen dataclasses whose repr
is valid Python (``from spec_tests.smoothquant.strategies import LinearCase, OutlierCase``), so every
failure replays; tensors are made from their seeds.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from conformance.strategies import DTYPES, dtype_names, generator, seeds


@dataclass(frozen=True)
class LinearCase:
    """Activations ``x`` (tokens, in) and a weight (out, in), N(0, 1) from ``seed`` times ``scale``,
    with ``outliers`` channels of ``x`` multiplied by 10..100 and input channel 0 zeroed: of the
    weight (``zero_column`` 1), of both (2), of ``x`` only (3)."""

    tokens: int
    in_features: int
    out_features: int
    seed: int
    dtype: str = "float64"
    outliers: int = 0
    scale: float = 1.0
    zero_column: int = 0

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        g = generator(self.seed)
        x = torch.randn(self.tokens, self.in_features, generator=g, dtype=torch.float64) * self.scale
        w = torch.randn(self.out_features, self.in_features, generator=g, dtype=torch.float64) * self.scale
        if self.outliers:
            idx = torch.randperm(self.in_features, generator=g)[:self.outliers]
            x[:, idx] *= 10 + 90 * torch.rand(len(idx), generator=g, dtype=torch.float64)
        if self.zero_column in (1, 2):
            w[:, 0] = 0
        if self.zero_column in (2, 3):
            x[:, 0] = 0
        dtype = DTYPES[self.dtype]
        return x.to(dtype), w.to(dtype)


@st.composite
def linear_cases(draw, *, dtypes=("float64", "float32"), max_tokens: int = 12, max_in: int = 40,
                 max_out: int = 12, min_tokens: int = 1):
    """Small layers, non-square (tokens, in, out drawn apart), with outliers and zero columns
    sometimes, magnitudes from 1e-3 to 1e3."""
    dtype = draw(dtype_names(*dtypes))
    scales = [1.0, 1e-3, 0.37] if dtype == "float16" else [1.0, 1e-3, 1e3, 0.37]  # fp16 overflows at 65504
    return LinearCase(
        tokens=draw(st.integers(min_tokens, max_tokens)), in_features=draw(st.integers(1, max_in)),
        out_features=draw(st.integers(1, max_out)), seed=draw(seeds), dtype=dtype,
        outliers=draw(st.sampled_from([0, 0, 1, 3])), scale=draw(st.sampled_from(scales)),
        zero_column=draw(st.sampled_from([0, 0, 0, 1, 2, 3])))


# ---- the outlier model of the "smoothing helps" property and of the alpha plot -----------------
@dataclass(frozen=True)
class OutlierCase:
    """The stated outlier model: ``x`` (tokens, in) and ``w`` (out, in) i.i.d. N(0, 1) in float64;
    ``outliers`` input channels of ``x``, chosen by the seed, multiplied by factors drawn
    uniformly from [10, 100] (the 10-100x range the course and the paper describe). The weight
    has no outliers. Calibration is on ``x`` itself."""

    seed: int
    tokens: int = 32
    in_features: int = 64
    out_features: int = 32
    outliers: int = 4

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        g = generator(self.seed)
        x = torch.randn(self.tokens, self.in_features, generator=g, dtype=torch.float64)
        w = torch.randn(self.out_features, self.in_features, generator=g, dtype=torch.float64)
        idx = torch.randperm(self.in_features, generator=g)[:self.outliers]
        x[:, idx] *= 10 + 90 * torch.rand(self.outliers, generator=g, dtype=torch.float64)
        return x, w


outlier_cases = st.builds(OutlierCase, seed=seeds)
