"""Every call on a grid of small exact values (bounded-exhaustive): intensities 0, 1/2, ..., 6, peaks
and bandwidths 1 to 6, FLOPs and bytes 0 to 4 -- 13 x 6 x 6 = 468 devices-and-intensities, 5 x 5
x 6 x 6 = 900 kernels -- each function's result compared exactly with the oracle (every ridge
ratio p/b of the grid is hit exactly by some intensity, so the boundary is on the grid); and every
tiny decoder shape of the grid below, at contexts 0 and 2, on ridges 1/2, 2 and 8, its compute-bound
batch checked on the exact counts (compute-bound there, memory-bound one below, or None exactly
when the limit does not exceed the ridge)."""
from __future__ import annotations

import itertools
from fractions import Fraction

import torch

from reference.model import ModelConfig
from spec_tests.roofline import oracles

INTENSITIES = [Fraction(k, 2) for k in range(13)]
DEVICE = range(1, 7)


def test_the_closed_forms_on_a_grid(impl):
    """flops_per_byte, ridge_point, attainable_flops, regime, roofline_fraction, roofline_time on
    every point of the grid, exactly."""
    fpb, ridge, at = impl.get("flops_per_byte"), impl.get("ridge_point"), impl.get("attainable_flops")
    reg, frac, time = impl.get("regime"), impl.get("roofline_fraction"), impl.get("roofline_time")
    for p, b in itertools.product(DEVICE, DEVICE):
        assert ridge(p, b) == Fraction(p, b), f"ridge_point({p}, {b}) = {ridge(p, b)!r}"
        for i in INTENSITIES:
            want = oracles.attainable(i, p, b)
            assert at(i, p, b) == want, f"attainable_flops({i}, {p}, {b}) = {at(i, p, b)!r}, expected {want}"
            assert reg(i, p, b) == oracles.regime(i, p, b), f"regime({i}, {p}, {b}) = {reg(i, p, b)!r}"
            if i:
                assert frac(1, i, p, b) == 1 / want, f"roofline_fraction(1, {i}, {p}, {b}) = {frac(1, i, p, b)!r}"
        for f, m in itertools.product(range(5), range(5)):
            want = max(Fraction(f, p), Fraction(m, b))
            assert time(f, m, p, b) == want, f"roofline_time({f}, {m}, {p}, {b}) = {time(f, m, p, b)!r}, expected {want}"
            if m:
                assert fpb(f, m) == Fraction(f, m), f"flops_per_byte({f}, {m}) = {fpb(f, m)!r}"


def tiny_shapes():
    for layers, kv, group, head_dim, dim, hidden, vocab in itertools.product((1, 2), (1, 2), (1, 2), (2, 4), (2, 5),
                                                                             (1, 3), (1, 4)):
        yield ModelConfig(vocab_size=vocab, dim=dim, n_layers=layers, n_heads=kv * group, n_kv_heads=kv,
                          head_dim=head_dim, hidden_dim=hidden, max_seq_len=3, dtype=torch.float32)


def test_compute_bound_batch_on_tiny_shapes(impl):
    """128 tiny fp32 shapes x contexts 0 and 2 x ridges 1/2, 2, 8: compute_bound_batch is None
    exactly when the intensity's limit f / per_seq does not exceed the ridge, else a batch whose
    step is compute-bound while the batch below's is memory-bound (the counts, exactly)."""
    cbb = impl.get("compute_bound_batch")
    for c in tiny_shapes():
        for context, ridge in itertools.product((0, 2), (Fraction(1, 2), 2, 8)):
            got = cbb(c, context=context, peak_flops=ridge, bandwidth=1)
            call = f"compute_bound_batch({c}, context={context}, peak_flops={ridge}, bandwidth=1) = {got!r}"
            if oracles.per_sequence_limit(c, context) <= ridge:
                assert got is None, f"{call}; the intensity's limit {oracles.per_sequence_limit(c, context)} <= the ridge"
                continue
            assert isinstance(got, int) and got >= 1, f"{call}: expected a batch"
            assert oracles.decode_regime(c, got, context, ridge, 1) == "compute", f"{call}: memory-bound there"
            assert got == 1 or oracles.decode_regime(c, got - 1, context, ridge, 1) == "memory", f"{call}: {got - 1} is compute-bound"
