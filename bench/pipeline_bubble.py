"""The pipeline bubble measured on a real 2-stage gloo pipeline (CPU processes), next to the closed
form (p - 1)/(m + p - 1) that reference.pipeline_parallel.simulate_schedule reproduces in exact
arithmetic.

    python bench/pipeline_bubble.py                      # p = 2, m = 1, 2, 4, 8, 16
    python bench/pipeline_bubble.py --stages 3 --repeats 5 --json /tmp/bubble.json
    python bench/pipeline_bubble.py --dim 64 --seq 16 --sleep-ms 400    # the work as waits (below)
    python bench/pipeline_bubble.py --core-check      # do two processes' matmuls run in parallel here?

The reference's ``pipeline_forward`` runs on the gloo pool of spec_tests/tensor_parallel/pool.py
(forked ranks, one per stage), every rank's model modules watched by the same forward hooks the
spec uses (spec_tests/pipeline_parallel/runs.py). A stage's *busy* interval for a micro-batch runs
from the pre-hook of its first module to the post-hook of its last (compute only: waiting for a
receive or a send is idle time); ``wall`` from the first busy start on any stage to the last busy
end; measured bubble = 1 - sum(busy) / (p x wall), the median of ``--repeats`` runs (one warm-up
run first). The model: ``--layers`` layers of dim ``--dim`` (heads of 64, SwiGLU 8/3 dim),
float32, a batch of ``--batch`` sequences of ``--seq`` tokens, equal layer counts per stage; the
micro-batches get smaller as m grows (batch / m sequences), so per-step overheads (the send, the
Python between modules) weigh more at large m. Each rank runs one thread; on a machine with fewer
free cores than stages the stages time-share and the bubble hides in the scheduler.

``--sleep-ms T``: each stage's work on the whole batch is, besides the (then tiny) model's compute,
a wait of T ms (a forward hook on each of its layers sleeps T / layers-per-stage x micro-batch /
batch): the processes, the sends and the schedule are real, the work does not compete for the
CPU -- as a host waits for its GPU. This shows the bubble where the CPUs cannot run two stages at
once (docs/pipeline_parallel.md: this machine's two vCPUs give one core's matmul throughput).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from reference import pipeline_parallel  # noqa: E402
from reference.model import ModelConfig, Transformer  # noqa: E402
from spec_tests.pipeline_parallel.runs import watch_modules  # noqa: E402
from spec_tests.tensor_parallel import pool  # noqa: E402


class _Reference:
    """The reference module as the pool's jobs see an implementation (``impl.get(name)``)."""

    concept = "pipeline_parallel"

    def get(self, name):
        return getattr(pipeline_parallel, name)


def _job(impl, rank, world, group, shape, m, sleep_ms=0.0):
    import torch.distributed as dist
    layers, dim, batch, seq = shape
    cfg = ModelConfig(vocab_size=256, dim=dim, n_layers=layers, n_heads=max(1, dim // 64), n_kv_heads=max(1, dim // 64),
                      max_seq_len=seq)
    model = Transformer(cfg, seed=0)
    tokens = torch.randint(0, 256, (batch, seq), generator=torch.Generator().manual_seed(1))
    impl.get("pipeline_forward")(model, tokens, 1, rank, world, group=group)       # warm-up
    dist.barrier(group=group)            # every stage starts the measured run together
    pool._STATE["log"] = []
    if sleep_ms:                         # the stage's work as a wait, like a host waiting for its GPU
        per_layer = sleep_ms / 1e3 / (layers / world) / batch
        for layer in model.model.layers:
            layer.register_forward_hook(lambda mod, args, out: time.sleep(per_layer * args[0].shape[0]))
    watch_modules(model)
    impl.get("pipeline_forward")(model, tokens, m, rank, world, group=group)
    return [e for e in pool._STATE["log"] if e[0] in ("pre", "post")]


def measure(impl, stages: int, shape, m: int, sleep_ms: float = 0.0) -> dict:
    outs = pool.run(impl, _job, stages, shape, m, sleep_ms, timeout=300)
    for o in outs:
        if o["error"]:
            raise RuntimeError(o["error"])
    layers = pipeline_parallel.partition_layers(shape[0], stages)
    spans = []
    for s, o in enumerate(outs):
        first = "embed" if s == 0 else f"layer{layers[s][0]}"
        last = "lm_head" if s == stages - 1 else f"layer{layers[s][1] - 1}"
        starts = [e[-1] for e in o["result"] if e[0] == "pre" and e[1] == first]
        ends = [e[-1] for e in o["result"] if e[0] == "post" and e[1] == last]
        spans.append(list(zip(starts, ends)))
    t0 = min(b for st in spans for b, _ in st)
    t1 = max(e for st in spans for _, e in st)
    busy = [sum(e - b for b, e in st) for st in spans]
    return {"wall": t1 - t0, "busy": busy, "bubble": 1 - sum(busy) / (stages * (t1 - t0))}


def _matmuls(seconds, queue):
    torch.set_num_threads(1)
    a = torch.randn(256, 256)
    start, n = time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        a @ a
        n += 1
    queue.put(n)


def core_check(seconds: float = 2.0) -> None:
    """Can this machine run two stages at once? 256x256 float32 matmuls in ``seconds``, one
    single-threaded process alone, then two side by side (forked)."""
    import multiprocessing as mp
    ctx = mp.get_context("fork")
    for k in (1, 2):
        queue = ctx.Queue()
        procs = [ctx.Process(target=_matmuls, args=(seconds, queue)) for _ in range(k)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        print(f"{k} process(es) side by side: matmuls per process in {seconds:g} s: {[queue.get() for _ in range(k)]}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stages", type=int, default=2)
    ap.add_argument("--micro", default="1,2,4,8,16")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sleep-ms", type=float, default=0.0,
                    help="each stage's work on the whole batch as a wait of this many ms (split over its layers and "
                         "micro-batches), on top of the model's own compute")
    ap.add_argument("--json", default=None)
    ap.add_argument("--core-check", action="store_true",
                    help="only measure whether two processes' matmuls run in parallel on this machine")
    args = ap.parse_args(argv)
    if args.core_check:
        core_check()
        return
    impl, shape = _Reference(), (args.layers, args.dim, args.batch, args.seq)
    rows = []
    work = f", plus {args.sleep_ms:g} ms of waiting per stage per batch" if args.sleep_ms else ""
    print(f"p={args.stages}, {args.layers} layers of dim {args.dim}, batch {args.batch} x seq {args.seq}, float32{work}, "
          f"gloo on {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(f"{'m':>3} {'closed form':>12} {'simulated':>10} {'measured':>9} {'wall ms':>8} {'busy ms per stage':>20}")
    for m in [int(x) for x in args.micro.split(",")]:
        runs = [measure(impl, args.stages, shape, m, args.sleep_ms) for _ in range(args.repeats)]
        mid = sorted(runs, key=lambda r: r["bubble"])[len(runs) // 2]
        sim = pipeline_parallel.simulate_schedule(pipeline_parallel.pipeline_schedule(args.stages, m))["bubble"]
        closed = pipeline_parallel.bubble_fraction(args.stages, m)
        rows.append({"m": m, "closed_form": float(closed), "simulated": float(sim),
                     "measured": statistics.median(r["bubble"] for r in runs),
                     "wall_s": mid["wall"], "busy_s": mid["busy"]})
        print(f"{m:>3} {str(closed):>12} {float(sim):>10.3f} {rows[-1]['measured']:>9.3f} {mid['wall'] * 1e3:>8.1f} "
              f"{' '.join(f'{b * 1e3:.1f}' for b in mid['busy']):>20}")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "when": time.strftime("%Y-%m-%d %H:%M"),
                                               "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
