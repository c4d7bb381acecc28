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


def test_cpu_smoke_run_measures_the_crossover(tmp_path):
    """The new section: per prefix length, three recompute timings (the 1-layer reference model's
    prefill with its reference attention, with SDPA, the layer alone) and two reloads (per block,
    one copy) of the very KV the prefill wrote, bit for bit; the measured crossover of each pair is
    the first length from which reload stays no slower; the predicted one beside it."""
    module = _module()
    result = module.main(["--device", "cpu", "--quick", "--out", str(tmp_path / "kv.json")])
    m = result["measured_crossover"]
    assert {"config", "model", "layer_weight_bytes", "block_tokens", "kv_bytes_per_token", "rows",
            "measured_crossover_tokens", "predicted", "note"} <= set(m)
    assert m["config"]["n_layers"] == 1 and m["block_tokens"] == 16
    assert [row["tokens"] for row in m["rows"]] == module.QUICK_PREFIXES
    pairs = [f"reload {r} / recompute {c}" for c in module.RECOMPUTES for r in ("per-block", "one copy")]
    assert set(m["measured_crossover_tokens"]) == set(pairs)
    for row in m["rows"]:
        assert row["kv_bytes"] == row["tokens"] * m["kv_bytes_per_token"]
        assert row["blocks"] == -(-row["tokens"] // 16)
        assert row["reload_bitwise_equal"] is True
        for key in ["reload per-block s", "reload one copy s", "predicted recompute s", "predicted reload s",
                    *(f"recompute {c} s" for c in module.RECOMPUTES)]:
            assert row[key] > 0, (key, row)
        assert set(row["winner"]) == {f"{r} / {c}" for c in module.RECOMPUTES for r in ("per-block", "one copy")}
    for c in module.RECOMPUTES:
        for r in ("per-block", "one copy"):
            wins = [row[f"reload {r} s"] <= row[f"recompute {c} s"] for row in m["rows"]]
            got = m["measured_crossover_tokens"][f"reload {r} / recompute {c}"]
            assert got == module.stable_crossover(module.QUICK_PREFIXES, wins)
    predicted = m["predicted"]["crossover_tokens"]
    assert set(predicted) == {"latency 0", "latency measured (one transfer per layer)",
                              "latency measured / 32 (one transfer for all 32 layers)"}
    assert all(v is None or 1 <= v <= m["config"]["max_seq_len"] for v in predicted.values())


def test_stable_crossover():
    f = _module().stable_crossover
    ns = [1, 2, 4, 8]
    assert f(ns, [True] * 4) == 1
    assert f(ns, [False, True, False, True]) == 8
    assert f(ns, [False, False, True, True]) == 4
    assert f(ns, [True, True, True, False]) is None
