"""Naming the bottleneck (course 02.12) of the project's own kernels, from their recorded benchmark
results (docs/results/*.json, read by spec_tests/roofline/plot.py; nothing measured here): placed
on the H200's measured roof, every decode (bf16 or quantised KV), sampling, norm, multi-LoRA and
small-M matmul (batch-invariant or W4A16) kernel is memory-bound, every FlashAttention call, every
large-M matmul and the fused MoE at 1,024 tokens and more compute-bound, and no kernel sits above
the roof (a point above it would mean a miscounted FLOP or byte, or a roof measured
too low)."""
from __future__ import annotations

import functools

import pytest

from spec_tests.roofline import plot

# The recorded H200 kernel families (one test each); test_the_roof_is_read_from_the_files checks
# that the files hold exactly these. Named here, not read at import: the module imports without
# docs/results (``inferspec docs`` imports every spec module for its bad-input tables).
FAMILIES = ("FlashAttention bwd", "FlashAttention fwd", "KV decode bf16", "KV decode fp8", "KV decode int8",
            "W4A16 matmul", "batch-invariant decode", "batch-invariant matmul", "batch-invariant row ops",
            "fused MoE", "multi-LoRA", "paged decode", "sampler (sort-free)", "speculative verify (Triton)")


@functools.cache
def recorded() -> tuple[dict, list]:
    """(roof, every recorded point), read from docs/results once."""
    return plot.ceilings(), plot.points()


def expected_regime(p: plot.Point) -> str | None:
    if p.family.startswith("FlashAttention") or p.family == "fused MoE":   # MoE: 2,048+ picks reuse each expert
        return "compute"
    if p.family == "batch-invariant matmul":
        return "compute" if p.flops >= 2 * 1024 * 4096 * 4096 else "memory"
    if p.family == "W4A16 matmul":
        return "compute" if p.label.startswith(("M256 ", "M1024 ", "M4096 ")) else "memory"
    if p.family == "multi-LoRA" and not p.label.startswith(("B1 ", "B64 ")):
        return None   # batch 256: the base matmul's intensity is on the ridge (~190 FLOPs/byte), either regime
    return "memory"


def test_the_roof_is_read_from_the_files():
    """The roof is the best of the recorded measurements, each one H200 run: peak and copy bandwidth."""
    ROOF, POINTS = recorded()
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
    ROOF, POINTS = recorded()
    for p in (q for q in POINTS if q.device == "H200" if q.family == family):
        got = regime(p.intensity, ROOF["peak"], ROOF["bandwidth"])
        assert expected_regime(p) in (None, got), (f"{family} {p.label} ({p.source}): intensity {p.intensity:.4g} on the "
                                           f"ridge {ROOF['peak'] / ROOF['bandwidth']:.4g}: regime {got!r}")
        f = frac(p.achieved, p.intensity, ROOF["peak"], ROOF["bandwidth"])
        want = p.achieved / min(ROOF["peak"], p.intensity * ROOF["bandwidth"])
        assert 0 < f <= 1 and abs(f - want) <= 1e-12 * want, f"{family} {p.label}: roofline_fraction {f!r}, expected {want!r}"


def test_quantised_kv_decode_reads_fewer_bytes_than_bf16():
    """The kv_quant run's fp8 and int8 decode at each context: fewer bytes than bf16's at the same
    FLOPs (higher intensity), each under the roof (the regime test above)."""
    _, POINTS = recorded()
    kv = {(p.family, p.label.split()[1]): p for p in POINTS if p.family.startswith("KV decode")}
    contexts = {ctx for _, ctx in kv}
    assert contexts
    for ctx in contexts:
        bf16 = kv[("KV decode bf16", ctx)]
        for fmt in ("fp8", "int8"):
            q = kv[(f"KV decode {fmt}", ctx)]
            assert q.flops == bf16.flops and q.bytes < 0.6 * bf16.bytes, (fmt, ctx, q.bytes, bf16.bytes)
