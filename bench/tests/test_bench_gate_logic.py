"""The regression gate's logic (bench/gate.py) on synthetic measurements, on the CPU:
the recorded ratio passes, a 10 % slowdown fails with an explanation naming the shape, noise
within the stated bound passes, and the recorded ratios really come from the measured JSON
files in docs/results (recomputed here from their raw rows)."""
from __future__ import annotations

import json

import pytest

from bench import gate

REC = {"k s1": gate.Ratio("k s1", ours_ms=1.0, peer="cudnn", peer_ms=0.8),      # ratio 0.8
       "k s2": gate.Ratio("k s2", ours_ms=2.0, peer="fa2", peer_ms=3.0)}        # ratio 1.5


def measured(slowdown: float = 0.0, peer_noise: float = 0.0, shapes=("k s1", "k s2")) -> dict:
    """Our time x (1 + slowdown), the peer's x (1 + peer_noise), the rest as recorded."""
    return {s: gate.Ratio(s, REC[s].ours_ms * (1 + slowdown), REC[s].peer, REC[s].peer_ms * (1 + peer_noise))
            for s in shapes}


def test_recorded_ratio_passes():
    rep = gate.check(measured(), REC, factor=0.92)
    assert rep.ok, rep.explain()


def test_ten_percent_slowdown_fails_and_is_explained():
    rep = gate.check(measured(slowdown=0.10), REC, factor=0.92)
    assert not rep.ok and len(rep.failures) == 2
    text = rep.explain()
    assert "FAIL" in text and "k s1" in text and "cudnn" in text and "10.0 % slower" in text, text


def test_one_shape_slow_fails_only_that_shape():
    m = measured()
    m["k s2"] = gate.Ratio("k s2", 2.0 * 1.10, "fa2", 3.0)
    rep = gate.check(m, REC, factor=0.92)
    assert len(rep.failures) == 1 and "k s2" in rep.failures[0]


@pytest.mark.parametrize("noise", [-0.07, -0.03, 0.0, 0.03, 0.07])
def test_noise_within_the_stated_bound_passes(noise):
    """The stated bound: the ratio may move by up to 8 % (factor 0.92): our time 7 % slower or
    the peer 7 % faster (ratio x 0.93 / x 1/1.07 = 0.935) still pass."""
    assert gate.check(measured(slowdown=max(noise, 0.0), peer_noise=min(noise, 0.0)), REC, factor=0.92).ok


def test_the_bound_is_where_the_doc_says():
    """Slowdowns above 1 / factor - 1 fail, below pass (8.7 % at the default 0.92)."""
    edge = 1 / 0.92 - 1
    assert gate.check(measured(slowdown=edge - 0.002), REC, factor=0.92).ok
    assert not gate.check(measured(slowdown=edge + 0.002), REC, factor=0.92).ok
    assert gate.FACTOR == pytest.approx(0.92) or "INFERSPEC_GATE_FACTOR" in __import__("os").environ


def test_unrecorded_shape_fails_and_nothing_measured_fails():
    rep = gate.check({"k new": gate.Ratio("k new", 1.0, "cudnn", 1.0)}, REC)
    assert not rep.ok and "NOT RECORDED" in rep.explain()
    assert not gate.check({}, REC).ok


def test_best_peer_is_the_fastest_full_peer():
    r = gate.best_peer("s", {"ours": 2.0, "sdpa_cudnn": 1.5, "sdpa_flash": 1.0, "reference": 0.1},
                       "ours", gate.ATTENTION_PEERS)
    assert (r.peer, r.value) == ("sdpa_flash", 0.5)          # the reference is not a peer
    with pytest.raises(KeyError):
        gate.best_peer("s", {"ours": 1.0}, "ours", gate.ATTENTION_PEERS)


def test_recorded_ratios_come_from_the_measured_json():
    """Recompute a few recorded ratios straight from the raw rows of the committed JSON."""
    rec = gate.recorded_attention()
    data = json.loads((gate.RESULTS / "attention_h200.json").read_text())
    rows = [r for r in data["rows"] if "ms" in r]
    assert len(rec) == len({(r["pass"], r["dtype"], r["N"], r["D"], r["causal"]) for r in rows})
    for r in rows[:12]:
        if r["provider"] != "ours":
            continue
        same = [o for o in rows if all(o[k] == r[k] for k in ("pass", "dtype", "B", "H", "N", "D", "causal"))]
        best = min(o["ms"] for o in same if o["provider"] in gate.ATTENTION_PEERS)
        key = gate.attention_shape(r["pass"], r["dtype"], r["B"], r["H"], r["N"], r["D"], r["causal"])
        assert rec[key].value == pytest.approx(best / r["ms"], rel=1e-12)
    srec = gate.recorded_sampling()
    sdata = json.loads((gate.RESULTS / "sampling_speed_h200.json").read_text())
    assert srec and all(r.peer in gate.SAMPLING_PEERS for r in srec.values())
    for r in sdata["results"]:
        if r["impl"] == gate.SAMPLING_OURS:
            key = gate.sampling_shape(r["dist"], r["config"], sdata["info"]["batch"], sdata["info"]["vocab"])
            assert srec[key].ours_ms == r["median_ms"]


def test_machine_baseline_replaces_the_docs_record(tmp_path, monkeypatch):
    """INFERSPEC_GATE_BASELINE (written by gate.record_baseline on the machine that runs the gate)
    is what recorded_attention holds a run to; unset, the docs/results record is used."""
    import json
    shape = gate.attention_shape("fwd", "bf16", 4, 16, 4096, 128, False)
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(dict(rows=[dict(kernel="attention", shape=shape, ours_ms=1.2, peer="sdpa_cudnn",
                                               peer_ms=0.84, ratio=0.7)])))
    monkeypatch.setenv("INFERSPEC_GATE_BASELINE", str(path))
    rec = gate.recorded_attention()
    assert set(rec) == {shape} and abs(rec[shape].value - 0.7) < 1e-12
    slower = gate.Ratio(shape, 1.2 * 1.10, "sdpa_cudnn", 0.84)          # 10 % slower than the baseline
    assert not gate.check({shape: slower}, rec).ok
    assert gate.check({shape: gate.Ratio(shape, 1.2 * 1.03, "sdpa_cudnn", 0.84)}, rec).ok
    monkeypatch.delenv("INFERSPEC_GATE_BASELINE")
    assert len(gate.recorded_attention()) > 1                          # the docs record again


def test_recorded_ratios_read_the_runners_json(tmp_path):
    """A results file written by the runner (python -m bench run --concept flash_attention) gives
    the same recorded ratios as the rows of the script before it: per shape of one head count,
    the fastest peer's median over ours."""
    case = dict(concept="flash_attention", name="fwd bf16 B4 H16 N4096 D128 full",
                params=dict(pass_="fwd", dtype="bf16", B=4, Hq=16, Hkv=16, N=4096, D=128, causal=False),
                results=[dict(provider="ours", median_ms=1.2), dict(provider="sdpa_cudnn", median_ms=0.9),
                         dict(provider="sdpa_flash", median_ms=1.5), dict(provider="reference", median_ms=0.1)])
    gqa = dict(case, name="fwd bf16 B8 H32/8 N2048 D128 causal",
               params=dict(case["params"], B=8, Hq=32, Hkv=8, N=2048, causal=True))
    path = tmp_path / "attention_h200.json"
    path.write_text(json.dumps(dict(schema="inferspec-bench/1", cases=[case, gqa])))
    rec = gate.recorded_attention(path)
    shape = gate.attention_shape("fwd", "bf16", 4, 16, 4096, 128, False)
    assert set(rec) == {shape}                                    # GQA shapes are not gated
    assert rec[shape].peer == "sdpa_cudnn" and rec[shape].value == pytest.approx(0.75)



def test_recorded_sampling_ratios_read_the_runners_json(tmp_path):
    case = dict(concept="sampling", name="256 x 128256 flat / top-p 0.9", metric="ms",
                params=dict(dist="flat", config="top-p 0.9", batch=256, vocab=128256, dtype="float32"),
                results=[dict(provider=gate.SAMPLING_OURS, median_ms=1.25),
                         dict(provider=gate.SAMPLING_PEERS[0], median_ms=3.95),
                         dict(provider="torch.sort alone", median_ms=0.5)])            # a partial op: no peer
    path = tmp_path / "sampling_speed_h200.json"
    skipped = dict(concept="sampling", name="64 x 32000 flat / top-p 0.9", metric="ms", results=[],
                   params=dict(dist="flat", config="top-p 0.9", batch=64, vocab=32000), skipped="runs on cpu")
    path.write_text(json.dumps(dict(schema="inferspec-bench/1", cases=[case, skipped])))
    rec = gate.recorded_sampling(path)
    shape = gate.sampling_shape("flat", "top-p 0.9", 256, 128256)
    assert set(rec) == {shape} and rec[shape].value == pytest.approx(3.95 / 1.25)


# --- issue 27's public paths -------------------------------------------------------------------
@pytest.mark.parametrize("kernel,count", [("paged_decode", 3), ("verify", 2), ("sampler", 8)])
def test_public_gates_have_cases_with_a_full_peer(kernel, count):
    """Every public gate shape is a runner case that times ``run`` under graph replay next to at
    least one full peer of the same operation (the shapes of issue 27's table)."""
    cases = gate.public_cases(kernel)
    assert len(cases) == count, [c.name for c in cases]
    _, peers = gate.PUBLIC_GATES[kernel]
    for c in cases:
        names = {p.name for p in c.providers}
        assert gate.PUBLIC_OURS in names and names & set(peers), (c.name, names)


def test_public_paths_are_held_to_this_machines_baseline(tmp_path, monkeypatch):
    """The public paths have no cross-session record: without INFERSPEC_GATE_BASELINE the gate
    says how to record one; with it, its rows of that kernel are the record."""
    monkeypatch.delenv("INFERSPEC_GATE_BASELINE", raising=False)
    with pytest.raises(FileNotFoundError, match="gate_proof --kernel verify"):
        gate.recorded_public("verify")
    shape = gate.public_shape("verify", "plan/run, good draft, 64 x gamma 8 x 32768")
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(dict(rows=[
        dict(kernel="verify", shape=shape, ours_ms=0.25, peer="torch", peer_ms=0.25, ratio=1.0),
        dict(kernel="attention", shape="other", ours_ms=1, peer="x", peer_ms=1, ratio=1.0)])))
    monkeypatch.setenv("INFERSPEC_GATE_BASELINE", str(path))
    rec = gate.recorded_public("verify")
    assert set(rec) == {shape}
    assert not gate.check({shape: gate.Ratio(shape, 0.25 * 1.10, "torch", 0.25)}, rec).ok


def _plain_and_planted(module, build, prob, case):
    plain = module.BUILDERS["run"](prob, case, "cpu")
    planted = module.BUILDERS["run"](prob, case, "cpu", extra=0.1)
    unwrap = (lambda f: f[0]) if isinstance(plain, tuple) else (lambda f: f)
    return unwrap(plain), unwrap(planted)


def _same(a, b):
    import torch
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    return all(_same(x, y) for x, y in zip(a, b)) if isinstance(a, tuple) else a == b


@pytest.mark.parametrize("kernel", ["paged_decode", "verify", "sampler"])
def test_the_planted_extra_work_returns_the_shipped_result(kernel, monkeypatch):
    """gate_proof's ``extra10`` plant (the cases' ``run`` builder with ``extra=0.1``) does more work
    -- a second plan's run over the first max(1, round(0.1 x batch)) rows -- and returns the shipped
    call's result unchanged, on the CPU at tiny sizes (the timing itself is the GPU proof's)."""
    import torch
    from bench.runner import Case, P, extra_rows
    if kernel == "paged_decode":
        from bench.cases import paged_attention as m
        case, plan_class = next(c for c in m.CASES if "smoke" in c.tags), m.pa.PagedAttentionPlan
    elif kernel == "verify":
        from bench.cases import speculative as m
        case, plan_class = next(c for c in m.CASES if "smoke" in c.tags), m.opt.VerifyPlan
    else:
        from bench.cases import sampling as m
        from optimized.sampling import SamplerPlan as plan_class
        case = Case("tiny", dict(batch=12, vocab=50, dist="peaked", config="top-p 0.9"), (P("run"),), metric="ms")
    rows = []
    shipped_run = plan_class.run
    monkeypatch.setattr(plan_class, "run", lambda self, first, *a, **k: (rows.append(first.shape[0]),
                                                                          shipped_run(self, first, *a, **k))[1])
    prob = m.setup(case, "cpu")
    plain, planted = _plain_and_planted(m, "run", prob, case)
    batch = case.params["batch"]
    with torch.no_grad():
        want = plain()
        assert rows == [batch]
        got = planted()
    assert rows == [batch, batch, extra_rows(batch, 0.1)], rows
    assert _same(want, got)
