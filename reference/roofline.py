"""The roofline: arithmetic intensity, the ridge point, attainable FLOP/s, and the regime a kernel
is in (course 02.04, 02.05, 02.06, 02.12).

A kernel does ``flops`` floating-point operations and must move ``bytes_moved`` bytes between the
device's memory and its chips. Its *arithmetic intensity* is I = flops / bytes_moved (FLOPs per
byte). A device has two ceilings: its peak compute P (FLOP/s) and its memory bandwidth B (bytes/s).
A kernel of intensity I cannot run faster than

    attainable(I) = min(P, I x B)                                   (FLOP/s)

the memory roof I x B (a line through the origin of slope B on linear axes, of slope 1 on log-log
axes) below the *ridge point* I* = P / B, the flat compute roof P above it. The kernel is
*memory-bound* when I x B < P (the memory roof is the lower one: I < I*), *compute-bound* when
I x B >= P. At the ridge both ceilings meet (I* x B = P exactly); a kernel there is said to be
compute-bound (it reaches the peak). The least time the kernel can take is

    roofline_time = max(flops / P, bytes_moved / B)   =   flops / attainable(I)   (flops > 0)

and the fraction of the roofline a measured kernel reaches is achieved / attainable(I) (for a
memory-bound kernel: its achieved bandwidth over B).

**Numbers.** Every quantity is a real number (an int, a ``fractions.Fraction``, a float; a bool is
not one), taken at its exact value (a float at its binary value). Every result is the exact value
of its formula: a ``Fraction`` when every number given is an int or a Fraction
(``ridge_point(800, 4) == Fraction(200)``), else that exact value rounded once to the nearest
float. The *decisions* (``regime``, ``decode_regime``, ``compute_bound_batch``) are exact too, so
the regime of an intensity just below the ridge is "memory" however a float product would round.

Decode at batch 1 (02.06). One decode step of ``batch`` sequences (one new token each after
``context`` cached tokens) of the reference transformer (``reference.model.ModelConfig``) does
``forward_flops`` FLOPs and moves ``forward_bytes`` bytes, exactly as concept ``flops`` counts
them (reference/flops.py: matmul FLOPs; every weight once, the embedding rows looked up, the KV
cache read and the new K, V written; activations not counted). Its intensity is their exact ratio.
With e-byte elements the intensity of one sequence is below max(2/e, 2 H / (K e)) (the weights
give at most 2 FLOPs per 2-byte element, the cache H / K FLOPs per byte: H query heads share one
of K key/value heads), about 1 for 16-bit weights at a short context and H / K at a long one, far
below any datacenter GPU's ridge (100-1000 FLOPs/byte): decode at batch 1 is memory-bound.

Batching multiplies the FLOPs and the per-sequence bytes by ``batch`` but reads the weights once:
with ``shared`` the bytes every step reads once (the weights but the embedding table) and
``per_seq`` the bytes each sequence adds (its embedding row, its KV cache read and written),
``f`` the FLOPs of one sequence,

    I(batch) = batch x f / (shared + batch x per_seq)

rises with the batch toward f / per_seq. The step turns compute-bound at the smallest batch with
batch x (f x B - P x per_seq) >= P x shared:

    compute_bound_batch = ceil(P x shared / (f x B - P x per_seq))   (>= 1)   if f x B > P x per_seq
                        = None (never)                                      otherwise

"never" is the long-context case: each sequence's KV cache is bytes no other sequence shares, so
past a context length no batch size reaches the ridge (Llama-3-8B in bf16 on a ridge of ~190
FLOPs/byte: past a few hundred tokens).

The real shapes the spec checks this on (Llama-3-8B, Llama-3-70B, Qwen2.5-7B, Qwen2.5-72B, from
each checkpoint's config.json) are stated in spec_tests/roofline/configs.py.

Bad input: a number that is not a real (a bool, a str, None) -> TypeError naming it; NaN or an
infinity, a negative one, a zero ``peak_flops`` or ``bandwidth``, a zero ``bytes_moved`` in
``flops_per_byte`` (0 is legal in ``roofline_time``) or a zero ``intensity`` in
``roofline_fraction`` (whose attainable FLOP/s would be 0) -> ValueError naming it. ``config`` not a ModelConfig -> TypeError naming ``config``; ``batch`` not an int >= 1,
``context`` not an int >= 0 -> TypeError / ValueError naming it; ``context + 1`` past the
model's ``max_seq_len`` -> ValueError naming ``context``.

Choices the law leaves open: none; the regime at the ridge ("compute") is part of the definition.
"""
from __future__ import annotations

import math
from fractions import Fraction
from numbers import Rational, Real

from reference.flops import forward_bytes, forward_flops
from reference.model import ModelConfig

__all__ = ["flops_per_byte", "ridge_point", "attainable_flops", "regime", "roofline_time",
           "roofline_fraction", "decode_regime", "compute_bound_batch"]  # the contract
__optional__: list[str] = []

def _number(name: str, value, *, positive: bool = False) -> Fraction:
    """``value``'s exact value (a float's binary value), finite and >= 0 (> 0 with ``positive``);
    TypeError / ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number (int, Fraction or float), got {value!r}")
    if not isinstance(value, Rational) and not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    exact = Fraction(value)
    if exact < 0 or (positive and exact == 0):
        raise ValueError(f"{name} must be {'> 0' if positive else '>= 0'}, got {value}")
    return exact


def _result(value: Fraction, *given):
    """The exact ``value`` when every number given is an int or a Fraction, else the float nearest it."""
    return value if all(isinstance(g, Rational) for g in given) else float(value)


def _device(peak_flops, bandwidth) -> tuple[Fraction, Fraction]:
    return _number("peak_flops", peak_flops, positive=True), _number("bandwidth", bandwidth, positive=True)


def flops_per_byte(flops, bytes_moved):
    """Arithmetic intensity ``flops / bytes_moved`` (FLOPs per byte). ``flops`` >= 0 (0 is
    legal), ``bytes_moved`` > 0."""
    f = _number("flops", flops)
    m = _number("bytes_moved", bytes_moved, positive=True)
    return _result(f / m, flops, bytes_moved)


def ridge_point(peak_flops, bandwidth):
    """The intensity where the two ceilings meet, ``peak_flops / bandwidth`` (FLOPs per byte):
    below it a kernel is memory-bound, at and above it compute-bound."""
    p, b = _device(peak_flops, bandwidth)
    return _result(p / b, peak_flops, bandwidth)


def attainable_flops(intensity, peak_flops, bandwidth):
    """The roofline at ``intensity``: ``min(peak_flops, intensity * bandwidth)`` (FLOP/s).
    ``intensity`` >= 0 (0 gives 0)."""
    i = _number("intensity", intensity)
    p, b = _device(peak_flops, bandwidth)
    return _result(min(p, i * b), intensity, peak_flops, bandwidth)


def regime(intensity, peak_flops, bandwidth) -> str:
    """``"memory"`` when ``intensity * bandwidth < peak_flops`` (the memory roof is the lower
    one), else ``"compute"`` -- at the ridge too. Decided exactly (a float is its binary value)."""
    i = _number("intensity", intensity)
    p, b = _device(peak_flops, bandwidth)
    return "memory" if i * b < p else "compute"


def roofline_time(flops, bytes_moved, peak_flops, bandwidth):
    """The least time (seconds) a kernel of ``flops`` FLOPs moving ``bytes_moved`` bytes can take:
    ``max(flops / peak_flops, bytes_moved / bandwidth)``. ``flops`` >= 0, ``bytes_moved`` >= 0
    (a kernel that moves nothing is bound by its FLOPs alone)."""
    f = _number("flops", flops)
    m = _number("bytes_moved", bytes_moved)
    p, b = _device(peak_flops, bandwidth)
    return _result(max(f / p, m / b), flops, bytes_moved, peak_flops, bandwidth)


def roofline_fraction(achieved_flops, intensity, peak_flops, bandwidth):
    """The fraction of the roofline a measured kernel reaches: ``achieved_flops /
    attainable_flops(intensity, peak_flops, bandwidth)`` (1 on the roof; above 1 means the
    ceilings were underestimated or the FLOPs / bytes miscounted). ``achieved_flops`` >= 0,
    ``intensity`` > 0."""
    a = _number("achieved_flops", achieved_flops)
    i = _number("intensity", intensity, positive=True)
    p, b = _device(peak_flops, bandwidth)
    return _result(a / min(p, i * b), achieved_flops, intensity, peak_flops, bandwidth)


def decode_regime(config: ModelConfig, *, batch: int, context: int, peak_flops, bandwidth) -> str:
    """The regime of one decode step: ``batch`` sequences, one new token each after ``context``
    cached tokens, its intensity ``forward_flops / forward_bytes`` (concept ``flops``'s counts,
    an exact ratio) on a device of ``peak_flops`` and ``bandwidth`` (decided exactly)."""
    step = dict(batch=batch, new_tokens=1, context=context)
    flops, moved = forward_flops(config, **step), forward_bytes(config, **step)
    return regime(Fraction(flops, moved), peak_flops, bandwidth)


def compute_bound_batch(config: ModelConfig, *, context: int, peak_flops, bandwidth) -> int | None:
    """The smallest batch at which a decode step after ``context`` cached tokens per sequence is
    compute-bound (module doc: ``ceil(P shared / (f B - P per_seq))``), or None when no batch is
    (``f B <= P per_seq``: each sequence's own bytes already outweigh its FLOPs)."""
    step = dict(new_tokens=1, context=context)
    f = forward_flops(config, batch=1, **step)
    one = forward_bytes(config, batch=1, **step)
    per_seq = forward_bytes(config, batch=2, **step) - one   # a sequence's embedding row and KV cache
    shared = one - per_seq                                    # the weights, read once per step
    p, b = _device(peak_flops, bandwidth)
    gain = f * b - p * per_seq
    if gain <= 0:
        return None
    return math.ceil(p * shared / gain)
