"""H200 benchmark of the FlashAttention-2 Triton kernel (optimized/flash_attention.py).

One run: measures the bf16/fp16 matmul ceiling, optionally sweeps the kernel's tile configs
(``--tune``, each sweep in a child process so a compiler crash cannot end the run), checks every
benchmarked shape against the float64 oracle natively (two heads of the problem, tolerance rule of
conformance/tolerance.py), then times in the same process, per shape and pass:
    ours          optimized.flash_attention (this repo's kernel)
    sdpa_cudnn    torch SDPA, SDPBackend.CUDNN_ATTENTION
    sdpa_flash    torch SDPA, SDPBackend.FLASH_ATTENTION (FlashAttention-2 inside PyTorch)
    reference     reference.attention.attention (plain PyTorch; N <= 4096, forward only)
Shapes: batch * N = 16k tokens, heads * head_dim = 2048, N in {1k, 4k, 16k}, D in {64, 128},
causal and not, fp16 and bf16. FLOPs = 4 B H N^2 D (x0.5 causal; x2.5 for the backward).
Times are triton.testing.do_bench medians. Prints a table; writes JSON.

    PYTHONPATH=. python3 spec_tests/bench/h200_attention.py --out $OUT/attention_h200.json --tune
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

import optimized.flash_attention as fa
import reference.attention as ref
from conformance.tolerance import assert_close_to_oracle

NS = (1024, 4096, 16384)
DS = (64, 128)
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
TOKENS, WIDTH = 16384, 2048

FWD_SWEEP = {  # (BLOCK_M, BLOCK_N, num_warps, num_stages, warp_specialize)
    64: [(128, 64, 4, 3, False), (128, 64, 4, 4, False), (128, 128, 8, 3, False), (128, 128, 8, 3, True),
         (128, 64, 8, 3, True), (64, 64, 4, 3, False), (64, 128, 4, 3, False), (64, 64, 4, 4, False)],
    128: [(128, 64, 8, 3, False), (128, 64, 8, 3, True), (128, 128, 8, 3, False), (128, 128, 8, 3, True),
          (128, 64, 8, 4, False), (64, 64, 4, 3, False), (64, 64, 4, 4, False), (64, 128, 4, 3, False),
          (128, 128, 8, 2, True), (64, 64, 4, 2, False)],
}
BWD_SWEEP = {  # ((dkdv BM, BN, warps, stages), (dq BM, BN, warps, stages))
    64: [((32, 128, 4, 3), (128, 32, 4, 3)), ((32, 128, 4, 4), (128, 32, 4, 4)),
         ((64, 128, 4, 3), (128, 64, 4, 3)), ((32, 64, 4, 3), (64, 32, 4, 3))],
    128: [((64, 128, 8, 2), (128, 64, 8, 2)), ((64, 128, 8, 3), (128, 64, 8, 3)),
          ((32, 128, 4, 3), (128, 32, 4, 3)), ((32, 64, 4, 3), (64, 32, 4, 3))],
}
TUNE_NS = (1024, 4096)


def log(*a):
    print(*a, flush=True)


def bench(fn, grad_to_none=None) -> float:
    return triton.testing.do_bench(fn, warmup=25, rep=100, grad_to_none=grad_to_none, return_mode="median")


def make(b, h, n, d, dtype, seed=0, requires_grad=False):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(b, h, n, d, device="cuda", dtype=dtype, generator=g).requires_grad_(requires_grad)
            for _ in range(3)]


def flops(b, h, n, d, causal, bwd=False) -> float:
    f = 4.0 * b * h * n * n * d * (0.5 if causal else 1.0)
    return f * (2.5 if bwd else 1.0)


def matmul_ceiling(dtype) -> float:
    g = torch.Generator(device="cuda").manual_seed(1)
    a = torch.randn(8192, 8192, device="cuda", dtype=dtype, generator=g)
    b = torch.randn(8192, 8192, device="cuda", dtype=dtype, generator=g)
    ms = bench(lambda: a @ b)
    return 2 * 8192 ** 3 / ms / 1e9


def fwd_cfg(t):
    bm, bn, w, s, ws = t
    return dict(BLOCK_M=bm, BLOCK_N=bn, num_warps=w, num_stages=s, WARP_SPEC=ws)


def bwd_cfg(t):
    (a, b, c, d), (e, f_, g, h) = t
    return dict(dkdv=dict(BLOCK_M=a, BLOCK_N=b, num_warps=c, num_stages=d),
                dq=dict(BLOCK_M=e, BLOCK_N=f_, num_warps=g, num_stages=h))


def ours_fwd(q, k, v, causal, cfg=None):
    return fa._flash_forward(q, k, v, None, None, 0, 0, causal, None, 1 / math.sqrt(q.shape[-1]), cfg)


# --------------------------------------------------------------------------- tuning (child)
def tune_child(d: int, path: str) -> None:
    """Sweep forward configs for head_dim d at N = 1024 and 4096, backward configs at 4096 (fp16),
    both causal modes."""
    res = {"fwd": [], "bwd": []}
    scale = 1 / math.sqrt(d)
    for t in FWD_SWEEP[d]:
        for n in TUNE_NS:
            b, h = TOKENS // n, WIDTH // d
            q, k, v = make(b, h, n, d, torch.float16)
            for causal in (False, True):
                try:
                    out, _ = ours_fwd(q, k, v, causal, fwd_cfg(t))
                    ok = torch.isfinite(out).all().item()
                    ms = bench(lambda: ours_fwd(q, k, v, causal, fwd_cfg(t)))
                    res["fwd"].append(dict(cfg=t, N=n, causal=causal, ms=ms, ok=ok,
                                           tflops=flops(b, h, n, d, causal) / ms / 1e9))
                    log(f"  tune fwd d={d} N={n} {t} causal={causal}: {res['fwd'][-1]['tflops']:.0f} TFLOP/s")
                except Exception as exc:  # noqa: BLE001 - record and go on
                    res["fwd"].append(dict(cfg=t, N=n, causal=causal, error=repr(exc)[:300]))
                    log(f"  tune fwd d={d} N={n} {t} causal={causal}: ERROR {repr(exc)[:200]}")
                json.dump(res, open(path, "w"))
    n = 4096
    b, h = TOKENS // n, WIDTH // d
    q, k, v = make(b, h, n, d, torch.float16)
    do = torch.randn_like(q)
    for causal in (False, True):
        out, lse = ours_fwd(q, k, v, causal)
        for t in BWD_SWEEP[d]:
            try:
                fn = lambda: fa._flash_backward(do, q, k, v, out, lse, None, None, None, 0, 0, causal, None,
                                                scale, bwd_cfg(t))
                fn()
                ms = bench(fn)
                res["bwd"].append(dict(cfg=t, causal=causal, ms=ms,
                                       tflops=flops(b, h, n, d, causal, bwd=True) / ms / 1e9))
                log(f"  tune bwd d={d} {t} causal={causal}: {res['bwd'][-1]['tflops']:.0f} TFLOP/s")
            except Exception as exc:  # noqa: BLE001
                res["bwd"].append(dict(cfg=t, causal=causal, error=repr(exc)[:300]))
                log(f"  tune bwd d={d} {t} causal={causal}: ERROR {repr(exc)[:200]}")
            json.dump(res, open(path, "w"))


def tune(out_dir: str) -> dict:
    best = {}
    for d in DS:
        path = os.path.join(out_dir, f"tune_d{d}.json")
        t0 = time.time()
        try:
            proc = subprocess.run([sys.executable, __file__, "--tune-child", str(d), "--tune-path", path],
                                  capture_output=True, text=True, timeout=150)
        except subprocess.TimeoutExpired as exc:
            proc = subprocess.CompletedProcess(exc.cmd, -9, exc.stdout or "", exc.stderr or "")
            proc.stdout = proc.stdout.decode() if isinstance(proc.stdout, bytes) else proc.stdout
            proc.stderr = proc.stderr.decode() if isinstance(proc.stderr, bytes) else proc.stderr
        log(proc.stdout[-6000:], proc.stderr[-3000:] if proc.returncode else "")
        log(f"tune d={d}: exit {proc.returncode} in {time.time() - t0:.0f} s")
        if not os.path.exists(path):
            continue
        res = json.load(open(path))
        for causal in (False, True):
            bw = [r for r in res["bwd"] if r["causal"] == causal and "ms" in r]
            for n in TUNE_NS:
                f = [r for r in res["fwd"] if r["causal"] == causal and r["N"] == n and "ms" in r and r.get("ok")]
                best[(d, causal, n)] = dict(fwd=min(f, key=lambda r: r["ms"])["cfg"] if f else None,
                                            bwd=min(bw, key=lambda r: r["ms"])["cfg"] if bw else None)
        best[("raw", d)] = res
    return best


# --------------------------------------------------------------------------- checks
def check_shape(b, h, n, d, dtype, causal, fcfg, bcfg, with_bwd) -> dict:
    """Two heads of the benchmark problem against the float64 oracle (DESIGN's tolerance rule)."""
    q, k, v = make(1, 2, n, d, dtype, seed=7)
    scale = 1 / math.sqrt(d)
    res = {}
    out, lse = ours_fwd(q, k, v, causal, fcfg)
    r_out, r_lse = ref.attention(q, k, v, causal=causal, return_lse=True)
    o_out, o_lse = ref.attention(q.double(), k.double(), v.double(), causal=causal, return_lse=True)
    try:
        assert_close_to_oracle(out, r_out, o_out, name="out")
        assert_close_to_oracle(lse, r_lse, o_lse, name="lse")
        res["fwd"] = "ok"
    except AssertionError as exc:
        res["fwd"] = str(exc).splitlines()[0]
    res["fwd_err"] = (out.double() - o_out).abs().max().item()
    res["ref_err"] = (r_out.double() - o_out).abs().max().item()
    del r_out, o_out
    if with_bwd:
        do = torch.randn_like(q)
        dq, dk, dv = fa._flash_backward(do, q, k, v, out, lse, None, None, None, 0, 0, causal, None,
                                        scale, bcfg)
        grads = {}
        for name, dt in (("ref", dtype), ("oracle", torch.float64)):
            xs = [t.detach().to(dt).requires_grad_() for t in (q, k, v)]
            ref.attention(*xs, causal=causal).backward(do.to(dt))
            grads[name] = [x.grad for x in xs]
        floor_from = torch.cat([g.reshape(-1) for g in grads["oracle"]])
        try:
            for nm, a, r, o in zip(("dq", "dk", "dv"), (dq, dk, dv), grads["ref"], grads["oracle"]):
                assert_close_to_oracle(a, r, o, factor=3.0, name=nm, floor_from=floor_from)
            res["bwd"] = "ok"
        except AssertionError as exc:
            res["bwd"] = str(exc).splitlines()[0]
    torch.cuda.empty_cache()
    return res


# --------------------------------------------------------------------------- timing
def time_shape(n, d, dtype_name, causal, fcfg, bcfg, rows, with_ref):
    dtype = DTYPES[dtype_name]
    b, h = TOKENS // n, WIDTH // d
    q, k, v = make(b, h, n, d, dtype, requires_grad=True)
    do = torch.randn_like(q)
    key = dict(N=n, B=b, H=h, D=d, causal=causal, dtype=dtype_name)

    def record(pass_, provider, fn, grad_to_none=None):
        try:
            ms = bench(fn, grad_to_none)
            rows.append(dict(key, **{"pass": pass_, "provider": provider, "ms": ms,
                                     "tflops": flops(b, h, n, d, causal, pass_ == "bwd") / ms / 1e9}))
        except Exception as exc:  # noqa: BLE001
            rows.append(dict(key, **{"pass": pass_, "provider": provider, "error": repr(exc)[:300]}))
        torch.cuda.empty_cache()

    scale = 1 / math.sqrt(d)
    with torch.no_grad():
        record("fwd", "ours", lambda: ours_fwd(q, k, v, causal, fcfg))
        for name, backend in (("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION), ("sdpa_flash", SDPBackend.FLASH_ATTENTION)):
            def sdpa(backend=backend):
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            record("fwd", name, sdpa)
        if with_ref:
            record("fwd", "reference", lambda: ref.attention(q, k, v, causal=causal))
    # backward: the kernel's own backward launch (what autograd calls), and SDPA through autograd
    out, lse = ours_fwd(q.detach(), k.detach(), v.detach(), causal, fcfg)
    record("bwd", "ours", lambda: fa._flash_backward(do, q.detach(), k.detach(), v.detach(), out, lse, None,
                                                     None, None, 0, 0, causal, None, scale, bcfg))
    for name, backend in (("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION), ("sdpa_flash", SDPBackend.FLASH_ATTENTION)):
        try:
            with sdpa_kernel(backend):
                o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            record("bwd", name, lambda o=o: o.backward(do, retain_graph=True), grad_to_none=[q, k, v])
            del o
        except Exception as exc:  # noqa: BLE001
            rows.append(dict(key, **{"pass": "bwd", "provider": name, "error": repr(exc)[:300]}))
    # the autograd path end to end (forward + backward through torch.autograd), for the record
    def ours_autograd():
        fa.attention(q, k, v, causal=causal).backward(do)
    if fcfg is None and bcfg is None:
        record("fwd+bwd", "ours_autograd", ours_autograd, grad_to_none=[q, k, v])
    del q, k, v, do, out, lse
    torch.cuda.empty_cache()


def table(rows, ceilings):
    log(f"\nbf16 matmul ceiling {ceilings['bf16']:.0f} TFLOP/s, fp16 {ceilings['fp16']:.0f} TFLOP/s")
    provs = ["ours", "sdpa_cudnn", "sdpa_flash", "reference"]
    log(f"{'pass':4} {'dtype':5} {'D':>4} {'N':>6} {'causal':>6} | " + " ".join(f"{p:>10}" for p in provs)
        + " | ours/cudnn ours/fa2")
    keys = sorted({(r["pass"], r["dtype"], r["D"], r["N"], r["causal"]) for r in rows if r["pass"] != "fwd+bwd"},
                  key=lambda t: (t[0] != "fwd", t[1], t[2], t[4], t[3]))
    for key in keys:
        got = {r["provider"]: r.get("tflops") for r in rows
               if (r["pass"], r["dtype"], r["D"], r["N"], r["causal"]) == key}
        cells = " ".join(f"{got[p]:10.0f}" if got.get(p) else f"{'-':>10}" for p in provs)
        o, c, f2 = got.get("ours"), got.get("sdpa_cudnn"), got.get("sdpa_flash")
        r1 = f"{o / c:9.2f}x" if o and c else f"{'-':>10}"
        r2 = f"{o / f2:6.2f}x" if o and f2 else f"{'-':>7}"
        log(f"{key[0]:4} {key[1]:5} {key[2]:4d} {key[3]:6d} {str(key[4]):>6} | {cells} | {r1} {r2}")


def _old_cpu_brute_force(q, k, v, causal, window, scale):
    """The spec's float64 oracle as it was before issue 9: on the CPU, one query at a time."""
    q, k, v = (t.detach().to("cpu", torch.float64) for t in (q, k, v))
    b, h, nq, d = q.shape
    nk = k.shape[2]
    k, v = (t.repeat_interleave(h // t.shape[1], dim=1) for t in (k, v))
    out = torch.zeros(b, h, nq, d, dtype=torch.float64)
    for i in range(nq):
        keys = [j for j in range(nk) if (not causal or j <= i + nk - nq) and (window is None or j >= i + nk - nq - window)]
        if keys:
            s = torch.einsum("bhd,bhjd->bhj", q[:, :, i], k[:, :, keys]) * scale
            w = torch.exp(s - s.max(-1, keepdim=True).values)
            out[:, :, i] = torch.einsum("bhj,bhjd->bhd", w / w.sum(-1, keepdim=True), v[:, :, keys])
    return out


def spec_diag(n_cases: int, out_path: str, seconds: float) -> None:
    """Issue 9, 'the bundled reference fails on the GPU': (1) GQA vs repeated-KV MHA of the
    reference in float32 on the GPU against the old metamorphic bound (4 x err_ref + floor at |out|)
    and the new rule (each side vs the oracle, floor at the scores' magnitude); (2) the old CPU
    oracle's time per call while the GPU test run loads the host (its 16 intra-op threads per
    xdist worker), against one thread. Writes JSON."""
    from conformance.tolerance import rounding_floor
    from spec_tests.attention.oracles import attention_brute_force, out_floor_from
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    g = torch.Generator().manual_seed(0)
    ri = lambda a, b: int(torch.randint(a, b + 1, (1,), generator=g))  # noqa: E731
    res = dict(cases=0, gqa_ne_mha=0, old_rule_fails=0, new_rule_fails=0, worst_old_ratio=0.0, worst_new_ratio=0.0)
    for _ in range(n_cases):
        kvh, grp, b = ri(1, 2), (2, 4, 8)[ri(0, 2)], ri(1, 2)
        nq, nk, d = ri(1, 40), ri(1, 40), (16, 32, 64)[ri(0, 2)]
        causal, window = bool(ri(0, 1)), (None if ri(0, 1) else ri(0, 40))
        scale = None if ri(0, 1) else 0.05 + 0.95 * float(torch.rand((), generator=g))
        q = torch.randn(b, kvh * grp, nq, d, generator=g).to(dev)
        k, v = (torch.randn(b, kvh, nk, d, generator=g).to(dev) for _ in range(2))
        kw = dict(causal=causal, window=window, scale=scale)
        gqa = ref.attention(q, k, v, **kw)
        mha = ref.attention(q, k.repeat_interleave(grp, 1), v.repeat_interleave(grp, 1), **kw)
        oracle, _ = attention_brute_force(q, k, v, **kw)
        err_ref = (gqa.double() - oracle).abs().max().item()
        diff = (gqa - mha).abs().max().item()
        old = 4 * err_ref + rounding_floor(oracle.cpu(), torch.float32)
        new = 2 * err_ref + rounding_floor(out_floor_from(q, k, v, scale, oracle), torch.float32)
        err_mha = (mha.double() - oracle).abs().max().item()
        res["cases"] += 1
        res["gqa_ne_mha"] += diff > 0
        res["old_rule_fails"] += diff > old
        res["new_rule_fails"] += err_mha > new
        res["worst_old_ratio"] = max(res["worst_old_ratio"], diff / old)
        res["worst_new_ratio"] = max(res["worst_new_ratio"], err_mha / new)
    log(f"GQA vs MHA, reference, float32, {dev}:", res)
    q = torch.randn(2, 16, 40, 64); k = torch.randn(2, 2, 40, 64); v = torch.randn(2, 2, 40, 64)
    timing = {}
    for threads in (torch.get_num_threads(), 1):
        torch.set_num_threads(threads)
        _old_cpu_brute_force(q, k, v, True, None, 0.125)
        t0, calls = time.time(), 0
        while time.time() - t0 < seconds:
            _old_cpu_brute_force(q, k, v, True, None, 0.125)
            calls += 1
        timing[f"threads_{threads}_ms_per_call"] = round((time.time() - t0) / calls * 1e3, 2)
    res["old_cpu_oracle_40_queries"] = timing
    log("old CPU oracle, 40 queries, during the test run:", timing)
    with open(out_path, "w") as f:
        json.dump(res, f, indent=1)


def main():
    if "--spec-diag" in sys.argv:
        return spec_diag(int(os.environ.get("DIAG_CASES", "3000")), os.environ.get("DIAG_OUT", "spec_diag.json"),
                         float(os.environ.get("DIAG_SECONDS", "20")))
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="attention_h200.json")
    ap.add_argument("--tune", action="store_true")
    ap.add_argument("--tune-child", type=int, default=None)
    ap.add_argument("--tune-path", default=None)
    ap.add_argument("--quick", action="store_true", help="N=4096 only")
    args = ap.parse_args()
    if args.tune_child is not None:
        return tune_child(args.tune_child, args.tune_path)
    t_start = time.time()
    result = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__,
                  command="PYTHONPATH=. python3 spec_tests/bench/h200_attention.py " + " ".join(sys.argv[1:]))
    log(result)
    ceilings = dict(bf16=matmul_ceiling(torch.bfloat16), fp16=matmul_ceiling(torch.float16))
    result["matmul_ceiling_tflops"] = ceilings
    log("matmul ceilings", ceilings)
    best = tune(os.path.dirname(os.path.abspath(args.out))) if args.tune else {}
    result["tuned"] = {f"d{k[0]}_{'causal' if k[1] else 'full'}_n{k[2]}": v for k, v in best.items()
                       if k[0] != "raw"}
    result["tune_raw"] = {f"d{k[1]}": v for k, v in best.items() if k[0] == "raw"}
    log("tuned", result["tuned"])
    rows, checks = [], []
    result["rows"], result["checks"] = rows, checks
    for d in DS:
        for causal in (False, True):
            for dtype_name in DTYPES:
                for n in ((4096,) if args.quick else NS):
                    sel = best.get((d, causal, 1024 if n <= 1024 else 4096), {})
                    fcfg = fwd_cfg(sel["fwd"]) if sel.get("fwd") else None
                    bcfg = bwd_cfg(sel["bwd"]) if sel.get("bwd") else None
                    t0 = time.time()
                    try:
                        c = check_shape(1, 2, n, d, DTYPES[dtype_name], causal, fcfg, bcfg, with_bwd=n <= 4096)
                    except Exception as exc:  # noqa: BLE001
                        c = dict(error=repr(exc)[:300])
                        traceback.print_exc()
                    checks.append(dict(N=n, D=d, causal=causal, dtype=dtype_name, **c))
                    time_shape(n, d, dtype_name, causal, fcfg, bcfg, rows, with_ref=n <= 4096)
                    log(f"d={d} causal={causal} {dtype_name} N={n}: check {c} ({time.time() - t0:.1f} s)")
                    json.dump(result, open(args.out, "w"), indent=1)
    result["wall_s"] = time.time() - t_start
    json.dump(result, open(args.out, "w"), indent=1)
    table(rows, ceilings)


if __name__ == "__main__":
    main()
