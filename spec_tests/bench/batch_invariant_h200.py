"""Batch-invariant kernels on the H200: what invariance costs, and a witness that plain torch is
not invariant (docs/batch_invariant.md, docs/performance.md).

    PYTHONPATH=. python3 spec_tests/bench/batch_invariant_h200.py --out batch_invariant_h200.json

* matmul (M, 4096) @ (4096, 4096) bf16 for M in {1, 16, 128, 1024, 4096}: optimized.batch_invariant
  .matmul vs torch.matmul (cuBLAS), TFLOP/s (2 M N K / median time).
* rms_norm and log_softmax of 8192 x 8192 bf16: the invariant kernels vs torch eager, in TB/s of
  (read + write) bytes, against a measured copy (y.copy_(x)) bandwidth.
* witness: row 0 of torch.matmul(A[:M], W) vs torch.matmul(A[:1], W), bitwise, for each M (and
  the same for the invariant kernel; and torch.log_softmax rows). An observation, not a verdict.
* the reference model (reference/model.py, default config, float32) forward of 16 x 64 tokens
  with and without optimized invariant_mode(): the end-to-end slowdown.
Times are medians of triton.testing.do_bench (CUDA events, L2 flushed between runs).
"""
from __future__ import annotations

import argparse
import json
import platform

import torch
import triton

from optimized import batch_invariant as O


def bench(fn) -> float:
    return triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")  # ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="batch_invariant_h200.json")
    args = ap.parse_args()
    dev = "cuda"
    res = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
           "python": platform.python_version(), "tiles": {str(k): v for k, v in O.TILES.items()}}
    g = torch.Generator(device=dev).manual_seed(0)
    K = N = 4096
    A = torch.randn(4096, K, device=dev, generator=g, dtype=torch.bfloat16)
    W = torch.randn(K, N, device=dev, generator=g, dtype=torch.bfloat16)
    rows = []
    for M in (1, 16, 128, 1024, 4096):
        a = A[:M].contiguous()
        t_inv = bench(lambda: O.matmul(a, W))
        t_cub = bench(lambda: torch.matmul(a, W))
        fl = 2 * M * N * K
        torch_same = torch.equal(torch.matmul(a, W)[0], torch.matmul(A[:1], W)[0])
        inv_same = torch.equal(O.matmul(a, W)[0], O.matmul(A[:1].contiguous(), W)[0])
        inv_vs_cublas_err = float((O.matmul(a, W).float() - torch.matmul(a, W).float()).abs().max())
        r = dict(M=M, invariant_ms=t_inv, cublas_ms=t_cub, invariant_tflops=fl / t_inv / 1e9,
                 cublas_tflops=fl / t_cub / 1e9, ratio=t_cub / t_inv,
                 torch_row0_same_as_alone=torch_same, invariant_row0_same_as_alone=inv_same,
                 max_abs_diff_vs_cublas=inv_vs_cublas_err)
        rows.append(r)
        print(f"matmul M={M:5d} K=N=4096 bf16: invariant {r['invariant_tflops']:7.1f} TFLOP/s, "
              f"cuBLAS {r['cublas_tflops']:7.1f} TFLOP/s, ratio {r['ratio']:.2f}; "
              f"row 0 == alone: torch {torch_same}, invariant {inv_same}", flush=True)
    res["matmul"] = rows

    x = torch.randn(8192, 8192, device=dev, generator=g, dtype=torch.bfloat16)
    w = torch.randn(8192, device=dev, generator=g, dtype=torch.bfloat16)
    y = torch.empty_like(x)
    nbytes = 2 * x.numel() * x.element_size()
    t_copy = bench(lambda: y.copy_(x))
    copy_tbs = nbytes / t_copy / 1e9
    res["copy_tbs"] = copy_tbs
    print(f"copy 8192x8192 bf16: {copy_tbs:.2f} TB/s", flush=True)

    def eager_rms(x, w, eps=1e-6):
        xf = x.float()
        return w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)

    rowops = []
    for name, inv, eager in (
            ("rms_norm", lambda: O.rms_norm(x, w, 1e-6), lambda: eager_rms(x, w)),
            ("rms_norm (F.rms_norm)", None, lambda: torch.nn.functional.rms_norm(x, (8192,), w, 1e-6)),
            ("log_softmax", lambda: O.log_softmax(x), lambda: torch.log_softmax(x, -1))):
        r = dict(op=name)
        if inv is not None:
            t = bench(inv)
            r.update(invariant_ms=t, invariant_tbs=nbytes / t / 1e9, invariant_frac_copy=nbytes / t / 1e9 / copy_tbs)
        t = bench(eager)
        r.update(eager_ms=t, eager_tbs=nbytes / t / 1e9)
        rowops.append(r)
        print(f"{name} 8192x8192 bf16: " + (f"invariant {r['invariant_tbs']:.2f} TB/s "
              f"({100 * r['invariant_frac_copy']:.0f}% of copy), " if inv is not None else "")
              + f"torch eager {r['eager_tbs']:.2f} TB/s", flush=True)
    res["rowops"] = rowops
    # witness for log_softmax / rms_norm rows
    ls_same = torch.equal(torch.log_softmax(x[:4096], -1)[0], torch.log_softmax(x[:1], -1)[0])
    inv_ls_same = torch.equal(O.log_softmax(x[:4096])[0], O.log_softmax(x[:1])[0])
    res["log_softmax_row0_same_as_alone"] = dict(torch=ls_same, invariant=inv_ls_same)
    print(f"log_softmax row 0 of 4096 == alone: torch {ls_same}, invariant {inv_ls_same}")

    # end to end: the reference model's forward with and without the mode
    from reference.model import ModelConfig, Transformer
    for dtype in (torch.float32, torch.bfloat16):
        model = Transformer(ModelConfig(dtype=dtype, max_seq_len=128), seed=0).to(dev)
        tokens = torch.randint(0, 128, (16, 64), device=dev, generator=g)
        with torch.no_grad():
            t_plain = bench(lambda: model(tokens))
            with O.invariant_mode():
                t_mode = bench(lambda: model(tokens))
                out_mode = model(tokens)
                out_one = model(tokens[3:4])
        same = torch.equal(out_mode[3], out_one[0])
        with torch.no_grad():
            plain_same = torch.equal(model(tokens)[3], model(tokens[3:4])[0])
        res.setdefault("model", []).append(dict(dtype=str(dtype), plain_ms=t_plain, mode_ms=t_mode,
                                                slowdown=t_mode / t_plain, mode_row3_same_as_alone=same,
                                                plain_row3_same_as_alone=plain_same))
        print(f"model fwd 16x64 {dtype}: plain {t_plain:.3f} ms, invariant mode {t_mode:.3f} ms "
              f"({t_mode / t_plain:.1f}x); row 3 == alone: mode {same}, plain {plain_same}", flush=True)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
