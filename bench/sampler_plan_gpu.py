"""SamplerPlan on the GPU (issue 27, part 3): run == sample token for token, then timings.

Run from the repository root on the device machine:   python bench/sampler_plan_gpu.py
(about a minute: the eight 256 x 128,256 fp32 workloads of bench/cases/sampling.py).

Per workload: (1) plan once on the logits buffer; an eager run and sample(uniforms=u) must give
the same tokens; (2) capture run in a CUDA graph (after a warm-up run on a side stream), then three
times write new logits and new uniforms into the captured buffers in place, replay, and compare
with sample on those values; (3) median times (CUDA events, 30 rounds after warm-up) of: run (graph
replay), run (eager), sample (the public one-call function), torch.topk(k+1) + multinomial, and one
read pass over the logits (x.amax(dim=1)). Prints one line per workload and a summary; exits 1 if
any token differs."""
import statistics
import sys

import torch

from bench.cases.sampling import CONFIGS, make_logits
from optimized.sampling import SamplerPlan, sample
from reference.sampling import SamplingParams

assert torch.cuda.is_available(), "needs a CUDA device"
dev = "cuda"
BATCH, VOCAB, ROUNDS = 256, 128256, 30


def timed(fn, rounds=ROUNDS):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(rounds):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        out.append(a.elapsed_time(b))
    return statistics.median(out)


def uniforms(seed):
    return torch.rand(BATCH, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).to(dev)


failures = 0
rows = []
for dist in ("peaked", "flat"):
    for name, cfg in CONFIGS.items():
        params = SamplingParams(**cfg)
        buf = make_logits(BATCH, VOCAB, dist, dev)
        u = uniforms(1)
        plan = SamplerPlan()
        plan.plan(buf, params)
        eager = plan.run(buf, uniforms=u)
        want = sample(buf, params, uniforms=u)
        diff = int((eager != want).sum())
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            plan.run(buf, uniforms=u)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = plan.run(buf, uniforms=u)
        replay_diff = []
        for step in range(3):
            buf.copy_(make_logits(BATCH, VOCAB, dist, dev, seed=10 + step))
            u.copy_(uniforms(20 + step))
            graph.replay()
            torch.cuda.synchronize()
            replay_diff.append(int((out != sample(buf, params, uniforms=u)).sum()))
        failures += diff + sum(replay_diff)
        k = cfg.get("top_k", 50) + 1
        gen = torch.Generator(device=dev).manual_seed(0)

        def topk_multinomial():
            vals, ids = torch.topk(buf, k, dim=1)
            return ids.gather(1, torch.multinomial(torch.softmax(vals, dim=1), 1, generator=gen))[:, 0]

        t = dict(run_graph=timed(graph.replay), run_eager=timed(lambda: plan.run(buf, uniforms=u)),
                 sample=timed(lambda: sample(buf, params, uniforms=u)), topk_multinomial=timed(topk_multinomial),
                 read=timed(lambda: buf.amax(dim=1)))
        rows.append((dist, name, t))
        print(f"{dist:6s} {name:26s} eager diff {diff}/{BATCH}, replay diffs {replay_diff}  "
              + "  ".join(f"{key} {v:.3f} ms" for key, v in t.items()), flush=True)
        del graph, out

print("\nworkload                          run(graph)  run(eager)  sample  topk+multinomial  read")
for dist, name, t in rows:
    print(f"{dist:6s} {name:26s} {t['run_graph']:10.3f} {t['run_eager']:11.3f} {t['sample']:7.3f} "
          f"{t['topk_multinomial']:17.3f} {t['read']:5.3f}")
print(f"\nrun(graph) <= 0.6 ms on {sum(t['run_graph'] <= 0.6 for _, _, t in rows)} of {len(rows)} workloads; "
      f"token mismatches: {failures}")
sys.exit(1 if failures else 0)
