"""Speculative verification (course 05.08-05.10): the per-row, per-position reference against the
batched optimized verifier, one whole ``verify(..., uniforms=u)`` call (validation, acceptance,
residual, draw) timed alternately, median of the rounds (docs/speculative.md).

Workloads (float32 probabilities from a seeded generator): the target is softmax(4 randn)
(LLM-like peakedness); the draft is softmax of the target's logits plus noise x randn: "good draft"
(noise 1), "poor draft" (noise 4: most rows reject the first draft) and "n-gram" (draft_probs=None,
drafts from the good draft). Drafts are drawn from the draft distribution. CPU: 64 x gamma 4 x
32,000, one intra-op thread (the CPU time of the process is recorded too: on a shared machine the wall time includes
waiting for a core); CUDA: 256 x gamma 4 x 128,256, the optimized verifier's torch draw and its
Triton draw side by side (``verify_with(config=VerifyConfig(draw=...))``). Every implementation
must emit the reference's tokens and counts before anything is timed.

Plan once, run many (CUDA, "good draft", float32, 256 x gamma 4 x 131,072 and 64 x gamma 8 x
32,768; tag "plan"): providers
    run (graph)     the public two-step API: ``VerifyPlan.plan`` once (setup), ``run`` timed,
                    CUDA-graph replay (what an engine does)
    run (eager)     the same run launched from Python
    verify (call)   the one-call ``verify``: its validation (a sync) + plan + run
    vectorised PyTorch rejection sampler (vLLM's rule)   :func:`torch_rejection_sampler`, the
                    peer a user would write instead (graph-replayed)
    one read of p and q   ``p.amax(); q.amax()`` (graph-replayed): the memory floor of a verifier
                    that reads every probability once
The eager run's tokens are checked against the reference before timing (graph replays after
in-place updates: spec_tests/speculative/test_plan_run.py's GPU test).
"""
from __future__ import annotations

import torch

import optimized.speculative as opt
import reference.speculative as ref
from bench.runner import Case, P

CONFIGS = {"good draft": 1.0, "poor draft": 4.0, "n-gram": 1.0}


def make_inputs(batch: int, gamma: int, vocab: int, config: str, device, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, gamma + 1, vocab, generator=g) * 4.0
    p = torch.softmax(logits, dim=2)
    q = torch.softmax(logits[:, :gamma] + CONFIGS[config] * torch.randn(batch, gamma, vocab, generator=g), dim=2)
    tokens = torch.multinomial(q.reshape(-1, vocab), 1, generator=g).reshape(batch, gamma)
    u = torch.rand(batch, gamma + 1, generator=g, dtype=torch.float64)
    return dict(target_probs=p.to(device), draft_probs=None if config == "n-gram" else q.to(device),
                draft_tokens=tokens.to(device), uniforms=u.to(device))


SHAPES = {"cpu": (64, 4, 32000), "cuda": (256, 4, 128256)}
ALTERNATING = dict(repeats=1, budget_ms=None, min_warmup=2, warmup_ms=0, flush_l2=False, sync=True)


def _case(config: str, device: str, shape, tags=(), rounds: int = 15) -> Case:
    batch, gamma, vocab = shape
    providers = (P("optimized", draw="auto"), P("reference"))
    if device == "cuda":
        providers = (P("optimized_triton", "optimized", draw="triton"), P("optimized", draw="torch"), P("reference"))
    return Case(f"{config}, {batch} x gamma {gamma} x {vocab}",
                dict(config=config, batch=batch, gamma=gamma, vocab=vocab, dtype="float32",
                     threads=1 if device == "cpu" else None),
                providers, metric="ms", devices=(device,), tags=tags, timing=dict(ALTERNATING, rounds=rounds))


PLAN_SHAPES = [(256, 4, 131072), (64, 8, 32768)]
PLAN_PROVIDERS = (P("run (graph)", "run", graph=True), P("run (eager)", "run"), P("verify (call)", "call"),
                  P("vectorised PyTorch rejection sampler (vLLM's rule)", "torch_sampler", graph=True),
                  P("one read of p and q", "read", graph=True))


def _plan_case(shape) -> Case:
    batch, gamma, vocab = shape
    return Case(f"plan/run, good draft, {batch} x gamma {gamma} x {vocab}",
                dict(config="good draft", batch=batch, gamma=gamma, vocab=vocab, dtype="float32", threads=None),
                PLAN_PROVIDERS, metric="ms", devices=("cuda",), tags=("plan",),
                timing=dict(ALTERNATING, rounds=5, sync=True))


CASES = ([_case(c, "cpu", SHAPES["cpu"]) for c in CONFIGS]
         + [_case(c, "cuda", SHAPES["cuda"], rounds=3) for c in CONFIGS]
         + [_plan_case(shape) for shape in PLAN_SHAPES]
         + [_case(c, "cpu", (4, 2, 100), ("smoke",), rounds=2) for c in ("good draft", "n-gram")])


def setup(case, device):
    p = case.params
    if p["threads"]:
        torch.set_num_threads(p["threads"])
    return make_inputs(p["batch"], p["gamma"], p["vocab"], p["config"], device)


def check(kw, case, device) -> dict:
    """Every timed implementation emits the reference's tokens and counts (else nothing is timed)."""
    want = ref.verify(**kw)
    out = dict(ok=True, mean_accepted=float(want.num_accepted.float().mean()))
    for p in case.providers:
        if p.build == "optimized":
            got = opt.verify_with(**kw, config=opt.VerifyConfig(draw=p.options["draw"]))
        elif p.build == "run" and not p.graph:
            plan = opt.VerifyPlan()
            plan.plan(kw["target_probs"], kw["draft_probs"], kw["draft_tokens"])
            got = plan.run(kw["target_probs"], kw["draft_probs"], kw["draft_tokens"], uniforms=kw["uniforms"])
        else:
            continue
        bad = ((got.tokens.cpu() != want.tokens.cpu()).any(1)
               | (got.num_accepted.cpu() != want.num_accepted.cpu())).nonzero().flatten().tolist()
        out[f"{p.name}_rows_differing"] = len(bad)
        if bad:
            r = bad[0]
            out.update(ok=False, first_differing_row=dict(
                row=r, got=got.tokens[r].tolist(), accepted=int(got.num_accepted[r]),
                reference=want.tokens[r].tolist(), reference_accepted=int(want.num_accepted[r])))
    return out


def _timed(kw: dict, config):
    """One optimized call with ``config`` (made once, outside the timed call)."""
    return lambda: opt.verify_with(**kw, config=config)


def torch_rejection_sampler(p: torch.Tensor, q: torch.Tensor, x: torch.Tensor, u: torch.Tensor,
                            generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The peer: vLLM's rejection rule, batched in plain torch ops (no validation, no per-row
    work). p (B, γ + 1, V), q (B, γ, V), x (B, γ) int64, u (B, γ) acceptance uniforms. Accept x_i
    iff p_i(x_i) / q_i(x_i) >= u_i (vLLM's float32 test); the accepted run is the leading run of
    accepts (a cumulative product); every position's recovered token is drawn from max(p - q, 0)
    and the bonus from p_γ by the exponential race argmax(w / e), e ~ Exp(1), one noise vector
    per row (vLLM v1's recovered tokens); the row emits its accepted drafts and the token at its
    first rejection (or the bonus). Returns (tokens (B, γ + 1) with -1 after the emitted ones,
    num_accepted (B,))."""
    b, g = x.shape
    px = p[:, :g].gather(2, x[:, :, None]).squeeze(2)
    qx = q.gather(2, x[:, :, None]).squeeze(2)
    accept = px / qx >= u
    k = accept.to(torch.int64).cumprod(dim=1).sum(dim=1)
    e = torch.empty((b, 1, p.shape[2]), dtype=p.dtype, device=p.device).exponential_(generator=generator)
    recovered = ((p[:, :g] - q).clamp_(min=0) / e).argmax(dim=2)          # (B, γ)
    bonus = (p[:, g] / e[:, 0]).argmax(dim=1)                              # (B,)
    emitted = torch.cat([recovered, bonus[:, None]], dim=1).gather(1, k[:, None])
    cols = torch.arange(g + 1, device=p.device)
    tokens = torch.where(cols[None, :g] < k[:, None], x, -1)
    tokens = torch.cat([tokens, torch.full_like(k[:, None], -1)], dim=1).scatter_(1, k[:, None], emitted)
    return tokens, k


def _run(kw, case, device, extra: float = 0.0):
    """The public two-step API: one plan (setup), then ``run`` alone on the same tensors.
    ``extra`` (the regression gate's planted slowdown, bench/gate_proof.py, never a default): also
    verify the first ``max(1, round(extra x batch))`` rows again through a second plan."""
    from bench.runner import extra_rows
    plan = opt.VerifyPlan()
    plan.plan(kw["target_probs"], kw["draft_probs"], kw["draft_tokens"])
    args = (kw["target_probs"], kw["draft_probs"], kw["draft_tokens"])
    u = kw["uniforms"]
    if not extra:
        return (lambda: plan.run(*args, uniforms=u)), {}
    r = extra_rows(args[0].shape[0], extra)
    more = tuple(a[:r] if a is not None else None for a in args)
    plan2 = opt.VerifyPlan()
    plan2.plan(*more)
    return (lambda: (plan.run(*args, uniforms=u), plan2.run(*more, uniforms=u[:r]))[0]), {}


def _torch_sampler(kw, case, device):
    p, q, x, u = kw["target_probs"], kw["draft_probs"], kw["draft_tokens"], kw["uniforms"]
    g = x.shape[1]
    u = u[:, :g].to(p.dtype).contiguous()
    gen = torch.Generator(device=p.device).manual_seed(0) if p.device.type != "cuda" else None
    return lambda: torch_rejection_sampler(p, q, x, u, gen)


def _read(kw, case, device):
    p, q = kw["target_probs"], kw["draft_probs"]
    return lambda: (p.amax(), q.amax())


BUILDERS = {
    "reference": lambda kw, case, device: lambda: ref.verify(**kw),
    "optimized": lambda kw, case, device, draw: _timed(kw, opt.VerifyConfig(draw=draw)),
    "run": _run,
    "call": lambda kw, case, device: lambda: opt.verify(**kw),
    "torch_sampler": _torch_sampler,
    "read": _read,
}
