"""H200 benchmark of the paged-attention decode kernel (optimized/paged_attention.py).

One run, one process (plus the spec tests in a child process with ``--pytest``):
  1. ``--pytest``: the paged_attention spec tests natively, log to --log.
  2. Ceilings: a 2 GiB device-to-device copy (bytes read + written) and a 2 GiB bf16 read
     (``torch.sum``).
  3. Per shape (batch x context; 32 query / 8 KV heads, D = 128, bf16, block 16, block ids a
     random permutation of the pool): correctness natively (two sequences against the float64
     oracle with the tolerance rule, all of them against SDPA-cuDNN), then times of
        ours (graph)    the kernels alone (``_paged_decode``: split + merge), CUDA-graph replay
        ours (eager)    the same launched from Python
        ours (call)     ``paged_attention`` itself: input checks (a device-to-host copy of
                        seq_lens and the block table) + kernels, eager
        sdpa_cudnn      torch SDPA, CUDNN_ATTENTION backend, on the same K/V stored contiguously
                        (B, 8, N, 128); GQA folded into the query length: q (B, 8, 4, 128), so
                        the cache is read once (graph replay)
        sdpa_flash      the same with the FLASH_ATTENTION backend (FA2 inside PyTorch)
     Bandwidth = KV bytes (2 x B x N x 8 x 128 x 2 B) / time. Times: triton.testing.do_bench
     medians (L2 flushed before every run).
        checks alone    ``check_paged_attention_inputs`` alone (eager)
  4. ``--sweep``: BLOCK_N x num_warps x num_stages x split count, per shape (graph replay);
     ``--splits``: split counts only, with the default tiles.

    PYTHONPATH=. python3 spec_tests/bench/paged_attention_h200.py --pytest --splits \
        --out $OUT/paged_attention_h200.json --log $OUT/paged_attention_h200.log
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
import traceback

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

import optimized.paged_attention as pa
from conformance.tolerance import assert_close_to_oracle
from reference.attention import attention as ref_attention

SHAPES = ((64, 4096), (1, 32768), (256, 512))
Q_HEADS, KV_HEADS, HEAD_DIM, BLOCK = 32, 8, 128, 16
SWEEP = [(bn, w, s) for bn in (32, 64, 128) for w in (4, 8) for s in (2, 3, 4)]
SWEEP_SPLITS = {(64, 4096): (1, 2, 4), (1, 32768): (16, 32, 64, 128), (256, 512): (1, 2)}
FINE_SPLITS = {(64, 4096): (1, 2), (1, 32768): (32, 40, 44, 48, 56, 64, 80, 96, 128), (256, 512): (1, 2)}


def log(*a):
    print(*a, flush=True)


def bench(fn) -> float:
    """Median ms (do_bench flushes L2 before each run)."""
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


def graphed(fn):
    """A CUDA graph of one call of ``fn`` (after two warm-up calls); returns its replay."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
        fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g.replay


def ceilings() -> dict:
    n = 1 << 30  # bf16 elements: 2 GiB
    src = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    t_copy = bench(lambda: dst.copy_(src))
    t_read = bench(lambda: torch.sum(src, dtype=torch.float32))
    out = dict(copy_tbps=2 * 2 * n / t_copy / 1e9, copy_ms=t_copy, read_tbps=2 * n / t_read / 1e9, read_ms=t_read)
    del src, dst
    torch.cuda.empty_cache()
    return out


def make_problem(batch: int, n: int, seed: int = 0) -> dict:
    g = torch.Generator(device="cuda").manual_seed(seed)
    kw = dict(device="cuda", dtype=torch.bfloat16, generator=g)
    q = torch.randn(batch, Q_HEADS, HEAD_DIM, **kw)
    k = torch.randn(batch, KV_HEADS, n, HEAD_DIM, **kw)      # contiguous, SDPA's layout
    v = torch.randn(batch, KV_HEADS, n, HEAD_DIM, **kw)
    per_seq = n // BLOCK
    num_blocks = batch * per_seq
    perm = torch.randperm(num_blocks, device="cuda", generator=g)
    tables = perm.reshape(batch, per_seq).to(torch.int32)
    k_cache = torch.empty(num_blocks, BLOCK, KV_HEADS, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
    v_cache = torch.empty_like(k_cache)
    # (B, KVH, N, D) -> (B, N/BLOCK, BLOCK, KVH, D) -> scattered to the blocks of each table row
    k_cache[tables.long().reshape(-1)] = k.permute(0, 2, 1, 3).reshape(batch * per_seq, BLOCK, KV_HEADS, HEAD_DIM)
    v_cache[tables.long().reshape(-1)] = v.permute(0, 2, 1, 3).reshape(batch * per_seq, BLOCK, KV_HEADS, HEAD_DIM)
    lens = torch.full((batch,), n, device="cuda", dtype=torch.int32)
    return dict(q=q, k=k, v=v, k_cache=k_cache, v_cache=v_cache, tables=tables, lens=lens, lens_list=[n] * batch)


def sdpa_fn(p, backend):
    batch = p["q"].shape[0]
    group = Q_HEADS // KV_HEADS
    qg = p["q"].reshape(batch, KV_HEADS, group, HEAD_DIM)   # head h = kvh * group + g

    def run():
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(qg, p["k"], p["v"]).reshape(batch, Q_HEADS, HEAD_DIM)
    return run


def ours_kernel_fn(p, config=None, splits=None):
    scale = 1.0 / math.sqrt(HEAD_DIM)
    q4 = p["q"].unsqueeze(1)

    def run():
        return pa._paged_decode(q4, p["k_cache"], p["v_cache"], p["tables"], p["lens"], p["lens_list"],
                                scale, None, config=config, splits=splits)[0][:, 0]
    return run


def check(p, ours, cudnn) -> dict:
    """Two sequences vs the float64 oracle (tolerance rule); every sequence vs SDPA-cuDNN."""
    batch = p["q"].shape[0]
    rows = sorted({0, batch - 1})
    q = p["q"][rows].unsqueeze(2)              # (r, H, 1, D)
    k, v = p["k"][rows], p["v"][rows]
    oracle = ref_attention(q.double(), k.double(), v.double())[:, :, 0]
    low = ref_attention(q, k, v)[:, :, 0]
    assert_close_to_oracle(ours[rows], low, oracle, name="paged out vs float64 oracle")
    return dict(checked_rows=rows, max_abs_err_vs_oracle=float((ours[rows].double() - oracle).abs().max()),
                reference_bf16_err=float((low.double() - oracle).abs().max()),
                max_abs_diff_vs_cudnn=float((ours.float() - cudnn.float()).abs().max()) if cudnn is not None else None)


def run_shape(batch: int, n: int, sweep: bool) -> dict:
    p = make_problem(batch, n)
    kv_bytes = 2 * batch * n * KV_HEADS * HEAD_DIM * 2
    res = dict(batch=batch, context=n, q_heads=Q_HEADS, kv_heads=KV_HEADS, head_dim=HEAD_DIM, block_size=BLOCK,
               dtype="bf16", kv_bytes=kv_bytes, times_ms={}, errors={})
    cfg = pa.decode_config(HEAD_DIM, torch.device("cuda"))
    res["default_config"] = cfg
    res["default_plan"] = pa.plan(p["lens_list"], 1, None, batch * KV_HEADS, cfg["BLOCK_N"], cfg["programs"], cfg["min_tiles"])
    ours = ours_kernel_fn(p)
    out = ours()
    cudnn_out = None
    fns = {"ours (graph)": None, "ours (eager)": ours,
           "ours (call)": lambda: pa.paged_attention(p["q"], p["k_cache"], p["v_cache"], p["tables"], p["lens"]),
           "checks alone": lambda: pa.check_paged_attention_inputs(p["q"], p["k_cache"], p["v_cache"], p["tables"],
                                                                   p["lens"])}
    for name, backend in (("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION), ("sdpa_flash", SDPBackend.FLASH_ATTENTION)):
        try:
            f = sdpa_fn(p, backend)
            o = f()
            if name == "sdpa_cudnn":
                cudnn_out = o
            fns[name] = f
        except Exception as exc:  # a backend that refuses the shape
            res["errors"][name] = f"{type(exc).__name__}: {exc}"[:300]
    res["check"] = check(p, out, cudnn_out)
    for name, f in list(fns.items()):
        try:
            if name == "ours (graph)":
                t = bench(graphed(ours))
            elif name.startswith("sdpa"):
                t = bench(graphed(f))
                res["times_ms"][name + " (eager)"] = bench(f)
            else:
                t = bench(f)
            res["times_ms"][name] = t
        except Exception as exc:
            res["errors"][name] = f"{type(exc).__name__}: {exc}"[:300]
    res["tbps"] = {k: kv_bytes / t / 1e9 for k, t in res["times_ms"].items()}
    if sweep:
        rows = []
        for bn, w, st in SWEEP:
            for sp in SWEEP_SPLITS.get((batch, n), (None,)):
                config = dict(BLOCK_N=bn, num_warps=w, num_stages=st, programs=cfg["programs"], min_tiles=1)
                try:
                    f = ours_kernel_fn(p, config, sp)
                    o = f()
                    err = float((o.float() - out.float()).abs().max())
                    t = bench(graphed(f))
                    rows.append(dict(BLOCK_N=bn, num_warps=w, num_stages=st, splits=sp, ms=t,
                                     tbps=kv_bytes / t / 1e9, max_abs_diff_vs_default=err))
                except Exception as exc:
                    rows.append(dict(BLOCK_N=bn, num_warps=w, num_stages=st, splits=sp,
                                     error=f"{type(exc).__name__}: {exc}"[:200]))
        res["sweep"] = rows
        ok = [r for r in rows if "ms" in r]
        if ok:
            res["sweep_best"] = min(ok, key=lambda r: r["ms"])
        log(f"  sweep {batch}x{n}: {len(ok)}/{len(rows)} ran; best {res.get('sweep_best')}")
    del p
    torch.cuda.empty_cache()
    return res


def run_pytest(log_path: str | None) -> dict:
    env = {**os.environ, "PYTHONPATH": "."}
    cmd = [sys.executable, "-m", "pytest", "spec_tests/paged_attention", "-q", "-p", "no:cacheprovider"]
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    text = proc.stdout + proc.stderr
    if log_path:
        with open(log_path, "w") as f:
            f.write("$ PYTHONPATH=. python3 -m pytest spec_tests/paged_attention -q -p no:cacheprovider\n")
            f.write(text)
    tail = [line for line in text.splitlines() if "passed" in line or "failed" in line][-1:]
    log(text[-2500:])
    return dict(returncode=proc.returncode, seconds=round(time.time() - t0, 1), summary=tail)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="paged_attention_h200.json")
    ap.add_argument("--log", default=None)
    ap.add_argument("--pytest", action="store_true")
    ap.add_argument("--sweep", action="store_true", help="tile configs x split counts")
    ap.add_argument("--splits", action="store_true", help="split counts only, default tiles")
    args = ap.parse_args()
    if args.splits and not args.sweep:
        cfg = pa.decode_config(HEAD_DIM, torch.device("cuda"))
        SWEEP[:] = [(cfg["BLOCK_N"], cfg["num_warps"], cfg["num_stages"])]
        SWEEP_SPLITS.update(FINE_SPLITS)
    result = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__,
                  sms=torch.cuda.get_device_properties(0).multi_processor_count)
    if args.pytest:
        result["pytest"] = run_pytest(args.log)
    result["ceilings"] = ceilings()
    log("ceilings", result["ceilings"])
    result["shapes"] = []
    for batch, n in SHAPES:
        try:
            r = run_shape(batch, n, args.sweep or args.splits)
        except Exception:
            r = dict(batch=batch, context=n, failed=traceback.format_exc()[-2000:])
            log(r["failed"])
        result["shapes"].append(r)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    copy = result["ceilings"]["copy_tbps"]
    log(f"\ncopy ceiling {copy:.2f} TB/s, read {result['ceilings']['read_tbps']:.2f} TB/s; KV bytes / time, TB/s (ms)")
    names = ["ours (graph)", "ours (eager)", "ours (call)", "sdpa_cudnn", "sdpa_flash"]
    log(f"{'shape':>12} | " + " | ".join(f"{n:>18}" for n in names) + " | ours/cudnn | plan (splits, len)")
    for r in result["shapes"]:
        if "failed" in r:
            log(f"{r['batch']}x{r['context']}: FAILED")
            continue
        cells = [f"{r['tbps'][n]:5.2f} ({r['times_ms'][n]:.3f})" if n in r["times_ms"] else "-" for n in names]
        ratio = (r["tbps"].get("ours (graph)", 0) / r["tbps"]["sdpa_cudnn"]) if "sdpa_cudnn" in r["tbps"] else float("nan")
        log(f"{r['batch']:>5}x{r['context']:<6} | " + " | ".join(f"{c:>18}" for c in cells)
            + f" | {ratio:10.2f} | {r['default_plan']}")
        if "checks alone" in r["times_ms"]:
            log(f"{'':>12}   input checks alone: {r['times_ms']['checks alone']:.3f} ms")
        if r.get("sweep"):
            log(f"{'':>12}   splits -> TB/s: " + ", ".join(
                f"{x['splits']}: {x['tbps']:.2f}" for x in r["sweep"] if "tbps" in x and len(SWEEP) == 1))
        if r.get("sweep_best"):
            b = r["sweep_best"]
            log(f"{'':>12}   sweep best: {b['tbps']:.2f} TB/s ({b['ms']:.3f} ms) BLOCK_N {b['BLOCK_N']} warps "
                f"{b['num_warps']} stages {b['num_stages']} splits {b['splits']}")
        if r["errors"]:
            log(f"{'':>12}   errors: {r['errors']}")
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
