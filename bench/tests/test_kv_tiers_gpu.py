"""bench/kv_tiers_gpu.py's CPU path (its GPU run: docs/kv_tiers.md, an H100 run recorded): the smoke run measures
every link it names, the reference store's reload comes back bit for bit, and the crossover rows
are computed from the measured numbers."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _module():
    spec = importlib.util.spec_from_file_location("kv_tiers_gpu", ROOT / "bench" / "kv_tiers_gpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cpu_smoke_run(tmp_path):
    out = tmp_path / "kv.json"
    result = _module().main(["--device", "cpu", "--quick", "--out", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    assert result["device"] == "cpu" and len(result["links"]) == len(result["disk"]) == 2
    for row in result["links"] + result["disk"]:
        assert all(v > 0 for k, v in row.items() if "->" in k), row
    assert result["store"]["reload_bitwise_equal"] is True
    assert result["gemm"]["flops_per_s"] > 0 and result["transfer_latency_s"] > 0
    assert len(result["crossover"]) == 8
    for row in result["crossover"]:
        assert row["crossover_tokens"] is None or 1 <= row["crossover_tokens"] <= 8192, row
