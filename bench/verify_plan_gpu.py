"""GPU check and timing of the verifier's plan/run API (issue 27, part 2). Run from the repo root:

    python bench/verify_plan_gpu.py

(a) run == verify (the reference's row walk) token for token on random inputs at 256 x γ 4 x
131,072 and 64 x γ 8 x 32,768 fp32 (per-row γ, a quarter of the rows greedy, NaN padding), run
eager and CUDA-graph-replayed after in-place updates of the inputs (two new steps), the one-call
optimized verify too; the pinned corner cases of the spec (the CDF summed in token order, an
empty residual: rows the Triton draw flags and the exact kernel redraws) through the plan path;
the reference VerifyPlan captured at a small vocabulary. (b) median times (CUDA events,
triton.testing.do_bench) of run graph-replayed, run eager, verify one-call, the vectorised
PyTorch rejection sampler (vLLM's rule: bench/cases/speculative.py), one read of p and q.
Exit status 1 if any check fails.
"""
from __future__ import annotations

import sys
import time

import torch
import triton.testing

import optimized.speculative as opt
import reference.speculative as ref
from bench.cases.speculative import torch_rejection_sampler
from bench.timing import cuda_graph

DEV = torch.device("cuda")
FAILS: list[str] = []


def inputs(batch, gamma, vocab, seed, *, ragged=True, planned=None):
    """Random p, q, drafts and uniforms; ``ragged``: per-row draft lengths (NaN / -1 padding past
    them) and greedy rows, drawn from ``seed`` or, for a replay, ``planned`` = (lens, greedy) of
    the plan, so the new values pad exactly the planned positions."""
    g = torch.Generator(device=DEV).manual_seed(seed)
    logits = torch.randn(batch, gamma + 1, vocab, generator=g, device=DEV) * 4.0
    p = torch.softmax(logits, dim=2)
    q = torch.softmax(logits[:, :gamma] + torch.randn(batch, gamma, vocab, generator=g, device=DEV), dim=2)
    x = torch.multinomial(q.reshape(-1, vocab), 1, generator=g).reshape(batch, gamma)
    u = torch.rand(batch, gamma + 1, generator=g, dtype=torch.float64, device=DEV)
    lens = greedy = None
    if ragged:
        cpu = torch.Generator().manual_seed(seed)
        lens = torch.randint(0, gamma + 1, (batch,), generator=cpu)
        lens[::2] = gamma
        greedy = (torch.rand(batch, generator=cpu) < 0.25).tolist()
        if planned is not None:
            lens, greedy = torch.tensor(planned[0]), list(planned[1])
        pos = torch.arange(gamma + 1, device=DEV)
        ld = lens.to(DEV)
        p = p.masked_fill((pos[None, :] > ld[:, None])[:, :, None], float("nan"))
        q = q.masked_fill((pos[None, :gamma] >= ld[:, None])[:, :, None], float("nan"))
        x = x.masked_fill(pos[None, :gamma] >= ld[:, None], -1)
        lens = lens.tolist()
    return dict(target_probs=p, draft_probs=q, draft_tokens=x, uniforms=u, draft_lens=lens, greedy=greedy)


def same(what, got, want):
    ok = torch.equal(got[0].cpu(), want[0].cpu()) and torch.equal(got[1].cpu(), want[1].cpu())
    rows = ((got[0].cpu() != want[0].cpu()).any(1) | (got[1].cpu() != want[1].cpu())).sum().item()
    print(f"  {'ok  ' if ok else 'FAIL'} {what}" + ("" if ok else f": {rows} rows differ"))
    if not ok:
        FAILS.append(what)


def check_shape(batch, gamma, vocab):
    print(f"check {batch} x γ {gamma} x {vocab} fp32")
    kw = inputs(batch, gamma, vocab, seed=1)
    t0 = time.time()
    want = ref.verify(**kw)
    print(f"  (reference verify: {time.time() - t0:.1f} s; mean accepted {want.num_accepted.float().mean():.2f})")
    same("optimized verify (one call)", opt.verify(**kw), want)
    args = (kw["target_probs"], kw["draft_probs"], kw["draft_tokens"])
    plan = opt.VerifyPlan()
    plan.plan(*args, draft_lens=kw["draft_lens"], greedy=kw["greedy"])
    same("run eager", plan.run(*args, uniforms=kw["uniforms"]), want)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        plan.run(*args, uniforms=kw["uniforms"])
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = plan.run(*args, uniforms=kw["uniforms"])
    for seed in (2, 3):
        new = inputs(batch, gamma, vocab, seed=seed, planned=(kw["draft_lens"], kw["greedy"]))
        for k in ("target_probs", "draft_probs", "draft_tokens", "uniforms"):
            kw[k].copy_(new[k])
        graph.replay()
        torch.cuda.synchronize()
        same(f"run graph-replayed after an in-place update (seed {seed})", (out[0].clone(), out[1].clone()),
             ref.verify(**new))
    # n-gram drafts (no draft probabilities), eager
    nk = dict(kw, draft_probs=None)
    plan2 = opt.VerifyPlan()
    plan2.plan(nk["target_probs"], None, nk["draft_tokens"], draft_lens=nk["draft_lens"], greedy=nk["greedy"])
    same("run eager, draft_probs None", plan2.run(nk["target_probs"], None, nk["draft_tokens"], uniforms=nk["uniforms"]),
         ref.verify(**nk))


def check_pinned():
    print("check the spec's pinned cases through plan + run (opt and ref)")
    from spec_tests.speculative.test_verify import PINNED
    for name, pin in PINNED.items():
        kw = {k: (v.to(DEV) if isinstance(v, torch.Tensor) else v) for k, v in pin.kwargs().items()}
        want = ref.verify(**kw)
        for mod in (opt, ref):
            plan = mod.VerifyPlan()
            plan.plan(kw["target_probs"], kw["draft_probs"], kw["draft_tokens"], draft_lens=kw.get("draft_lens"),
                      greedy=kw.get("greedy"))
            got = plan.run(kw["target_probs"], kw["draft_probs"], kw["draft_tokens"], uniforms=kw["uniforms"])
            ok = torch.equal(got[0].cpu(), want[0].cpu()) and got[0].cpu().tolist() == pin.tokens
            if not ok:
                FAILS.append(f"{mod.__name__} pinned {name}")
                print(f"  FAIL {mod.__name__}: {name}: {got[0].tolist()} vs pinned {pin.tokens}")
    print("  done")


def check_reference_graph():
    print("check reference.VerifyPlan captured in a CUDA graph (16 x γ 4 x 1000)")
    kw = inputs(16, 4, 1000, seed=5)
    args = (kw["target_probs"], kw["draft_probs"], kw["draft_tokens"])
    plan = ref.VerifyPlan()
    plan.plan(*args, draft_lens=kw["draft_lens"], greedy=kw["greedy"])
    out = cuda_graph_out(lambda: plan.run(*args, uniforms=kw["uniforms"]))
    new = inputs(16, 4, 1000, seed=6, planned=(kw["draft_lens"], kw["greedy"]))
    for k in ("target_probs", "draft_probs", "draft_tokens", "uniforms"):
        kw[k].copy_(new[k])
    out[0].replay()
    torch.cuda.synchronize()
    same("reference run graph-replayed", (out[1][0].clone(), out[1][1].clone()), ref.verify(**new))


def cuda_graph_out(fn):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out


def timings(batch, gamma, vocab):
    kw = inputs(batch, gamma, vocab, seed=11, ragged=False)
    p, q, x, u = kw["target_probs"], kw["draft_probs"], kw["draft_tokens"], kw["uniforms"]
    plan = opt.VerifyPlan()
    plan.plan(p, q, x)
    u32 = u[:, :gamma].float().contiguous()
    fns = {
        "run (graph)": cuda_graph(lambda: plan.run(p, q, x, uniforms=u)),
        "run (eager)": lambda: plan.run(p, q, x, uniforms=u),
        "verify (one call)": lambda: opt.verify(p, q, x, uniforms=u),
        "vectorised PyTorch rejection sampler (vLLM's rule), graph": cuda_graph(lambda: torch_rejection_sampler(p, q, x, u32)),
        "vectorised PyTorch rejection sampler (vLLM's rule), eager": lambda: torch_rejection_sampler(p, q, x, u32),
        "one read of p and q (graph)": cuda_graph(lambda: (p.amax(), q.amax())),
    }
    print(f"time {batch} x γ {gamma} x {vocab} fp32 (median ms, CUDA events; p+q = "
          f"{(p.numel() + q.numel()) * 4 / 1e9:.2f} GB)")
    res = {}
    for name, fn in fns.items():
        res[name] = triton.testing.do_bench(fn, warmup=50, rep=300, return_mode="median")
        print(f"  {name:60s} {res[name]:8.4f} ms")
    peer = res["vectorised PyTorch rejection sampler (vLLM's rule), graph"]
    floor = res["one read of p and q (graph)"]
    print(f"  run (graph) vs the peer (graph): {peer / res['run (graph)']:.2f}x faster; "
          f"vs one read of p and q: {res['run (graph)'] / floor:.2f}x its time")


def main():
    print(torch.cuda.get_device_name(), "torch", torch.__version__)
    check_pinned()
    for shape in ((256, 4, 131072), (64, 8, 32768)):   # timings first: the device call is short
        timings(*shape)
    for shape in ((64, 8, 32768), (256, 4, 131072)):
        check_shape(*shape)
    check_reference_graph()
    print("FAILED: " + "; ".join(FAILS) if FAILS else "all checks passed")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
