"""Multi-LoRA batching (optimized/lora.py: base matmul + BGMV Triton kernels) against the base
matmul alone, a per-request loop and torch's gather-then-bmm, in the same run (docs/lora.md).

Shapes (issue 25): a 4096 x 4096 bf16 layer, 32 adapters of rank 16, a decode batch of 64 rows,
each row a request naming a random adapter or none (-1, one row in 8); also batch 1 and 256.
Providers (the base matmul first: the runner's ``speedups`` are each provider's median time / the
base's, so "ours (graph)" there is the overhead the issue bounds at 1.3x):
    base matmul (graph)   ``x @ W.T`` alone, CUDA-graph replay: the cost without adapters
    ours (graph)          ``lora_apply`` (the kernel path past the input checks), graph replay
    ours (call)           ``lora_forward`` itself, eager (checks, which read the ids: a host sync)
    gather + bmm (graph)  torch: ``A[ids]``, ``B[ids]`` gathered per row (copies), two ``bmm``
    per-request loop      one request at a time: its base row plus its adapter (issue 25's peer: >= 10x)
Metric: microseconds per call. Correctness first (``check``): ours on the first and last rows
against the float64 oracle under the tolerance rule (the reference on those rows is the rule's
reference). Tag ``smoke``: a tiny CPU shape, the kernels under the Triton interpreter.

    python -m bench run --concept lora --out docs/results/lora_h100.json
"""
from __future__ import annotations

import torch

import optimized.lora as ol
import reference.lora as rl
from bench.runner import Case, P
from conformance.tolerance import assert_close_to_oracle

DEFAULT_TIMING = dict(warmup_ms=25, budget_ms=200)
MAIN = (P("base matmul (graph)", "base", graph=True), P("ours (graph)", "apply", graph=True), P("ours (call)", "ours"),
        P("gather + bmm (graph)", "bmm", graph=True), P("per-request loop", "loop"))


def _case(batch, d, adapters, rank, providers, tags=(), devices=("cuda",), timing=None) -> Case:
    return Case(f"lora b{batch} d{d} n{adapters} r{rank}", dict(batch=batch, d_in=d, d_out=d, adapters=adapters,
                                                                rank=rank, alpha=32.0, dtype="bf16"),
                tuple(providers), metric="us", devices=devices, tags=tags, timing=timing or {})


CASES = ([_case(b, 4096, 32, 16, MAIN) for b in (1, 64, 256)]
         + [_case(8, 64, 4, 4, (P("ours (call)", "ours"), P("reference", "reference"), P("per-request loop", "loop")),
                  ("smoke",), devices=("cpu",), timing=dict(repeats=2, budget_ms=None, min_warmup=1, warmup_ms=0))])


def setup(case, device, seed: int = 0):
    p = case.params
    g = torch.Generator(device=device).manual_seed(seed)
    b, d_in, d_out, n, r = p["batch"], p["d_in"], p["d_out"], p["adapters"], p["rank"]

    def w(*shape, std):
        return (torch.randn(shape, device=device, generator=g) * std).to(torch.bfloat16)
    ids = torch.randint(0, n, (b,), device=device, generator=g)
    ids = torch.where(torch.arange(b, device=device) % 8 == 7, -1, ids)       # one row in 8: no adapter
    return dict(x=w(b, d_in, std=1.0), base_weight=w(d_out, d_in, std=d_in ** -0.5),
                lora_a=w(n, r, d_in, std=d_in ** -0.5), lora_b=w(n, d_out, r, std=1.0 / p["alpha"]),
                adapter_ids=ids, alpha=p["alpha"])


def _args(prob):
    return (prob["x"], prob["base_weight"], prob["lora_a"], prob["lora_b"], prob["adapter_ids"], prob["alpha"])


def check(prob, case, device) -> dict:
    """Ours on the first and last rows against the float64 oracle (tolerance rule)."""
    rows = sorted({0, prob["x"].shape[0] - 1})
    sub = dict(prob, x=prob["x"][rows], adapter_ids=prob["adapter_ids"][rows])
    ours = ol.lora_forward(*_args(prob))[rows]
    low = rl.lora_forward(*_args(sub))
    x, w = sub["x"].double(), prob["base_weight"].double()
    oracle = x @ w.T
    for i, a in enumerate(sub["adapter_ids"].tolist()):
        if a >= 0:
            oracle[i] += prob["alpha"] / prob["lora_a"].shape[1] * (
                prob["lora_b"][a].double() @ (prob["lora_a"][a].double() @ x[i]))
    out = dict(ok=True, rows=rows, kernel=ol.kernel_supports(prob["x"]),
               max_abs_err_vs_oracle=float((ours.double() - oracle).abs().max()),
               reference_err=float((low.double() - oracle).abs().max()))
    try:
        assert_close_to_oracle(ours, low, oracle, name="lora vs float64 oracle")
    except AssertionError as exc:
        out.update(ok=False, error=str(exc).splitlines()[0])
    return out


def _bmm(prob, case, device):
    x, w, a, b, ids, alpha = _args(prob)
    scaling = alpha / a.shape[1]

    def run():
        safe = ids.clamp(min=0)
        keep = (ids >= 0).to(x.dtype)[:, None, None]
        v = torch.bmm(x[:, None, :], a[safe].transpose(1, 2))                  # (B, 1, r)
        delta = torch.bmm(v, b[safe].transpose(1, 2) * keep)                   # (B, 1, d_out)
        return x @ w.T + scaling * delta[:, 0]
    return run


def _loop(prob, case, device):
    """One request at a time (ids read on the host once, outside the timed call)."""
    x, w, a, b, ids, alpha = _args(prob)
    scaling = alpha / a.shape[1]
    plan = [(i, int(t)) for i, t in enumerate(ids.tolist())]

    def run():
        out = []
        for i, t in plan:
            row = x[i:i + 1] @ w.T
            if t >= 0:
                row = row + scaling * ((x[i:i + 1] @ a[t].T) @ b[t].T)
            out.append(row)
        return torch.cat(out)
    return run


BUILDERS = {
    "base": lambda prob, case, device: (lambda: prob["x"] @ prob["base_weight"].T),
    "apply": lambda prob, case, device: (lambda: ol.lora_apply(*_args(prob))),
    "ours": lambda prob, case, device: (lambda: ol.lora_forward(*_args(prob))),
    "reference": lambda prob, case, device: (lambda: rl.lora_forward(*_args(prob))),
    "bmm": _bmm,
    "loop": _loop,
}
