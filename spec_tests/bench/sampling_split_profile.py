"""Where the split sort-free sampler's time goes (H200): per-kernel GPU time from torch.profiler,
the host time of one call, and the number of search passes, for the four workloads of
sampling_speed.py at 256 x 128,256 fp32; plus the launch overhead of an empty Triton kernel.

    PYTHONPATH=. python3 spec_tests/bench/sampling_split_profile.py --json $OUT/sampling_split_profile.json
"""
from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict

import torch
import triton
from torch.profiler import ProfilerActivity, profile

import optimized._sampling_split as spl
from reference.sampling import SamplingParams, resolve_params
from spec_tests.bench.sampling_speed import CONFIGS, make_logits


@triton.jit
def _empty(x_ptr):
    pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--configs", default="[{}]", help="a JSON list of SPLIT_CONFIG overrides")
    args = ap.parse_args()
    runs = [profile_config(cfg) for cfg in json.loads(args.configs)]
    if args.json:
        json.dump(runs, open(args.json, "w"), indent=1)


def profile_config(cfg):
    print("config", json.dumps(cfg), flush=True)
    out = dict(config=dict(spl.SPLIT_CONFIG, **cfg), workloads={})
    t = torch.zeros(1, device="cuda")
    for _ in range(10):
        _empty[(1,)](t)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(200):
        _empty[(1,)](t)
    torch.cuda.synchronize()
    out["empty_triton_launch_us"] = (time.perf_counter() - t0) / 200 * 1e6
    for dist in ("peaked", "flat"):
        x = make_logits(256, 128256, dist, "cuda")
        for name, kw in CONFIGS.items():
            rows = resolve_params(SamplingParams(**kw), 256, 128256, torch.float32, "cuda")
            redone = []
            one_program = spl.sort_free
            spl.sort_free = lambda xx, *a, **k: redone.append(xx.shape[0]) or one_program(xx, *a, **k)
            try:
                spl.sort_free_split(x, rows.temperature, rows.top_k, rows.top_p, rows.min_p, None, config=cfg)
            finally:
                spl.sort_free = one_program
            u = torch.rand(256, generator=torch.Generator().manual_seed(1), dtype=torch.float64).cuda()
            call = lambda: spl.sort_free_split(x, rows.temperature, rows.top_k, rows.top_p, rows.min_p, u, config=cfg)  # noqa: E731
            for _ in range(3):
                call()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(20):
                call()
            torch.cuda.synchronize()
            host_ms = (time.perf_counter() - t0) / 20 * 1e3
            # passes: count decide launches by wrapping search (instrument via profiler names)
            with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
                call()
                torch.cuda.synchronize()
            per = defaultdict(lambda: [0, 0.0])
            for ev in prof.events():
                if ev.device_type == torch.autograd.DeviceType.CUDA:
                    per[ev.name][0] += 1
                    per[ev.name][1] += ev.device_time_total / 1e3 if hasattr(ev, "device_time_total") else ev.cuda_time_total / 1e3
            gpu = {k: dict(count=v[0], ms=round(v[1], 4)) for k, v in per.items()}
            out["workloads"][f"{dist} / {name}"] = dict(call_ms=host_ms, rows_redone=sum(redone), gpu_sum_ms=round(sum(v[1] for v in per.values()), 4),
                                                        kernels=gpu)
            print(f"{dist} / {name}: rows redone by the one-program kernel {sum(redone)}, call {host_ms:.3f} ms, GPU sum {sum(v[1] for v in per.values()):.3f} ms", flush=True)
            for k, v in sorted(gpu.items(), key=lambda kv: -kv[1]["ms"]):
                print(f"    {k[:60]:60} x{v['count']:2d} {v['ms']:.4f} ms", flush=True)
    print("empty Triton launch (host, us):", round(out["empty_triton_launch_us"], 1))
    return out


if __name__ == "__main__":
    main()
