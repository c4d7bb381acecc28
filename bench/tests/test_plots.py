"""The figures of docs/img/ can be redrawn (bench/plots.py): from the committed results, and from
the runner's JSON (a smoke run here; a synthetic attention file)."""
from __future__ import annotations

import json

import pytest

from bench import plots, runner

pytest.importorskip("matplotlib")


@pytest.mark.parametrize("figure", ["attention", "radix", "paged"])
def test_from_the_committed_results(tmp_path, figure):
    out = tmp_path / f"{figure}.png"
    assert plots.main([figure, "--out", str(out)]) == 0 and out.stat().st_size > 10_000


def test_speculative_closed_forms(tmp_path):
    assert plots.main(["speculative", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "speculative_speedup.png").exists() and (tmp_path / "speculative_batch.png").exists()


def test_from_the_runners_json(tmp_path, capsys):
    src = tmp_path / "r.json"
    assert runner.main(["run", "--concept", "radix", "--concept", "paged", "--tag", "smoke", "--device", "cpu",
                        "--out", str(src)]) == 0
    for figure in ("radix", "paged"):
        assert plots.main([figure, "--json", str(src), "--out", str(tmp_path / f"{figure}.png")]) == 0
    cases = [dict(concept="flash_attention", name="ceiling", params=dict(dtype="bf16", M=8192, N=8192, K=8192),
                  metric="TFLOP/s", results=[dict(provider="torch.matmul", value=790.0)])]
    for n in (1024, 4096, 16384):
        for pass_ in ("fwd", "bwd"):
            cases.append(dict(concept="flash_attention", name=f"{pass_} {n}", metric="TFLOP/s",
                              params=dict(pass_=pass_, dtype="bf16", B=16384 // n, Hq=16, Hkv=16, N=n, D=128,
                                          causal=True),
                              results=[dict(provider="ours", value=400.0), dict(provider="sdpa_cudnn", value=500.0)]))
    data = dict(schema=runner.SCHEMA, device="GPU", torch="t", triton="t", cases=cases)
    rows, ceiling = plots.attention_rows(data)
    assert ceiling == 790.0 and len(rows) == 12 and {r["pass"] for r in rows} == {"fwd", "bwd"}
    (tmp_path / "a.json").write_text(json.dumps(data))
    assert plots.main(["attention", "--json", str(tmp_path / "a.json"), "--out", str(tmp_path / "a.png")]) == 0
