"""KV-cache quantisation (bench/cases/kv_quant.py): the GPU case's arithmetic and its correctness check,
on the CPU (the kernels under the Triton interpreter). The timing itself is the lead's H200 run:

    python -m bench run --concept kv_quant --out $OUT/kv_quant_h200.json
"""
from __future__ import annotations

from bench.cases import kv_quant as case_module


def test_bytes_each_provider_reads():
    """bf16 reads 2 bytes per element; FP8/INT8 one byte plus a 4-byte scale per token-head: at
    D 128, 132 / 256 of bf16's bytes (the speed-up cannot beat 1.94x)."""
    for n in case_module.CONTEXTS:
        bf16 = case_module.bytes_read(64, n, fmt="bf16")
        assert bf16 == 2 * 64 * n * 8 * 128 * 2
        for fmt in ("fp8", "int8"):
            assert case_module.bytes_read(64, n, fmt=fmt) * 256 == bf16 * 132


def test_smoke_case_check_passes():
    """The check the GPU run does before timing, on the tiny CPU case: both formats within the
    tolerance rule of the dequantised oracle and within the derived bound of the unquantised one."""
    case = next(c for c in case_module.CASES if "smoke" in c.tags)
    prob = case_module.setup(case, "cpu")
    out = case_module.check(prob, case, "cpu")
    assert out["ok"], out
    for fmt in ("fp8", "int8"):
        assert 0 < out[fmt]["err_over_bound"] <= 1, out[fmt]
