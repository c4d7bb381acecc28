"""Sampling (course 01.05): one ``sample`` call on 64 x 32,000 fp32 logits on the 2-core CPU.

The reference sorts the vocabulary (twice: top-k, then top-p on the survivors); the optimized
sampler never does: torch.topk selects the k + 1 largest for top-k (the rest works on those), a
bucket histogram places the top-p threshold. Both draw by inverse CDF in token-id order.
Logits: 4 * randn (LLM-like: top-1 probability ~0.27, top-p 0.9 keeps ~190 tokens).

    python -m pytest bench/tests/test_bench_sampling.py --benchmark-enable -s
    python -m bench run --concept sampling --device cpu      # the table in docs/sampling.md
"""
from __future__ import annotations

import pytest
import torch

from bench.cases.sampling import CONFIGS, CPU_CONFIGS, make_logits
from bench.floors import FLOORS
from bench.timing import compare
from optimized import sampling as fast
from reference import sampling as ref
from spec_tests.sampling.oracles import sampling_oracle
from spec_tests.sampling.strategies import SamplingCase

X = make_logits(64, 32000, "peaked", "cpu")
KEYS = {"T0.7 top-k 50 top-p 0.9": "sampling.cpu_64x32000_topk50_topp09",
        "top-p 0.9": "sampling.cpu_64x32000_topp09"}


def clear_rows_agree(config: str) -> None:
    """Optimized and reference supports equal the float64 oracle's kept set on every row whose
    decisions are clear of float32 rounding (spec_tests/sampling/oracles.py). A row with a top-p
    mass within rounding of p is left out: there the two samplers' float32 sums (a sort + cumsum
    vs a bucket histogram, ATen kernels whose bits change with the CPU's vector width) may round
    to opposite sides of p -- row 39 of top-p 0.9 did on AVX2 CPUs (docs/suite-power.md,
    "Bit-equality audit")."""
    cfg = CONFIGS[config]
    case = SamplingCase(X.shape[0], X.shape[1], "float32", 0, kind="explicit",
                        values=tuple(X.double().flatten().tolist()),
                        **{name: (value,) * X.shape[0] for name, value in cfg.items()})
    oracle = sampling_oracle(case)
    clear = ~torch.tensor(oracle.ambiguous_rows, dtype=torch.bool)
    assert int(clear.sum()) >= 48, f"only {int(clear.sum())} of 64 rows clear of rounding: pick other logits"
    params = ref.SamplingParams(**cfg)
    for name, module in (("optimized", fast), ("reference", ref)):
        support = module.sampling_probs(X, params) > 0
        bad = (support[clear] != oracle.keep[clear]).any(1)
        assert not bad.any(), f"{name}: support differs from the oracle's on clear rows {clear.nonzero()[bad].flatten().tolist()}"


def run(module, config: str) -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    return module.sample(X, ref.SamplingParams(**CONFIGS[config]), gen)


@pytest.mark.parametrize("config", CPU_CONFIGS)
def test_bench_sampling_optimized(benchmark, config):
    benchmark(run, fast, config)


@pytest.mark.parametrize("config", CPU_CONFIGS)
def test_bench_sampling_reference(benchmark, config):
    benchmark.pedantic(run, args=(ref, config), rounds=3, iterations=1)


@pytest.mark.parametrize("config", CPU_CONFIGS)
def test_speedup_over_reference(config):
    """Reference and optimized timed alternately in one run, best of 3 each; same support (the
    oracle's, on the rows clear of rounding: clear_rows_agree)."""
    clear_rows_agree(config)
    t = compare({"ref": lambda: run(ref, config), "fast": lambda: run(fast, config)}, rounds=3, repeats=1,
                budget_ms=None, min_warmup=0, warmup_ms=0)
    best = {name: t[name].min_ms / 1e3 for name in t}
    ratio = best["ref"] / best["fast"]
    print(f"\nsampling {config}, 64 x 32000: reference {best['ref'] * 1e3:.1f} ms, "
          f"optimized {best['fast'] * 1e3:.1f} ms, speedup {ratio:.1f}x")
    assert ratio >= FLOORS[KEYS[config]], best
