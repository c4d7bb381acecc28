"""The benchmark runner (bench/runner.py) on the CPU: every concept's cases are well-formed data
(each provider's builder exists and takes its options: the GPU cases cannot run here, so this is
what catches a typo in them), the selection rules, and whole runs of the tiny ``smoke`` cases
that write the JSON the docs' results are made of."""
from __future__ import annotations

import inspect
import json

import pytest

from bench import runner

REQUIRED = {"schema", "command", "argv", "concepts", "device", "device_type", "torch", "triton", "python",
            "git_commit", "started", "wall_s", "load_average", "cases"}


@pytest.mark.parametrize("concept", runner.concepts())
def test_cases_are_well_formed(concept):
    module = runner.load(concept)
    names = [c.name for c in module.CASES]
    assert len(names) == len(set(names)), f"{concept}: duplicate case names"
    assert callable(module.setup)
    for case in module.CASES:
        assert case.providers and set(case.devices) <= {"cpu", "cuda"}, case.name
        assert len({p.name for p in case.providers}) == len(case.providers), case.name
        json.dumps(dict(case.params))                                     # params are plain data
        for p in case.providers:
            assert p.build in module.BUILDERS, f"{concept}: {case.name}: no builder {p.build!r}"
            inspect.signature(module.BUILDERS[p.build]).bind(None, case, "cpu", **p.options)
    assert any("smoke" in c.tags and "cpu" in c.devices for c in module.CASES), \
        f"{concept}: no tiny CPU case (tag smoke) for the runner's CPU test"


def test_selection_rules():
    C, P = runner.Case, runner.P
    cases = [C("a", {}, (P("x"),)), C("b", {}, (P("x"),), tags=("main",)), C("c", {}, (P("x"),), tags=("sweep",)),
             C("d", {}, (P("x"),), tags=("smoke",)), C("e", {}, (P("x"),), tags=("tune", "sweep"))]
    names = lambda cs: [c.name for c in cs]  # noqa: E731
    assert names(runner.select(cases)) == ["a", "b"]                    # sweep and smoke only when named
    assert names(runner.select(cases, tags=["main"])) == ["b"]
    assert names(runner.select(cases, tags=["tune"])) == ["e"]          # by a tag of its own
    assert names(runner.select(cases, tags=["main", "sweep"])) == ["b", "c", "e"]
    assert names(runner.select(cases, tags=["smoke"])) == ["d"]
    assert names(runner.select(cases, names=["c", "d"], tags=["sweep", "smoke"])) == ["c", "d"]
    for concept in runner.concepts():        # a sweep is never selected by the tag of the set it extends
        for c in runner.load(concept).CASES:
            if set(runner.EXPLICIT_TAGS) & set(c.tags):
                assert not {"main", "shapes", "d256", "n4096", "gate", "splits"} & set(c.tags), c.name
    with pytest.raises(ValueError, match="needs the work"):
        C("f", {}, (P("x"),), metric="TFLOP/s")


CPU_CONCEPTS = ["stopping", "paged", "prefix_cache", "radix", "hit_rate", "speculative", "generate"]


def _run(tmp_path, concepts, capsys):
    out = tmp_path / "results.json"
    argv = ["run", "--device", "cpu", "--tag", "smoke", "--out", str(out)]
    for c in concepts:
        argv += ["--concept", c]
    status = runner.main(argv)
    printed = capsys.readouterr().out
    assert status == 0, printed
    data = json.loads(out.read_text())
    assert REQUIRED <= set(data), set(data) ^ REQUIRED
    assert data["schema"] == runner.SCHEMA and data["device_type"] == "cpu" and data["concepts"] == concepts
    assert data["command"].startswith("python -m bench run") and "--tag smoke" in data["command"]
    assert {c["concept"] for c in data["cases"]} == set(concepts)
    for case in data["cases"]:
        assert "error" not in case and "skipped" not in case, case
        assert case["check"] is None or case["check"]["ok"], case
        for r in case["results"]:
            assert "value" in r and "error" not in r, (case["name"], r)
            if case["metric"] != "value":
                assert r["median_ms"] > 0 and r["calls"] >= 1 and r["value"] > 0
        if case["metric"] != "value" and len(case["results"]) > 1:
            assert set(case["speedups"]) == {r["provider"] for r in case["results"][1:]}
    return data


def test_cpu_concepts_run_and_write_json(tmp_path, capsys):
    data = _run(tmp_path, CPU_CONCEPTS, capsys)
    assert len(data["cases"]) >= len(CPU_CONCEPTS)


def _interpreter():
    import os
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("the Triton interpreter is off (a GPU machine): the kernels' CUDA cases run there")


def test_a_kernel_concept_runs_under_the_interpreter(tmp_path, capsys):
    """flash_attention's tiny cases: the Triton kernels under the interpreter, each case checked
    against the float64 oracle first, a tile-config provider checked (and bit-compared) too."""
    _interpreter()
    data = _run(tmp_path, ["flash_attention"], capsys)
    tiles = [r for c in data["cases"] for r in c["results"] if "options" in r and "config" in r["options"]]
    assert tiles and all(r["check"]["bits"] == "same" for r in tiles)


@pytest.mark.heavy
@pytest.mark.parametrize("concept", ["paged_attention", "batch_invariant", "sampling"])
def test_other_kernel_concepts_run_under_the_interpreter(tmp_path, capsys, concept):
    _interpreter()
    _run(tmp_path, [concept], capsys)


def test_a_failed_check_is_not_timed_and_fails_the_run(tmp_path, capsys, monkeypatch):
    from bench.cases import stopping
    monkeypatch.setattr(stopping, "check", lambda problem, case, device: dict(ok=False, what="planted"))
    out = tmp_path / "r.json"
    assert runner.main(["run", "--concept", "stopping", "--tag", "smoke", "--device", "cpu", "--out", str(out)]) == 1
    case = json.loads(out.read_text())["cases"][0]
    assert case["error"].startswith("check failed") and all("median_ms" not in r for r in case["results"])
    assert "CHECK FAILED" in capsys.readouterr().out


def test_gpu_cases_are_skipped_on_the_cpu(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert runner.main(["run", "--concept", "paged_attention", "--case", "decode 64 x 4096", "--device", "cpu",
                        "--out", str(out)]) == 0
    cases = json.loads(out.read_text())["cases"]
    assert cases and all("cuda" in c["skipped"] for c in cases)


def test_isolate_runs_each_case_in_a_child_process(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert runner.main(["run", "--concept", "stopping", "--tag", "smoke", "--device", "cpu", "--isolate",
                        "--out", str(out)]) == 0, capsys.readouterr().out
    cases = json.loads(out.read_text())["cases"]
    assert len(cases) == 1 and cases[0]["concept"] == "stopping" and cases[0]["check"]["ok"]
    assert all(r["median_ms"] > 0 for r in cases[0]["results"])


@pytest.mark.gpu
def test_a_graph_replay_keeps_what_its_function_holds():
    """bench.timing.cuda_graph: the replay holds the captured function and so its closure (a plan
    and its split workspace, which the graph writes but did not allocate during capture). An H100
    run hit an illegal address when only ``g.replay`` was kept and the workspace was freed."""
    import gc
    import weakref

    import torch

    from bench.timing import cuda_graph
    if not torch.cuda.is_available():
        pytest.skip("CUDA graphs need a CUDA device")

    class Workspace:
        def __init__(self):
            self.buf = torch.zeros(1 << 20, device="cuda")

    ws = Workspace()
    src = torch.randn(1 << 20, device="cuda")
    replay = cuda_graph(lambda w=ws: w.buf.copy_(src))
    alive = weakref.ref(ws)
    del ws
    gc.collect()
    torch.cuda.empty_cache()
    assert alive() is not None, "the replay dropped the captured function's workspace"
    src.add_(1.0)
    replay()
    torch.cuda.synchronize()
    assert torch.equal(alive().buf, src)
