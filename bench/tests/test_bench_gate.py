"""The regression gate on a CUDA GPU (bench/gate.py): our kernels' speed relative to
the best peer timed in the same run must stay >= gate.FACTOR x the ratio recorded in
docs/results/<kernel>_h200.json, per shape. Skipped on the CPU (marker ``gpu``): the recorded
ratios are H200 numbers. The gate's own logic is tested on the CPU in test_bench_gate_logic.py;
bench/gate_proof.py shows on the GPU that a planted slowdown fails it.

    python -m pytest bench/tests/test_bench_gate.py -s
"""
from __future__ import annotations

import pytest

from bench import gate

pytestmark = pytest.mark.gpu


def _gpu_is_the_recorded_one():
    import torch
    name = torch.cuda.get_device_name()
    if "H200" not in name:
        pytest.skip(f"the recorded ratios are H200 numbers; this GPU is {name} (record its own with the "
                    "benchmark runner, or use pytest-benchmark's --benchmark-compare-fail, docs/performance.md)")


@pytest.mark.parametrize("shape", gate.ATTENTION_GATE_SHAPES, ids=lambda s: "-".join(map(str, s)))
def test_attention_gate(shape):
    _gpu_is_the_recorded_one()
    m = gate.measure_attention(*shape)
    rep = gate.check({m.shape: m}, gate.recorded_attention())
    print(rep.explain())
    assert rep.ok, rep.explain()


@pytest.mark.parametrize("dist", ["peaked", "flat"])
@pytest.mark.parametrize("config", ["T0.7 top-k 50 top-p 0.9", "top-p 0.9"])
def test_sampling_gate(dist, config):
    _gpu_is_the_recorded_one()
    pytest.importorskip("transformers")
    m = gate.measure_sampling(dist, config)
    rep = gate.check({m.shape: m}, gate.recorded_sampling())
    print(rep.explain())
    assert rep.ok, rep.explain()


def _public_params():
    return [(k, c.name) for k in gate.PUBLIC_GATES for c in gate.public_cases(k)]


@pytest.mark.parametrize("kernel,case_name", _public_params(), ids=lambda x: str(x).replace(" ", "_"))
def test_public_path_gate(kernel, case_name):
    """Issue 27's public plan/run paths, held to THIS machine's baseline (no cross-session record
    exists for them): ``python -m bench.gate_proof --kernel <kernel>`` records one, then
    ``INFERSPEC_GATE_BASELINE=$OUT/gate_baseline_<kernel>.json pytest bench/tests/test_bench_gate.py``."""
    try:
        rec = gate.recorded_public(kernel)
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    if not rec:
        pytest.skip(f"the baseline at INFERSPEC_GATE_BASELINE has no {kernel} rows")
    m = gate.measure_public(kernel, case_name)
    rep = gate.check({m.shape: m}, rec)
    print(rep.explain())
    assert rep.ok, rep.explain()
