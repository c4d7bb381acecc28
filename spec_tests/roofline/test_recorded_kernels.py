"""Naming the bottleneck (course 02.12) of the project's own kernels, from their recorded benchmark
results (docs/results/*.json, read by spec_tests/roofline/plot.py; nothing measured here): placed
on the H200's measured roof, every decode, sampling, norm and small-M matmul kernel is
memory-bound, every FlashAttention call and every large-M matmul compute-bound, and no kernel
sits above the roof (a point above it would mean a miscounted FLOP or byte, or a roof measured
too low)."""
from __future__ import annotations

import functools

import pytest

from spec_tests.roofline import plot

# The recorded H200 kernel families (one test each); test_the_roof_is_read_from_the_files checks
# that the files hold exactly these. Named here, not read at import: the module imports without
# docs/results (``inferspec docs`` imports every spec module for its bad-input tables).
FAMILIES = ("FlashAttention bwd", "FlashAttention fwd", "batch-invariant decode", "batch-invariant matmul",
            "batch-invariant row ops", "paged decode", "sampler (sort-free)", "speculative verify (Triton)")


@functools.cache
def recorded() -> tuple[dict, list, float]:
    """(roof, every recorded point, the H100 run's bf16 bandwidth), read from docs/results once."""
    points, h100_bandwidth = plot.points()
    return plot.ceilings(), points, h100_bandwidth


def expected_regime(p: plot.Point) -> str:
    if p.family.startswith("FlashAttention"):
        return "compute"
    if p.family == "batch-invariant matmul":
        return "compute" if p.flops >= 2 * 1024 * 4096 * 4096 else "memory"
    return "memory"


def test_the_roof_is_read_from_the_files():
    """The roof is the best of the recorded measurements, each one H200 run: peak and copy bandwidth."""
    ROOF, POINTS, _ = recorded()
    H200 = [p for p in POINTS if p.device == "H200"]
    assert {p.family for p in H200} == set(FAMILIES), sorted({p.family for p in H200})
    assert ROOF["peak"] == max(v for v, *_ in ROOF["all_peaks"]) and ROOF["bandwidth"] == max(v for v, _ in ROOF["all_copies"])
    assert 100 < ROOF["peak"] / ROOF["bandwidth"] < 400
    assert len(H200) >= 60 and {p.family for p in POINTS} >= {"FlashAttention fwd", "FlashAttention bwd", "paged decode",
                                                           "batch-invariant matmul", "sampler (sort-free)"}


@pytest.mark.parametrize("family", FAMILIES)
def test_recorded_kernels_regime_and_fraction(impl, family):
    """Each recorded H200 kernel of ``family``: regime as named above; roofline_fraction in (0, 1]
    and equal to achieved over min(P, I B)."""
    regime, frac = impl.get("regime"), impl.get("roofline_fraction")
    ROOF, POINTS, _ = recorded()
    for p in (q for q in POINTS if q.device == "H200" if q.family == family):
        got = regime(p.intensity, ROOF["peak"], ROOF["bandwidth"])
        assert got == expected_regime(p), (f"{family} {p.label} ({p.source}): intensity {p.intensity:.4g} on the "
                                           f"ridge {ROOF['peak'] / ROOF['bandwidth']:.4g}: regime {got!r}")
        f = frac(p.achieved, p.intensity, ROOF["peak"], ROOF["bandwidth"])
        want = p.achieved / min(ROOF["peak"], p.intensity * ROOF["bandwidth"])
        assert 0 < f <= 1 and abs(f - want) <= 1e-12 * want, f"{family} {p.label}: roofline_fraction {f!r}, expected {want!r}"


def test_h100_points_are_memory_bound_against_their_own_run():
    """The kv_quant run (an H100): its quantized kernels read half the bytes of bf16 and reach well
    under the bandwidth its bf16 kernel reached (their intensity doubles, their speed does not)."""
    _, POINTS, H100_BANDWIDTH = recorded()
    h100 = [p for p in POINTS if p.device == "H100"]
    assert h100 and all(p.bytes / p.seconds <= H100_BANDWIDTH * (1 + 1e-12) for p in h100)
    quantized = [p for p in h100 if p.family.startswith("KV decode") and "bf16" not in p.family]
    assert quantized and all(p.bytes / p.seconds < 0.5 * H100_BANDWIDTH for p in quantized)


def test_h100_kernels_sit_where_their_bytes_say():
    """The H100 runs of W4A16, MoE and multi-LoRA under the H100 memory line and the matmul peak;
    W4A16 at M <= 16 and multi-LoRA memory-bound (a few FLOPs per weight byte), MoE at 8,192
    tokens compute-bound (every expert's weights reused by ~2,000 tokens)."""
    ROOF, POINTS, H100_BANDWIDTH = recorded()
    kernels = {p.label: p for p in POINTS if p.family in ("W4A16 matmul (H100)", "fused MoE (H100)", "multi-LoRA (H100)")}
    assert len(kernels) >= 10, sorted(kernels)
    for label, p in kernels.items():
        assert p.achieved <= min(ROOF["peak"], p.intensity * H100_BANDWIDTH) * (1 + 1e-12), (label, p.source)
    for label, p in kernels.items():
        want = ("compute" if label.startswith("T8192") else "memory" if label.startswith(("M1 ", "M16 ", "B"))
                else None)
        if want is not None:
            assert plot.regime(p.intensity, ROOF["peak"], H100_BANDWIDTH) == want, (label, p.intensity)
