"""Hypothesis strategies for `roofline`: numbers (exact and float), devices, model shapes.

Realistic ranges (the claim "decode at batch 1 is memory-bound" is about these, docs/roofline.md):

* a device's ridge point P / B in [100, 1000] FLOPs per byte -- dense 16-bit tensor-core peak over
  HBM bandwidth of datacenter GPUs from the A100 (about 150) through the H100/H200, MI300X and B200
  (200-300) to inference cards with little bandwidth (about 400); bandwidth 1 to 8 TB/s;
* a decoder: 8 to 128 layers, head_dim 64/128/256, 1 to 16 KV heads and 1 to 64 query heads per
  KV head (MQA, GQA, MHA; at most 128 query heads), dim = query heads x head_dim (or any multiple
  of 128 from 1,024 to 16,384 with head_dim explicit), SwiGLU width 2 to 6 x dim, a vocabulary of
  32,000 to 262,144, 16- or 32-bit weights, a context from 0 to max_seq_len - 1 (up to 131,072).
"""
from __future__ import annotations

from fractions import Fraction

import torch
from hypothesis import strategies as st

from reference.model import ModelConfig

# exact numbers: ints and Fractions (small denominators), >= 0
exact_numbers = st.one_of(st.integers(0, 10**6),
                          st.fractions(min_value=0, max_value=10**6, max_denominator=10**4))
exact_positive = exact_numbers.filter(lambda x: x > 0)
# floats over the magnitudes a roofline sees (FLOPs, bytes, FLOP/s, bytes/s, FLOPs per byte)
float_numbers = st.one_of(st.just(0.0), st.floats(min_value=1e-6, max_value=1e18, allow_nan=False,
                                                  allow_infinity=False))
float_positive = st.floats(min_value=1e-6, max_value=1e18)
numbers = st.one_of(exact_numbers, float_numbers)
positive = st.one_of(exact_positive, float_positive)


@st.composite
def realistic_device(draw, exact: bool = False):
    """(peak_flops, bandwidth) with a ridge in [100, 1000] FLOPs/byte, bandwidth 1 to 8 TB/s."""
    if exact:
        bandwidth = Fraction(draw(st.integers(1000, 8000)), 1000) * 10**12
        ridge = Fraction(draw(st.integers(1000, 10000)), 10)
    else:
        bandwidth = draw(st.floats(1e12, 8e12))
        ridge = draw(st.floats(100.0, 1000.0))
    return ridge * bandwidth, bandwidth


@st.composite
def realistic_configs(draw) -> ModelConfig:
    kv = draw(st.sampled_from([1, 2, 4, 8, 16]))
    group = draw(st.sampled_from([g for g in (1, 2, 4, 5, 7, 8, 16, 32, 48, 64) if kv * g <= 128]))
    heads = kv * group
    head_dim = draw(st.sampled_from([64, 128, 256]))
    if draw(st.booleans()):
        dim, explicit = heads * head_dim, None
    else:
        dim, explicit = 128 * draw(st.integers(8, 128)), head_dim
    hidden = 128 * max(1, round(dim * draw(st.floats(2.0, 6.0)) / 128))
    max_seq_len = draw(st.sampled_from([2048, 4096, 8192, 32768, 131072]))
    return ModelConfig(vocab_size=draw(st.integers(32000, 262144)), dim=dim, n_layers=draw(st.integers(8, 128)),
                       n_heads=heads, n_kv_heads=kv, head_dim=explicit, hidden_dim=hidden,
                       max_seq_len=max_seq_len,
                       dtype=draw(st.sampled_from([torch.bfloat16, torch.float16, torch.float32])))


@st.composite
def tiny_configs(draw) -> ModelConfig:
    """Small shapes (batches in the tens reach the ridge of a small device)."""
    kv = draw(st.integers(1, 2))
    heads = kv * draw(st.integers(1, 3))
    head_dim = draw(st.sampled_from([2, 4]))
    return ModelConfig(vocab_size=draw(st.integers(1, 9)), dim=draw(st.integers(1, 12)), n_layers=draw(st.integers(1, 2)),
                       n_heads=heads, n_kv_heads=kv, head_dim=head_dim, hidden_dim=draw(st.integers(1, 16)),
                       max_seq_len=draw(st.integers(1, 8)),
                       dtype=draw(st.sampled_from([torch.float32, torch.bfloat16])))
