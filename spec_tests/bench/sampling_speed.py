"""Sampling speed: the sort-based reference vs the sort-free optimized sampler (and transformers'
warpers + torch.multinomial, what ``generate(do_sample=True)`` runs), timed alternately in one run.

    PYTHONPATH=. python3 spec_tests/bench/sampling_speed.py                 # 2-core CPU: 64 x 32,000
    PYTHONPATH=. python3 spec_tests/bench/sampling_speed.py --device cuda   # H200: 256 x 128,256

Workloads (fp32 logits from a seeded generator): "peaked" = 4 * randn (top-1 probability ~0.27,
top-p 0.9 keeps ~190 of 32,000 tokens: LLM-like), "flat" = randn (top-p 0.9 keeps ~60% of the
vocabulary: the worst case for a top-p threshold search). Each timed call is a whole
``sample(logits, params, generator)``: validation, filters, draw. On CUDA every call is timed with
CUDA events after a synchronize (end-to-end latency, launch overheads included), calls of the
implementations interleaved round by round, median reported. Correctness is checked first, on
the device: optimized probs == reference probs (same support, max abs difference), same tokens for
the same uniforms, NaN rows rejected, the fused Triton tail == the torch tail.
With OUT set (the device machine), the JSON goes to $OUT/sampling_speed_<device>.json.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import torch

import optimized.sampling as opt
import reference.sampling as ref
from reference.sampling import SamplingParams

CONFIGS = {
    "T0.7 top-k 50 top-p 0.9": dict(temperature=0.7, top_k=50, top_p=0.9),
    "top-p 0.9": dict(top_p=0.9),
}


def make_logits(batch: int, vocab: int, dist: str, device, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, vocab, generator=g) * (4.0 if dist == "peaked" else 1.0)
    return x.to(device)


def hf_chain(params: dict):
    """transformers' warpers in generate()'s order, then softmax + multinomial (None if missing)."""
    try:
        from transformers.generation import logits_process as lp
    except Exception:  # pragma: no cover - transformers is a test extra
        return None
    procs = []
    if params.get("temperature", 1.0) != 1.0:
        procs.append(lp.TemperatureLogitsWarper(params["temperature"]))
    if params.get("top_k", 0):
        procs.append(lp.TopKLogitsWarper(params["top_k"]))
    if params.get("top_p", 1.0) < 1.0:
        procs.append(lp.TopPLogitsWarper(params["top_p"]))
    ids = None

    def run(x, generator):
        nonlocal ids
        if ids is None or ids.shape[0] != x.shape[0]:
            ids = torch.zeros(x.shape[0], 1, dtype=torch.long, device=x.device)
        s = x
        for p in procs:
            s = p(ids, s)
        return torch.multinomial(torch.softmax(s, dim=-1), 1, generator=generator)[:, 0]
    return run


def check_correctness(device, vocab: int) -> dict:
    """Optimized == reference on a few rows of every workload, on this device."""
    out = {}
    for dist in ("peaked", "flat"):
        x = make_logits(8, vocab, dist, device, seed=1)
        for name, kw in CONFIGS.items():
            p = SamplingParams(**kw)
            pr, po = ref.sampling_probs(x, p), opt.sampling_probs(x, p)
            same_support = bool(torch.equal(pr > 0, po > 0))
            u = torch.rand(8, generator=torch.Generator().manual_seed(2), dtype=torch.float64).to(device)
            tr, to = ref.sample(x, p, uniforms=u), opt.sample(x, p, uniforms=u)
            out[f"{dist} / {name}"] = dict(same_support=same_support,
                                           max_abs_diff=float((pr - po).abs().max()),
                                           kept=int((pr > 0).sum()), same_tokens=int((tr == to).sum()), rows=8)
    x = make_logits(4, vocab, "peaked", device)
    x[2, 7] = float("nan")
    try:
        opt.sample(x, SamplingParams(top_k=50, top_p=0.9), torch.Generator(device=device).manual_seed(0))
        out["nan_rejected"] = False
    except ValueError as exc:
        out["nan_rejected"] = "row 2" in str(exc)
    ints = torch.randint(-3, 4, (16, vocab), generator=torch.Generator().manual_seed(3)).float().to(device)
    p = SamplingParams(temperature=0.8, top_k=50, top_p=0.9)
    u = torch.rand(16, generator=torch.Generator().manual_seed(4), dtype=torch.float64).to(device)
    out["ties_same_tokens"] = int((ref.sample(ints, p, uniforms=u) == opt.sample(ints, p, uniforms=u)).sum())
    if device == "cuda":
        x = make_logits(64, vocab, "peaked", device, seed=5)
        u = torch.rand(64, generator=torch.Generator().manual_seed(6), dtype=torch.float64).to(device)
        p = SamplingParams(temperature=0.7, top_k=50, top_p=0.9, min_p=0.02)
        saved = opt.FUSED
        try:
            opt.FUSED = True
            a = opt.sample(x, p, uniforms=u)
            opt.FUSED = False
            b = opt.sample(x, p, uniforms=u)
            out["fused_equals_torch_tail"] = int((a == b).sum())
        except Exception as exc:  # report, do not hide
            out["fused_error"] = repr(exc)
        finally:
            opt.FUSED = saved
    return out


class Timer:
    def __init__(self, device):
        self.device = device

    def __call__(self, fn) -> float:
        if self.device == "cuda":
            torch.cuda.synchronize()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            torch.cuda.synchronize()
            return a.elapsed_time(b)
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3


def contenders(device, name, kw, x, gen):
    p = SamplingParams(**kw)
    runs = {"reference (sort)": lambda: ref.sample(x, p, gen),
            "optimized": lambda: opt.sample(x, p, gen)}
    if device == "cuda":
        def variant(chunk, fused):
            def run():
                saved = opt.TOPK_CHUNK, opt.FUSED
                opt.TOPK_CHUNK, opt.FUSED = chunk, fused
                try:
                    return opt.sample(x, p, gen)
                finally:
                    opt.TOPK_CHUNK, opt.FUSED = saved
            return run
        if kw.get("top_k"):
            for chunk in (None, 0):             # topk via chunk maxima (auto size) / plain torch.topk
                for fused in (True, False):     # the Triton tail / torch ops
                    runs[f"optimized chunk={'auto' if chunk is None else chunk} fused={fused}"] = variant(chunk, fused)
            runs["torch.topk(51) alone"] = lambda: torch.topk(x, 51, dim=1)
        runs["torch.sort alone"] = lambda: torch.sort(x, dim=1, descending=True)
        runs["torch.multinomial alone"] = lambda: torch.multinomial(torch.softmax(x, -1), 1, generator=gen)
    hf = hf_chain(kw)
    if hf is not None:
        runs["transformers warpers + multinomial"] = lambda: hf(x, gen)
    return runs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--vocab", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args(argv)
    device = args.device
    batch = args.batch or (256 if device == "cuda" else 64)
    vocab = args.vocab or (128256 if device == "cuda" else 32000)
    rounds = args.rounds or (50 if device == "cuda" else 25)
    info = dict(device=device, batch=batch, vocab=vocab, rounds=rounds, torch=torch.__version__,
                threads=torch.get_num_threads(), machine=platform.processor() or platform.machine(),
                cmd="PYTHONPATH=. python3 " + " ".join([os.path.relpath(__file__)] + sys.argv[1:]))
    if device == "cuda":
        info["gpu"] = torch.cuda.get_device_name()
        import triton
        info["triton"] = triton.__version__
    load_before = list(os.getloadavg())
    print(json.dumps(info))
    correctness = check_correctness(device, vocab)
    print("correctness:", json.dumps(correctness, indent=1))
    timer = Timer(device)
    results = []
    for dist in ("peaked", "flat"):
        x = make_logits(batch, vocab, dist, device)
        for name, kw in CONFIGS.items():
            gen = torch.Generator(device=device).manual_seed(0)
            runs = contenders(device, name, kw, x, gen)
            for fn in runs.values():      # warm-up (compilation, allocator, caches)
                fn()
                fn()
            times = {k: [] for k in runs}
            for _ in range(rounds):
                for k, fn in runs.items():
                    times[k].append(timer(fn))
            med = {k: statistics.median(v) for k, v in times.items()}
            for k, v in med.items():
                results.append(dict(dist=dist, config=name, impl=k, median_ms=v,
                                    min_ms=min(times[k]), vs_reference=med["reference (sort)"] / v,
                                    times_ms=[round(t, 4) for t in times[k]]))
    width = max(len(r["impl"]) for r in results)
    print(f"\n{device} {batch} x {vocab} fp32, median of {rounds} alternating rounds")
    print(f"| logits | sampler | {'implementation':<{width}} | median ms | min ms | speedup vs reference |")
    print(f"|---|---|{'-' * (width + 2)}|---:|---:|---:|")
    for r in results:
        print(f"| {r['dist']} | {r['config']} | {r['impl']:<{width}} | {r['median_ms']:.3f} | "
              f"{r['min_ms']:.3f} | {r['vs_reference']:.1f}x |")
    info["loadavg_before"] = load_before
    info["loadavg_after"] = list(os.getloadavg())
    print("load average before / after:", load_before, info["loadavg_after"])
    payload = dict(info=info, correctness=correctness, results=results)
    paths = [args.json] if args.json else []
    if os.environ.get("OUT"):
        paths.append(os.path.join(os.environ["OUT"], f"sampling_speed_{device}.json"))
    for path in paths:
        with open(path, "w") as f:
            json.dump(payload, f, indent=1)
        print("wrote", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
