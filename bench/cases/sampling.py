"""Sampling (course 01.05): the sort-free optimized sampler against the sort-based reference,
transformers' warpers + torch.multinomial (what ``generate(do_sample=True)`` runs) and torch
baselines (docs/sampling.md, docs/performance.md).

Workloads (fp32 logits from a seeded generator): "peaked" = 4 randn (top-1 probability ~0.27,
top-p 0.9 keeps ~190 of 32,000 tokens: LLM-like), "flat" = randn (top-p 0.9 keeps ~60 % of the
vocabulary: the worst case for a top-p threshold search); four samplers on CUDA (eight 256 x
128,256 workloads): T 0.7 -> top-k 50 -> top-p 0.9, top-p 0.9 alone, top-k 50 alone, T 0.7 ->
min-p 0.05; the CPU and smoke cases keep the first two. Each timed call is a whole ``sample(logits, params, generator)``
(validation, filters, draw); on CUDA with CUDA events after a synchronize (the call's latency,
host work included), implementations interleaved round by round, median of the rounds.

Providers: ``optimized`` (the default schedule: the split sort-free Triton sampler on CUDA, the
torch schedule on the CPU), on CUDA ``run (graph)`` / ``run (eager)`` (the public
``SamplerPlan``: plan once in setup, ``run`` timed, CUDA-graph-replayed by the runner or launched
eagerly; fixed uniforms) and ``topk(k+1) + multinomial`` (the torch floor of a top-k sampler), the other schedules of ``optimized.sampling.dispatch.sample``
(``schedule=`` "torch", "one-program", "split" with other SplitConfig settings: eager launches,
8 pivots x 4 passes, 8 programs per row, block 512 / 4 warps), ``reference (sort)`` (per row,
sort everything: written for reading), ``transformers warpers + multinomial`` (the gate's peer),
and on CUDA a batched torch.sort top-p sampler, ``torch.sort`` alone, ``torch.multinomial`` alone
and one read pass over the logits (the bandwidth floor).

Checked first, on the device (recorded; only a NaN row's rejection is required): on 8 rows of the
workload, optimized probabilities against the reference's (same support, max difference) and the
tokens for the same uniforms; on CUDA also at the full batch, the tokens of the default schedule
against the reference's, the torch schedule's and the one-program schedule's (rows whose uniform
falls within float32 rounding of a CDF step may differ: counted, not hidden) and the kept sets of
16 rows; integer logits with ties; the torch schedule's fused Triton tail against its torch tail.

``profile`` (CUDA): where the split schedule's time goes: per-kernel GPU time from
torch.profiler, the host time of one call, the rows the one-program kernel redid; with
``profile-sweep`` over other SplitConfig settings; and the host cost of an empty Triton launch.
"""
from __future__ import annotations

import torch

import reference.sampling as ref
from bench.runner import Case, P, Unavailable
from optimized.sampling import dispatch
from optimized.sampling.config import OneProgramConfig, SamplerConfig, SplitConfig, TorchPathConfig
from reference.sampling import SamplingParams

try:
    import triton

    @triton.jit
    def _empty_kernel(x_ptr):
        pass
except ImportError:  # pragma: no cover - triton is a dependency on linux x86-64
    triton = None

CONFIGS = {
    "T0.7 top-k 50 top-p 0.9": dict(temperature=0.7, top_k=50, top_p=0.9),
    "top-p 0.9": dict(top_p=0.9),
    "top-k 50": dict(top_k=50),
    "T0.7 min-p 0.05": dict(temperature=0.7, min_p=0.05),
}
CPU_CONFIGS = ("T0.7 top-k 50 top-p 0.9", "top-p 0.9")   # the CPU and smoke cases (bench/floors.py's)
OURS = "optimized"
TRANSFORMERS = "transformers warpers + multinomial"
SPLIT_VARIANTS = {  # the split schedule's settings timed next to its default
    "eager launches": dict(cuda_graph=False),
    "8 pivots, 4 passes": dict(pivots=8, search_passes=4),
    "8 programs per row": dict(programs_per_row=8),
    "block 512, 4 warps": dict(block=512, num_warps=4),
}
PROFILE_SWEEP = [dict(pivots=8, search_passes=4), dict(programs_per_row=8), dict(block=512, num_warps=4),
                 dict(search_passes=3)]
ALTERNATING = dict(repeats=1, budget_ms=None, min_warmup=2, warmup_ms=0, flush_l2=False, sync=True)


def make_logits(batch: int, vocab: int, dist: str, device, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, vocab, generator=g) * (4.0 if dist == "peaked" else 1.0)
    return x.to(device)


def hf_chain(params: dict):
    """transformers' warpers in generate()'s order, then softmax + multinomial (None if missing)."""
    try:
        from transformers.generation import logits_process as lp
    except Exception:  # noqa: BLE001 - transformers is a test extra
        return None
    procs = []
    if params.get("temperature", 1.0) != 1.0:
        procs.append(lp.TemperatureLogitsWarper(params["temperature"]))
    if params.get("top_k", 0):
        procs.append(lp.TopKLogitsWarper(params["top_k"]))
    if params.get("top_p", 1.0) < 1.0:
        procs.append(lp.TopPLogitsWarper(params["top_p"]))
    if params.get("min_p", 0.0) > 0.0:
        procs.append(lp.MinPLogitsWarper(params["min_p"]))

    def run(x, generator):
        ids = torch.zeros(x.shape[0], 1, dtype=torch.long, device=x.device)
        s = x
        for p in procs:
            s = p(ids, s)
        return torch.multinomial(torch.softmax(s, dim=-1), 1, generator=generator)[:, 0]
    return run


def sort_based_top_p(x, p: float, generator):
    """A batched sort-based top-p sampler (sort, softmax, cumsum, mask, multinomial): what a
    sort-based engine does."""
    s, idx = torch.sort(x, dim=1, descending=True)
    q = torch.softmax(s, dim=1)
    above = q.cumsum(dim=1) - q
    q = torch.where(above < p, q, torch.zeros_like(q))
    return idx.gather(1, torch.multinomial(q, 1, generator=generator))[:, 0]


def sampler_config(split=None, one_program=None, torch_path=None) -> SamplerConfig | None:
    """A SamplerConfig from plain dicts of overrides (None: every default)."""
    if split is None and one_program is None and torch_path is None:
        return None
    return SamplerConfig(torch_path=TorchPathConfig(**(torch_path or {})),
                         split=None if split is None else SplitConfig(**split),
                         one_program=None if one_program is None else OneProgramConfig(**one_program))


# ----------------------------------------------------------------------------- the cases
def _timing_case(dist, config, batch, vocab, device, tags=(), rounds=25, full=True) -> Case:
    providers = [P(OURS, "sample", schedule="auto")]
    if device == "cuda" and full:
        providers += [P("run (graph)", "run", graph=True), P("run (eager)", "run"),
                      P("topk(k+1) + multinomial", "topk_multinomial")]
        providers += [P("torch schedule", "sample", schedule="torch"),
                      P("one program per row", "sample", schedule="one-program")]
        providers += [P(f"split, {label}", "sample", schedule="split", split=cfg)
                      for label, cfg in SPLIT_VARIANTS.items()]
        providers += [P("torch.sort alone", "torch_sort")]
        if "top_p" in CONFIGS[config] and "top_k" not in CONFIGS[config]:
            providers += [P("torch.sort top-p sampler", "sort_top_p")]
        providers += [P("torch.multinomial alone", "multinomial"), P("one read pass (x.amax(dim=1))", "read_pass")]
    elif device == "cpu" and not full:            # the smoke case: the Triton schedules, interpreted
        providers += [P("split", "sample", schedule="split"), P("one program per row", "sample", schedule="one-program")]
    providers += [P("reference (sort)", "reference"), P(TRANSFORMERS, "transformers")]
    timing = dict(ALTERNATING, rounds=rounds) if full else dict(ALTERNATING, rounds=rounds, min_warmup=0)
    return Case(f"{batch} x {vocab} {dist} / {config}", dict(dist=dist, config=config, batch=batch, vocab=vocab,
                                                            dtype="float32"),
                tuple(providers), metric="ms", devices=(device,), tags=tags, timing=timing)


def _profile_case(dist, config, splits, tags) -> Case:
    suffix = " sweep" if len(splits) > 1 else ""
    return Case(f"profile 256 x 128256 {dist} / {config}{suffix}",
                dict(dist=dist, config=config, batch=256, vocab=128256, dtype="float32"),
                tuple(P("split " + (", ".join(f"{k}={v}" for k, v in s.items()) or "default"), "profile", split=s)
                      for s in splits), metric="value", tags=tags)


WORKLOADS = [(d, c) for d in ("peaked", "flat") for c in CONFIGS]          # the eight 256 x 128k workloads
CPU_WORKLOADS = [(d, c) for d in ("peaked", "flat") for c in CPU_CONFIGS]
CASES = ([_timing_case(d, c, 256, 128256, "cuda") for d, c in WORKLOADS]
         + [_timing_case(d, c, 64, 32000, "cpu") for d, c in CPU_WORKLOADS]
         + [_profile_case(d, c, [{}], ("profile",)) for d, c in WORKLOADS]
         + [_profile_case(d, c, [{}] + PROFILE_SWEEP, ("profile-sweep", "sweep")) for d, c in CPU_WORKLOADS]
         + [Case("empty Triton launch, host time", dict(kernel="empty", launches=200), (P("launch", "empty_launch"),),
                 metric="value", tags=("profile",))]
         + [_timing_case("peaked", c, 2, 64, "cpu", ("smoke",), rounds=1, full=False) for c in CPU_CONFIGS])


# ----------------------------------------------------------------------------- set-up and checks
def setup(case, device):
    p = case.params
    if "dist" not in p:
        return None
    return dict(x=make_logits(p["batch"], p["vocab"], p["dist"], device), params=SamplingParams(**CONFIGS[p["config"]]))


def _workload_check(device, vocab, dist, config) -> dict:
    """On 8 rows: optimized probabilities and tokens against the reference's."""
    x = make_logits(8, vocab, dist, device, seed=1)
    p = SamplingParams(**CONFIGS[config])
    pr, po = ref.sampling_probs(x, p), dispatch.sampling_probs(x, p)
    u = torch.rand(8, generator=torch.Generator().manual_seed(2), dtype=torch.float64).to(device)
    tr, to = ref.sample(x, p, uniforms=u), dispatch.sample(x, p, uniforms=u)
    return dict(same_support=bool(torch.equal(pr > 0, po > 0)), max_abs_diff=float((pr - po).abs().max()),
                kept=int((pr > 0).sum()), same_tokens=int((tr == to).sum()), rows=8)


def _full_batch_check(x, params, device) -> dict:
    """At the benchmark's size: the default schedule's tokens against the reference's, the torch
    schedule's and the one-program schedule's for the same uniforms; kept sets of 16 rows."""
    batch = x.shape[0]
    u = torch.rand(batch, generator=torch.Generator().manual_seed(7), dtype=torch.float64).to(device)
    a = dispatch.sample(x, params, uniforms=u)
    kept = dispatch.sampling_probs(x[:16], params) > 0
    return dict(rows=batch, same_as_reference=int((a == ref.sample(x, params, uniforms=u)).sum()),
                same_as_torch_schedule=int((a == dispatch.sample(x, params, uniforms=u, schedule="torch")).sum()),
                same_as_one_program=int((a == dispatch.sample(x, params, uniforms=u, schedule="one-program")).sum()),
                kept_set_same_rows_of_16=int((ref.sampling_probs(x[:16], params) > 0).eq(kept).all(1).sum()))


def _device_checks(device, vocab) -> dict:
    out = {}
    x = make_logits(4, vocab, "peaked", device)
    x[2, 7] = float("nan")
    try:
        dispatch.sample(x, SamplingParams(top_k=50, top_p=0.9), torch.Generator(device=device).manual_seed(0))
        out["nan_rejected"] = False
    except ValueError as exc:
        out["nan_rejected"] = "row 2" in str(exc)
    ints = torch.randint(-3, 4, (16, vocab), generator=torch.Generator().manual_seed(3)).float().to(device)
    p = SamplingParams(temperature=0.8, top_k=50, top_p=0.9)
    u = torch.rand(16, generator=torch.Generator().manual_seed(4), dtype=torch.float64).to(device)
    out["ties_same_tokens_of_16"] = int((ref.sample(ints, p, uniforms=u) == dispatch.sample(ints, p, uniforms=u)).sum())
    if device == "cuda":
        x = make_logits(64, vocab, "peaked", device, seed=5)
        u = torch.rand(64, generator=torch.Generator().manual_seed(6), dtype=torch.float64).to(device)
        p = SamplingParams(temperature=0.7, top_k=50, top_p=0.9, min_p=0.02)
        fused, plain = (dispatch.sample(x, p, uniforms=u, schedule="torch",
                                        config=sampler_config(torch_path=dict(fused_tail=f))) for f in (True, False))
        out["fused_tail_equals_torch_tail_of_64"] = int((fused == plain).sum())
        out["default_equals_torch_schedule_min_p_of_64"] = int((dispatch.sample(x, p, uniforms=u) == fused).sum())
    return out


def check(prob, case, device) -> dict:
    if prob is None:
        return dict(ok=True)
    p = case.params
    out = dict(workload=_workload_check(device, p["vocab"], p["dist"], p["config"]), **_device_checks(device, p["vocab"]))
    if device == "cuda" and "sample" in {q.build for q in case.providers}:
        out["full_batch"] = _full_batch_check(prob["x"], prob["params"], device)
    out["ok"] = out["nan_rejected"]
    return out


# ----------------------------------------------------------------------------- builders
def _sample(prob, case, device, schedule, split=None):
    x, params = prob["x"], prob["params"]
    config = sampler_config(split=split)
    chosen = dispatch.triton_schedule(x, schedule, config or SamplerConfig())
    if schedule not in ("auto", "torch") and chosen != schedule:
        raise Unavailable(f"the {schedule} schedule does not run here (it would take the torch schedule)")
    gen = torch.Generator(device=device).manual_seed(0)
    return lambda: dispatch.sample(x, params, gen, schedule=schedule, config=config)


def _transformers(prob, case, device):
    hf = hf_chain(CONFIGS[case.params["config"]])
    if hf is None:
        raise Unavailable("transformers is not installed")
    gen = torch.Generator(device=device).manual_seed(0)
    return lambda: hf(prob["x"], gen)


def _reference(prob, case, device):
    gen = torch.Generator(device=device).manual_seed(0)
    return lambda: ref.sample(prob["x"], prob["params"], gen)


def _run(prob, case, device, extra: float = 0.0):
    """The public two-step API: ``SamplerPlan.plan`` once here (validation, schedule, workspace,
    per-row parameters on the device), then ``run`` alone is timed, with fixed float64 uniforms
    (a buffer an engine fills; the runner CUDA-graph-captures it for ``graph=True``). ``extra``
    (the regression gate's planted slowdown, bench/gate_proof.py, never a default): also sample
    the first ``max(1, round(extra x batch))`` rows again through a second plan."""
    from bench.runner import extra_rows
    from optimized.sampling import SamplerPlan
    x, params = prob["x"], prob["params"]
    plan = SamplerPlan()
    plan.plan(x, params)
    u = torch.rand(x.shape[0], generator=torch.Generator().manual_seed(1), dtype=torch.float64).to(device)
    if not extra:
        return lambda: plan.run(x, uniforms=u)
    r = extra_rows(x.shape[0], extra)
    plan2 = SamplerPlan()
    plan2.plan(x[:r], params)
    return lambda: (plan.run(x, uniforms=u), plan2.run(x[:r], uniforms=u[:r]))[0]


def _topk_multinomial(prob, case, device):
    """The floor a top-k sampler built on torch ops meets: torch.topk of k + 1 logits, softmax over
    them, torch.multinomial (k = the workload's top_k, else 50)."""
    k = CONFIGS[case.params["config"]].get("top_k", 50) + 1
    gen = torch.Generator(device=device).manual_seed(0)

    def run():
        vals, ids = torch.topk(prob["x"], k, dim=1)
        return ids.gather(1, torch.multinomial(torch.softmax(vals, dim=1), 1, generator=gen))[:, 0]
    return run


def _sort_top_p(prob, case, device):
    gen = torch.Generator(device=device).manual_seed(0)
    return lambda: sort_based_top_p(prob["x"], CONFIGS[case.params["config"]]["top_p"], gen)


def _multinomial(prob, case, device):
    gen = torch.Generator(device=device).manual_seed(0)
    return lambda: torch.multinomial(torch.softmax(prob["x"], -1), 1, generator=gen)


def _profile(prob, case, device, split):
    """The split schedule's kernels, one profiled call: per-kernel GPU time (torch.profiler),
    the host time of a call (mean of 20 after 3 warm-up calls), the rows redone."""
    import time
    from collections import defaultdict

    from torch.profiler import ProfilerActivity, profile

    from optimized.sampling import split_row
    if device != "cuda":
        raise Unavailable("profiles the CUDA kernels")
    x, params = prob["x"], prob["params"]
    rows = ref.resolve_params(params, x.shape[0], x.shape[1], torch.float32, device)
    cfg = SplitConfig(**split)
    u = torch.rand(x.shape[0], generator=torch.Generator().manual_seed(1), dtype=torch.float64).to(device)

    def call():
        return split_row.sort_free(x, rows.temperature, rows.top_k, rows.top_p, rows.min_p, u, config=cfg)

    def run() -> dict:
        redone = call().rows_redone
        for _ in range(3):
            call()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(20):
            call()
        torch.cuda.synchronize()
        host_ms = (time.perf_counter() - t0) / 20 * 1e3
        with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
            call()
            torch.cuda.synchronize()
        per = defaultdict(lambda: [0, 0.0])
        for ev in prof.events():
            if ev.device_type == torch.autograd.DeviceType.CUDA:
                per[ev.name][0] += 1
                per[ev.name][1] += ev.device_time_total / 1e3
        return dict(config=dict(vars(cfg)), call_ms=host_ms, rows_redone=redone,
                    gpu_sum_ms=round(sum(v[1] for v in per.values()), 4),
                    kernels={k: dict(count=v[0], ms=round(v[1], 4)) for k, v in per.items()})
    return run


def _empty_launch(prob, case, device):
    """The host time of one launch of an empty Triton kernel (perf_counter per launch, no sync
    between launches): the floor of every launch the split schedule makes."""
    from bench.timing import time_ms
    if device != "cuda":
        raise Unavailable("measures CUDA launches")
    t = torch.zeros(1, device=device)

    def run():
        host = time_ms(lambda: _empty_kernel[(1,)](t), device="cpu", repeats=case.params["launches"], budget_ms=None,
                       min_warmup=10, warmup_ms=0)
        torch.cuda.synchronize()
        return dict(host_us_median=host.median_ms * 1e3, host_us_min=host.min_ms * 1e3)
    return run


BUILDERS = {
    "sample": _sample,
    "transformers": _transformers,
    "reference": _reference,
    "sort_top_p": _sort_top_p,
    "run": _run,
    "topk_multinomial": _topk_multinomial,
    "torch_sort": lambda prob, case, device: lambda: torch.sort(prob["x"], dim=1, descending=True),
    "multinomial": _multinomial,
    "read_pass": lambda prob, case, device: lambda: prob["x"].amax(dim=1),
    "profile": _profile,
    "empty_launch": _empty_launch,
}

