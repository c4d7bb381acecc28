"""Speculative verification speed: the per-row, per-position reference vs the batched optimized
verifier, timed alternately in one run (the ratio is what the floors hold).

    PYTHONPATH=. python3 spec_tests/bench/speculative_speed.py                 # CPU: 64 x γ 4 x 32,000
    PYTHONPATH=. python3 spec_tests/bench/speculative_speed.py --threads 1     # one intra-op thread
    PYTHONPATH=. python3 spec_tests/bench/speculative_speed.py --device cuda   # GPU: 256 x γ 4 x 128,256

Workloads (float32 probabilities from a seeded generator): the target is softmax(4 * randn) (LLM-like
peakedness); the draft is softmax of the target's logits plus noise * randn: "good draft" (noise
1: ~2.5 of 4 drafts accepted on average), "poor draft" (noise 4: most rows reject the first draft)
and "n-gram" (draft_probs=None, drafts from the good draft). Drafts are drawn from the draft
distribution. Each timed call is a whole ``verify(..., uniforms=u)``: validation, acceptance,
residual, draw. Wall time and this process's CPU time are both recorded: on a shared machine the
wall time includes waiting for a core, the CPU time (with --threads 1) does not. Both implementations get the same uniforms and must return the same tokens (checked
before timing). With OUT set (the device machine), the JSON goes to $OUT/speculative_speed_<device>.json.

With ``--device cuda`` the optimized verifier is timed twice in the same alternating rounds: its
torch path ("optimized", INFERSPEC_SPECULATIVE_TRITON=0 semantics) and its Triton draw
("optimized_triton", "1": optimized/_speculative_triton.py, errors raised). All three must emit
the same tokens and counts before any timing, else the script prints the first differing row and
exits 1. On the CPU only the reference and the default optimized path are timed, as before.
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

import optimized.speculative as opt
import reference.speculative as ref

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


def _sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def time_call(fn, kw, device) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of one call."""
    _sync(device)
    t0, c0 = time.perf_counter(), time.process_time()
    fn(**kw)
    _sync(device)
    return time.perf_counter() - t0, time.process_time() - c0


def _optimized(mode: str | None):
    """optimized.verify with its Triton switch (optimized.speculative.TRITON) set to ``mode``
    for the call (None: the module's setting, i.e. the default path)."""
    if mode is None:
        return opt.verify

    def call(**kw):
        saved, opt.TRITON = opt.TRITON, mode
        try:
            return opt.verify(**kw)
        finally:
            opt.TRITON = saved
    return call


def variants(device) -> dict:
    """The implementations timed on ``device``: on CUDA the optimized torch path and the Triton
    draw side by side, elsewhere the default optimized path only."""
    if torch.device(device).type == "cuda":
        return {"reference": ref.verify, "optimized": _optimized("0"), "optimized_triton": _optimized("1")}
    return {"reference": ref.verify, "optimized": _optimized(None)}


def check_same(results: dict, config: str) -> None:
    """Exit 1 unless every implementation emitted the reference's tokens and counts."""
    want = results["reference"]
    for name, got in results.items():
        same_n = torch.equal(got.num_accepted.cpu(), want.num_accepted.cpu())
        same_t = torch.equal(got.tokens.cpu(), want.tokens.cpu())
        if not (same_n and same_t):
            bad = ((got.tokens.cpu() != want.tokens.cpu()).any(1)
                   | (got.num_accepted.cpu() != want.num_accepted.cpu())).nonzero().flatten().tolist()
            r = bad[0]
            print(f"MISMATCH ({config}): {name} differs from the reference on {len(bad)} rows; row {r}: "
                  f"{got.tokens[r].tolist()} (accepted {int(got.num_accepted[r])}) vs "
                  f"{want.tokens[r].tolist()} (accepted {int(want.num_accepted[r])})", file=sys.stderr)
            sys.exit(1)


def measure(batch: int, gamma: int, vocab: int, config: str, device, rounds: int) -> dict:
    kw = make_inputs(batch, gamma, vocab, config, device)
    impls = variants(device)
    results = {name: fn(**kw) for name, fn in impls.items()}
    check_same(results, config)
    a = results["reference"]
    for name, fn in impls.items():
        if name != "reference":
            for _ in range(2):
                fn(**kw)
    times = {name: [] for name in impls}
    cpu = {name: [] for name in impls}
    for _ in range(rounds):
        for name, fn in impls.items():
            wall, used = time_call(fn, kw, device)
            times[name].append(wall)
            cpu[name].append(used)
    med = {k: statistics.median(v) for k, v in times.items()}
    med_cpu = {k: statistics.median(v) for k, v in cpu.items()}
    row = dict(config=config, batch=batch, gamma=gamma, vocab=vocab,
               mean_accepted=float(a.num_accepted.float().mean()),
               median_ms={k: v * 1e3 for k, v in med.items()},
               min_ms={k: min(v) * 1e3 for k, v in times.items()},
               median_cpu_ms={k: v * 1e3 for k, v in med_cpu.items()},
               speedup=med["reference"] / med["optimized"],
               speedup_cpu_time=med_cpu["reference"] / med_cpu["optimized"], raw_s=times, raw_cpu_s=cpu)
    if "optimized_triton" in med:
        row["speedup_triton"] = med["reference"] / med["optimized_triton"]
        row["triton_over_torch"] = med["optimized"] / med["optimized_triton"]
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    cuda = args.device == "cuda"
    batch, gamma, vocab = (256, 4, 128256) if cuda else (64, 4, 32000)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    rows = [measure(batch, gamma, vocab, c, args.device, args.rounds) for c in CONFIGS]
    print(f"{batch} x γ {gamma} x {vocab} float32, torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"median of {args.rounds} alternating rounds (load average before the run {load:.2f}):\n")
    print("| workload | mean accepted | reference ms | optimized ms | speedup | reference CPU ms | optimized CPU ms | speedup (CPU time) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['config']} | {r['mean_accepted']:.2f} | {r['median_ms']['reference']:.1f} | "
              f"{r['median_ms']['optimized']:.2f} | {r['speedup']:.1f}x | {r['median_cpu_ms']['reference']:.1f} | "
              f"{r['median_cpu_ms']['optimized']:.2f} | {r['speedup_cpu_time']:.1f}x |")
    if cuda:
        print("\n| workload | optimized (torch draw) ms | optimized (Triton draw) ms | Triton / torch speedup | "
              "speedup over reference |")
        print("|---|---:|---:|---:|---:|")
        for r in rows:
            print(f"| {r['config']} | {r['median_ms']['optimized']:.3f} | {r['median_ms']['optimized_triton']:.3f} | "
                  f"{r['triton_over_torch']:.2f}x | {r['speedup_triton']:.0f}x |")
    out = dict(device=args.device, machine=platform.processor() or platform.machine(),
               gpu=torch.cuda.get_device_name() if cuda else None, torch=torch.__version__,
               threads=torch.get_num_threads(), load_average=load, rows=rows)
    path = os.path.join(os.environ.get("OUT", "."), f"speculative_speed_{args.device}.json") if os.environ.get("OUT") else None
    if path:
        with open(path, "w") as f:
            json.dump(out, f, indent=1)
    elif os.environ.get("SPEC_JSON"):
        with open(os.environ["SPEC_JSON"], "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
