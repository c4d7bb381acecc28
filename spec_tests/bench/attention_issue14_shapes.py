"""H200: the six shapes of issue 14's table, forward and backward, ours vs torch SDPA's cuDNN and
FlashAttention-2 backends, with GQA done the way each provider does it natively.

Shapes (B, Hq/Hkv, N, D, dtype): 4,16/16,4k,128,fp16 | 1,16/16,16k causal,128,fp16 |
4,32/32,4k,64,fp16 | 8,32/8,2k causal,128,bf16 | 32,32/8,512 causal,128,bf16 |
2,8/8,4k causal,256,bf16. FLOPs = 4·B·Hq·N²·D (×0.5 causal, ×2.5 backward).

Before timing, each shape is checked natively: 2 query heads (1 KV head for GQA) of the shape
against the float64 oracle with the tolerance rule, forward and backward. GQA peers: SDPA with
``enable_gqa=True``; a backend that refuses it gets K/V repeated to Hq heads (recorded in the row
as ``kv="repeated"``: that costs the peer the larger K/V reads, so it is marked). Also sweeps a few
forward tiles at the two GQA shapes (the many-short-sequence case), each checked first.

Host-descriptor forward (``_flash_forward`` config keys HOST_DESC / PERSISTENT, off by default):
every shape times ``ours_host`` (the shipped tile + HOST_DESC) and ``ours_host_persist`` (+ PERSISTENT;
``_sN`` when the shipped num_stages leaves a persistent program over the 227 KiB of shared memory,
which keeps an extra O buffer), and the GQA shapes time ``ours_host_{tile}`` / ``ours_hostp_{tile}``
over GQA_HOST_TILES (persistent also over GQA_PERSIST_EXTRA). Each is checked first like the tiles
(out vs the oracle; the check row also says whether out and lse have the bits of the
device-descriptor kernel at the same tile).

    PYTHONPATH=. python3 spec_tests/bench/attention_issue14_shapes.py --out $OUT/attention_issue14_h200.json
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

import optimized.flash_attention as fa
import reference.attention as ref
from conformance.tolerance import assert_close_to_oracle
from spec_tests.attention.oracles import lse_floor_from

SHAPES = [  # B, Hq, Hkv, N, D, causal, dtype
    (4, 16, 16, 4096, 128, False, "fp16"),
    (1, 16, 16, 16384, 128, True, "fp16"),
    (4, 32, 32, 4096, 64, False, "fp16"),
    (8, 32, 8, 2048, 128, True, "bf16"),
    (32, 32, 8, 512, 128, True, "bf16"),
    (2, 8, 8, 4096, 256, True, "bf16"),
]
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
GQA_FWD_SWEEP = [(64, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 3), (64, 128, 4, 3), (64, 64, 4, 4),
                 (128, 64, 4, 3)]
GQA_HOST_TILES = [(64, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 3)]
GQA_PERSIST_EXTRA = [(64, 64, 4, 2), (128, 128, 8, 2)]  # a persistent program holds one more M x D tile
HOST_KEYS = ("HOST_DESC", "PERSISTENT", "PROGRAMS_PER_SM")


def tile_cfg(bm, bn, w, s) -> dict:
    return dict(BLOCK_M=bm, BLOCK_N=bn, num_warps=w, num_stages=s, WARP_SPEC=False)


def tile_name(cfg) -> str:
    return f"{cfg['BLOCK_M']}x{cfg['BLOCK_N']}w{cfg['num_warps']}s{cfg['num_stages']}"


def persistent_smem(cfg, d, dtype) -> int:
    """Shared memory of a persistent host-descriptor program at this tile (fa.fwd_shared_bytes)."""
    return fa.fwd_shared_bytes(cfg["BLOCK_M"], cfg["BLOCK_N"], fa._block_d(d), cfg["num_stages"],
                               dtype.itemsize, persistent=True)


def persistent_cfg(cfg, d, dtype) -> tuple[dict, str]:
    """cfg + HOST_DESC + PERSISTENT, num_stages lowered until a program fits in shared memory;
    the provider suffix says the stages when they were lowered."""
    out = dict(cfg, HOST_DESC=True, PERSISTENT=True)
    while out["num_stages"] > 1 and persistent_smem(out, d, dtype) > fa.SMEM_PER_PROGRAM:
        out["num_stages"] -= 1
    return out, ("" if out["num_stages"] == cfg["num_stages"] else f"_s{out['num_stages']}")


def log(*a):
    print(*a, flush=True)


def bench(fn, grad_to_none=None) -> float:
    return triton.testing.do_bench(fn, warmup=25, rep=100, grad_to_none=grad_to_none, return_mode="median")


def flops(b, h, n, d, causal, bwd=False):
    return 4.0 * b * h * n * n * d * (0.5 if causal else 1.0) * (2.5 if bwd else 1.0)


def make(b, hq, hkv, n, d, dtype, seed=0, grad=False):
    g = torch.Generator(device="cuda").manual_seed(seed)
    shapes = [(b, hq, n, d), (b, hkv, n, d), (b, hkv, n, d)]
    return [torch.randn(s, device="cuda", dtype=dtype, generator=g).requires_grad_(grad) for s in shapes]


def check(hq_over_hkv, n, d, causal, dtype, fcfg=None) -> dict:
    """2 query heads (sharing one KV head when GQA) against the float64 oracle, fwd (out, lse) and
    bwd. With a forward config: forward only (an error launching it is the result), and when the
    config takes the host-descriptor kernel, whether out and lse have the bits of the
    device-descriptor kernel at the same tiles (``bits``)."""
    hkv = 1 if hq_over_hkv > 1 else 2
    q, k, v = make(1, 2, hkv, min(n, 4096), d, dtype, seed=7)
    scale = 1 / math.sqrt(d)
    res = {}
    try:
        out, lse = fa._flash_forward(q, k, v, None, None, 0, 0, causal, None, scale,
                                     None if fcfg is None else dict(fcfg))
    except Exception as exc:  # noqa: BLE001 - e.g. out of shared memory for this tile
        if fcfg is None:
            raise
        return dict(fwd=f"error: {exc!r}"[:300])
    kr, vr = (k.repeat_interleave(2, 1), v.repeat_interleave(2, 1)) if hkv == 1 else (k, v)
    r_out, r_lse = ref.attention(q, kr, vr, causal=causal, return_lse=True)
    o_out, o_lse = ref.attention(q.double(), kr.double(), vr.double(), causal=causal, return_lse=True)
    try:
        assert_close_to_oracle(out, r_out, o_out, name="out")
        res["fwd"] = "ok"
    except AssertionError as exc:
        res["fwd"] = str(exc).splitlines()[0]
    try:
        assert_close_to_oracle(lse, r_lse, o_lse, name="lse", floor_from=lse_floor_from(q, kr, scale))
        res["lse"] = "ok"
    except AssertionError as exc:
        res["lse"] = str(exc).splitlines()[0]
    if fcfg is not None and fcfg.get("HOST_DESC"):
        tiles = {key: val for key, val in fcfg.items() if key not in HOST_KEYS}
        d_out, d_lse = fa._flash_forward(q, k, v, None, None, 0, 0, causal, None, scale, tiles)
        same = torch.equal(out.view(torch.int16), d_out.view(torch.int16)) and torch.equal(
            lse.view(torch.int32), d_lse.view(torch.int32))
        res["bits"] = "same" if same else (
            f"differ: out {(out.double() - d_out.double()).abs().max().item():.3e}, "
            f"lse {(lse.double() - d_lse.double()).nan_to_num().abs().max().item():.3e}")
    if fcfg is None:
        do = torch.randn_like(q)
        dq, dk, dv = fa._flash_backward(do, q, k, v, out, lse, None, None, None, 0, 0, causal, None, scale)
        grads = {}
        for name, dt in (("ref", dtype), ("oracle", torch.float64)):
            xs = [t.detach().to(dt).requires_grad_() for t in (q, k, v)]
            kk, vv = (xs[1].repeat_interleave(2, 1), xs[2].repeat_interleave(2, 1)) if hkv == 1 else xs[1:]
            ref.attention(xs[0], kk, vv, causal=causal).backward(do.to(dt))
            grads[name] = [x.grad for x in xs]
        floor_from = torch.cat([g.reshape(-1) for g in grads["oracle"]])
        try:
            for nm, a, r, o in zip(("dq", "dk", "dv"), (dq, dk, dv), grads["ref"], grads["oracle"]):
                assert_close_to_oracle(a, r, o, factor=3.0, name=nm, floor_from=floor_from)
            res["bwd"] = "ok"
        except AssertionError as exc:
            res["bwd"] = str(exc).splitlines()[0]
    return res


def sdpa_call(backend, q, k, v, causal):
    """SDPA under one backend; enable_gqa when it accepts it, else K/V repeated (returned flag)."""
    gqa = q.shape[1] != k.shape[1]
    if gqa:
        try:
            with sdpa_kernel(backend):
                F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
            return (lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)), "native"
        except RuntimeError:
            r = q.shape[1] // k.shape[1]
            kr = k.detach().repeat_interleave(r, 1).requires_grad_(k.requires_grad)
            vr = v.detach().repeat_interleave(r, 1).requires_grad_(v.requires_grad)
            return (lambda: F.scaled_dot_product_attention(q, kr, vr, is_causal=causal)), "repeated"
    return (lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)), "same heads"


def time_shape(shape, rows):
    b, hq, hkv, n, d, causal, dtn = shape
    dtype = DTYPES[dtn]
    q, k, v = make(b, hq, hkv, n, d, dtype, grad=True)
    do = torch.randn_like(q)
    scale = 1 / math.sqrt(d)
    key = dict(B=b, Hq=hq, Hkv=hkv, N=n, D=d, causal=causal, dtype=dtn)

    def rec(pass_, prov, fn, extra=None, grad_to_none=None):
        try:
            ms = bench(fn, grad_to_none)
            rows.append(dict(key, **{"pass": pass_, "provider": prov, "ms": ms,
                                     "tflops": flops(b, hq, n, d, causal, pass_ == "bwd") / ms / 1e9}, **(extra or {})))
        except Exception as exc:  # noqa: BLE001
            rows.append(dict(key, **{"pass": pass_, "provider": prov, "error": repr(exc)[:300]}))
        torch.cuda.empty_cache()

    with torch.no_grad():
        rec("fwd", "ours", lambda: fa._flash_forward(q, k, v, None, None, 0, 0, causal, None, scale))
    for name, backend in (("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION), ("sdpa_flash", SDPBackend.FLASH_ATTENTION)):
        try:
            fn, how = sdpa_call(backend, q, k, v, causal)
        except Exception as exc:  # noqa: BLE001
            rows.append(dict(key, **{"pass": "fwd", "provider": name, "error": repr(exc)[:300]}))
            continue

        def fwd(fn=fn, backend=backend):
            with torch.no_grad(), sdpa_kernel(backend):
                return fn()
        rec("fwd", name, fwd, dict(kv=how))
        try:
            with sdpa_kernel(backend):
                o = fn()
            rec("bwd", name, lambda o=o: o.backward(do, retain_graph=True), dict(kv=how), grad_to_none=[q, k, v])
            del o
        except Exception as exc:  # noqa: BLE001
            rows.append(dict(key, **{"pass": "bwd", "provider": name, "error": repr(exc)[:300]}))
    out, lse = fa._flash_forward(q.detach(), k.detach(), v.detach(), None, None, 0, 0, causal, None, scale)
    rec("bwd", "ours", lambda: fa._flash_backward(do, q.detach(), k.detach(), v.detach(), out, lse, None,
                                                  None, None, 0, 0, causal, None, scale))

    def checked_fwd(prov, cfg):
        """Check the forward config at this shape's heads/dtype, then time it (or record why not)."""
        c = check(hq // hkv, n, d, causal, dtype, cfg)
        info = {f"check_{name}": val for name, val in c.items() if name != "fwd"}
        if c["fwd"] != "ok":
            rows.append(dict(key, **{"pass": "fwd", "provider": prov, "error": c["fwd"]}, **info))
            return
        with torch.no_grad():
            rec("fwd", prov, lambda: fa._flash_forward(q, k, v, None, None, 0, 0, causal, None, scale, dict(cfg)),
                info)

    base = {key: val for key, val in fa.fwd_config(d, causal, q.device, n).items() if key not in HOST_KEYS}
    checked_fwd("ours_device", base)                  # the shipped tile, device-built descriptors
    checked_fwd("ours_host", dict(base, HOST_DESC=True))
    pcfg, suffix = persistent_cfg(base, d, dtype)
    checked_fwd("ours_host_persist" + suffix, pcfg)
    if hkv != hq:  # the many-short-sequence / GQA forward tiles
        for t in GQA_FWD_SWEEP:
            checked_fwd(f"ours_{tile_name(tile_cfg(*t))}", tile_cfg(*t))
        for t in GQA_HOST_TILES:
            checked_fwd(f"ours_host_{tile_name(tile_cfg(*t))}", dict(tile_cfg(*t), HOST_DESC=True))
        for t in GQA_HOST_TILES + GQA_PERSIST_EXTRA:
            cfg, prov = dict(tile_cfg(*t), HOST_DESC=True, PERSISTENT=True), f"ours_hostp_{tile_name(tile_cfg(*t))}"
            smem = persistent_smem(cfg, d, dtype)
            if smem > fa.SMEM_PER_PROGRAM:  # Triton would refuse the launch (out of resource)
                rows.append(dict(key, **{"pass": "fwd", "provider": prov, "error":
                                         f"skipped: {smem} B of shared memory > {fa.SMEM_PER_PROGRAM}"}))
                continue
            checked_fwd(prov, cfg)
    del q, k, v, do, out, lse
    torch.cuda.empty_cache()


def table(rows):
    log(f"{'shape':38} {'pass':4} | {'ours':>6} {'cuDNN':>6} {'FA2':>6} | {'/cuDNN':>7} {'/FA2':>6} | "
        f"{'host':>6} {'host+p':>6} | best tile")
    for shape in SHAPES:
        b, hq, hkv, n, d, causal, dtn = shape
        name = f"{b},{hq}/{hkv},{n}{' causal' if causal else ''},{d},{dtn}"
        for pass_ in ("fwd", "bwd"):
            got = {r["provider"]: r.get("tflops") for r in rows if r["pass"] == pass_ and
                   (r["B"], r["Hq"], r["Hkv"], r["N"], r["D"], r["causal"], r["dtype"]) == shape}
            o, c, f2 = got.get("ours"), got.get("sdpa_cudnn"), got.get("sdpa_flash")
            host = got.get("ours_host")
            persist = max((t for p, t in got.items() if p.startswith("ours_host_persist") and t), default=None)
            tiles = {p: t for p, t in got.items() if p.startswith("ours_") and t}
            best = max(tiles.items(), key=lambda kv: kv[1]) if tiles else None
            fmt = lambda x: f"{x:6.0f}" if x else f"{'-':>6}"  # noqa: E731
            log(f"{name:38} {pass_:4} | {fmt(o)} {fmt(c)} {fmt(f2)} | "
                f"{(o / c if o and c else float('nan')):6.2f}x {(o / f2 if o and f2 else float('nan')):5.2f}x | "
                f"{fmt(host)} {fmt(persist)} | " + (f"{best[0]} {best[1]:.0f}" if best else ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="attention_issue14_h200.json")
    args = ap.parse_args()
    t0 = time.time()
    result = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__,
                  command="PYTHONPATH=. python3 spec_tests/bench/attention_issue14_shapes.py " + " ".join(sys.argv[1:]),
                  rows=[], checks=[])
    for shape in SHAPES:
        b, hq, hkv, n, d, causal, dtn = shape
        c = check(hq // hkv, n, d, causal, DTYPES[dtn])
        result["checks"].append(dict(B=b, Hq=hq, Hkv=hkv, N=n, D=d, causal=causal, dtype=dtn, **c))
        log(shape, c)
        time_shape(shape, result["rows"])
        json.dump(result, open(args.out, "w"), indent=1)
    result["wall_s"] = time.time() - t0
    json.dump(result, open(args.out, "w"), indent=1)
    table(result["rows"])


if __name__ == "__main__":
    main()
