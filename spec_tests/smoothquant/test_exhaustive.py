"""Bounded-exhaustive checks of SmoothQuant's INT8 where the domain is small enough to enumerate.

* Every rounding midpoint and every code: with absmax = 127 * 2**e the scale is exactly 2**e, so
  ``t / scale`` is exact and each of the 509 values k/2 (|k| <= 254) must give round_half_even(k/2):
  in fp16, bf16, fp32 and fp64, e in [-6, 6], activations per token and per tensor, weights per
  channel and per tensor (bit-exact codes and scales).
* The scale boundary: the absmax element must map to exactly +-127 (never 126 from a scale rounded
  up, never 128 wrapped): every finite positive fp16 value; every bf16 value from 2**-119 up (below
  it absmax / 127 is a float32 subnormal, whose few bits cannot promise the 127: the contract
  starts there); float32 every 64th mantissa of a binade (the ratio depends on the mantissa only
  while the scale is normal), every mantissa in the slow case.
* Every int8 x int8 product (65,536 pairs) through int8_matmul with in = 1.
"""
from __future__ import annotations

import pytest
import torch

DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
K = torch.arange(-254, 255)
HALF_EVEN = torch.tensor([round(k / 2) for k in K.tolist()], dtype=torch.int8)  # Python rounds half to even


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
def test_every_midpoint_rounds_half_even(impl, dtype):
    """Each k/2 * 2**e (|k| <= 254) quantises to round_half_even(k/2) with scale exactly 2**e.
    Mutants: round_half_away, round_half_up."""
    qa, qw = impl.get("quantize_activations"), impl.get("quantize_weights")
    for e in range(-6, 7):
        row = (K.to(torch.float64) / 2 * 2.0**e).to(dtype)
        calls = (("activations per token", qa, row[None], dict(per_token=True)),
                 ("activations per tensor", qa, row[None], dict(per_token=False)),
                 ("activations, one value per token", qa, torch.stack([row, row.flip(0)], 1), dict(per_token=False)),
                 ("weights per channel", qw, torch.stack([row, -row]), dict(per_channel=True)),
                 ("weights per tensor", qw, row[None], dict(per_channel=False)))
        for what, f, t, kw in calls:
            q, scale = f(t, **kw)
            k = (t.to(torch.float64) * 2 / 2.0**e).to(torch.int64)  # exact: t = k/2 * 2**e
            want = HALF_EVEN[k + 254]
            assert torch.equal(scale.to(torch.float64), torch.full_like(scale, 2.0**e, dtype=torch.float64)), (
                f"{what}, {dtype}: absmax 127 * 2**{e} gives scale {scale.flatten()[:3].tolist()}, expected {2.0**e}")
            bad = (q != want).nonzero()
            assert bad.numel() == 0, (
                f"{what}, {dtype}, scale 2**{e}: value {float(t[tuple(bad[0].tolist())])!r} -> code "
                f"{int(q[tuple(bad[0].tolist())])}, expected {int(want[tuple(bad[0].tolist())])} (round half to even)")


def _boundary_values(dtype: torch.dtype, slow: bool) -> torch.Tensor:
    if dtype == torch.float16:
        bits = torch.arange(1, 0x7C00, dtype=torch.int32).to(torch.int16)
        return bits.view(torch.float16)
    if dtype == torch.bfloat16:
        bits = torch.arange(0x0400, 0x7F80, dtype=torch.int32).to(torch.int16)  # 2**-119 .. max finite
        return bits.view(torch.bfloat16)
    step = 1 if slow else 64
    bits = torch.arange(0x3F800000, 0x40000000, step, dtype=torch.int32)  # the binade [1, 2)
    return bits.view(torch.float32)


@pytest.mark.parametrize("dtype", DTYPES[:3], ids=lambda d: str(d).removeprefix("torch."))
def test_absmax_maps_to_127(impl, dtype):
    """For every absmax a in the domain (module doc), per-token rows [a, -a, 0] quantise to exactly
    [127, -127, 0]. Mutants: scale_over_128, no_saturation."""
    values = _boundary_values(dtype, slow=False)
    x = torch.stack([values, -values, torch.zeros_like(values)], 1)
    q, _ = impl.get("quantize_activations")(x, per_token=True)
    want = torch.tensor([127, -127, 0], dtype=torch.int8).expand_as(x)
    bad = (q != want).any(dim=1).nonzero().flatten()
    assert bad.numel() == 0, (f"{dtype}: {bad.numel()} absmax values do not map to +-127, e.g. "
                              f"{float(values[bad[0]])!r} -> {q[bad[0]].tolist()}")


@pytest.mark.slow
def test_absmax_maps_to_127_every_float32_mantissa(impl):
    """Every float32 mantissa of the binade [1, 2) (2**23 rows): the absmax maps to +-127."""
    values = _boundary_values(torch.float32, True)
    q, _ = impl.get("quantize_weights")(torch.stack([values, -values], 1), per_channel=True)
    assert bool((q[:, 0] == 127).all()) and bool((q[:, 1] == -127).all())


def test_every_int8_product(impl):
    """All 256 x 256 code pairs: int8_matmul of the column vectors (in = 1) is their outer product."""
    codes = torch.arange(-128, 128, dtype=torch.int8)[:, None]
    got = impl.get("int8_matmul")(codes, codes)
    want = torch.arange(-128, 128)[:, None] * torch.arange(-128, 128)[None, :]
    assert got.dtype == torch.int32 and torch.equal(got.to(torch.int64), want), "int8_matmul of every code pair"
