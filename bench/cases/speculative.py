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


CASES = ([_case(c, "cpu", SHAPES["cpu"]) for c in CONFIGS]
         + [_case(c, "cuda", SHAPES["cuda"], rounds=3) for c in CONFIGS]
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
        if p.name == "reference":
            continue
        got = opt.verify_with(**kw, config=opt.VerifyConfig(draw=p.options["draw"]))
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


BUILDERS = {
    "reference": lambda kw, case, device: lambda: ref.verify(**kw),
    "optimized": lambda kw, case, device, draw: _timed(kw, opt.VerifyConfig(draw=draw)),
}
