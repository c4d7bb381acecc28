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
* decode attention, B in {1, 16, 64}, context 4096, GQA 32 query / 8 KV heads, head_dim 128,
  bf16: optimized.batch_invariant.decode_attention (fixed 32-key splits + ordered merge) vs torch
  SDPA (enable_gqa) and a split-free Triton kernel (one program per (sequence, KV head) streaming
  the whole context: also invariant, but only B x 8 programs), in TB/s of K + V bytes read
  against the measured copy bandwidth. CORRECTNESS FIRST: before any timing, each output is
  checked against a float64 oracle (first 2 sequences) with the tolerance rule (2 x SDPA's own
  error + 2 ulps), and ours is checked bitwise: sequence 0 in the batch == alone, also with
  ragged lengths; a failure stops the script (exit 1). Witness: SDPA's sequence 0 == alone.
Times are medians of triton.testing.do_bench (CUDA events, L2 flushed between runs).

    PYTHONPATH=. python3 spec_tests/bench/batch_invariant_h200.py --only decode --out decode.json
    TRITON_INTERPRET=1 PYTHONPATH=. python3 spec_tests/bench/batch_invariant_h200.py --only decode --smoke
(``--smoke``: tiny shapes on the CPU under the Triton interpreter, checks only, no timing.)
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time

import torch
import triton
import triton.language as tl

from optimized import batch_invariant as O


def bench(fn) -> float:
    return triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")  # ms


@triton.jit
def _decode_nosplit_kernel(q_ptr, k_ptr, v_ptr, len_ptr, out_ptr, Hkv, scale,
                           sqb, sqh, skb, skh, sks, svb, svh, svs,
                           G: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr, D_PAD: tl.constexpr,
                           BLOCK_N: tl.constexpr):
    """Split-free decode: one program per (sequence, KV head) streams the whole context with an
    online softmax (FlashAttention's loop). Its order depends only on the length (invariant), but
    it has only B * Hkv programs."""
    bh = tl.program_id(0)
    b = (bh // Hkv).to(tl.int64)
    hk = bh % Hkv
    n = tl.load(len_ptr + b)
    rg = tl.arange(0, G_PAD)
    rd = tl.arange(0, D_PAD)
    hq = hk * G + rg
    q = tl.load(q_ptr + b * sqb + hq[:, None] * sqh + rd[None, :], mask=(rg[:, None] < G) & (rd[None, :] < D), other=0.0)
    m_i = tl.full((G_PAD,), float("-inf"), tl.float32)
    l_i = tl.zeros((G_PAD,), tl.float32)
    acc = tl.zeros((G_PAD, D_PAD), tl.float32)
    for s0 in range(0, n, BLOCK_N):
        rs = s0 + tl.arange(0, BLOCK_N)
        kt = tl.load(k_ptr + b * skb + hk * skh + rs[None, :] * sks + rd[:, None],
                     mask=(rs[None, :] < n) & (rd[:, None] < D), other=0.0)
        v = tl.load(v_ptr + b * svb + hk * svh + rs[:, None] * svs + rd[None, :],
                    mask=(rs[:, None] < n) & (rd[None, :] < D), other=0.0)
        s = tl.dot(q, kt) * scale
        s = tl.where(rs[None, :] < n, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    o = acc / l_i[:, None]
    tl.store(out_ptr + (b * Hkv * G + hq[:, None]) * D + rd[None, :], o.to(out_ptr.dtype.element_ty),
             mask=(rg[:, None] < G) & (rd[None, :] < D))


def decode_nosplit(q, k, v, lengths, block_n=64):
    B, H, D = q.shape
    Hkv = k.shape[1]
    G = H // Hkv
    out = torch.empty_like(q)
    lens = lengths.to(device=q.device, dtype=torch.int32)
    _decode_nosplit_kernel[(B * Hkv,)](
        q, k, v, lens, out, Hkv, 1.0 / math.sqrt(D), q.stride(0), q.stride(1), k.stride(0), k.stride(1),
        k.stride(2), v.stride(0), v.stride(1), v.stride(2), G=G, G_PAD=max(16, triton.next_power_of_2(G)),
        D=D, D_PAD=max(16, triton.next_power_of_2(D)), BLOCK_N=block_n, num_warps=4)
    return out


def decode_bench(res, dev, smoke=False):
    """Decode attention: correctness first (exit 1 on a failure), then time."""
    from conformance.tolerance import ToleranceError, assert_close_to_oracle
    from reference.attention import attention as plain_attention
    import torch.nn.functional as F
    H, Hkv, D, ctx = (4, 2, 16, 70) if smoke else (32, 8, 128, 4096)
    batches = (1, 3) if smoke else (1, 16, 64)
    dt = torch.float16 if smoke else torch.bfloat16   # the interpreter truncates fp32 -> bf16
    g = torch.Generator(device=dev).manual_seed(1)
    copy_tbs = res.get("copy_tbs")
    rows, failures = [], []

    def sdpa(q, k, v):
        return F.scaled_dot_product_attention(q[:, :, None], k, v, enable_gqa=True)[:, :, 0]

    for B in batches:
        q = torch.randn(B, H, D, device=dev, dtype=dt, generator=g)
        k = torch.randn(B, Hkv, ctx, D, device=dev, dtype=dt, generator=g)
        v = torch.randn(B, Hkv, ctx, D, device=dev, dtype=dt, generator=g)
        lens = torch.full((B,), ctx, device=dev, dtype=torch.int32)
        fns = {"ours": lambda: O.decode_attention(q, k, v, lens), "sdpa": lambda: sdpa(q, k, v),
               "split_free": lambda: decode_nosplit(q, k, v, lens),
               "ours_kernels": lambda: O._decode_kernels(q, k, v, lens)}   # without the argument checks
        outs = {name: f() for name, f in fns.items()}
        if not torch.equal(outs["ours"], outs["ours_kernels"]):
            failures.append(f"decode B={B}: the kernels alone differ from decode_attention")
        nb = min(B, 2)
        oracle = torch.stack([plain_attention(q[i:i + 1, :, None].double(), k[i:i + 1].double(),
                                              v[i:i + 1].double())[0, :, 0] for i in range(nb)])
        r = dict(B=B, ctx=ctx, H=H, Hkv=Hkv, D=D, dtype=str(dt))
        for name in ("ours", "split_free"):
            try:
                assert_close_to_oracle(outs[name][:nb], outs["sdpa"][:nb], oracle, name=f"decode {name} B={B}")
                r[f"{name}_ok"] = True
            except ToleranceError as e:
                failures.append(str(e))
                r[f"{name}_ok"] = False
            r[f"{name}_max_err"] = float((outs[name][:nb].double() - oracle).abs().max())
        r["sdpa_max_err"] = float((outs["sdpa"][:nb].double() - oracle).abs().max())
        alone = O.decode_attention(q[:1], k[:1], v[:1], lens[:1])
        r["ours_seq0_same_as_alone"] = torch.equal(outs["ours"][0], alone[0])
        r["sdpa_seq0_same_as_alone"] = torch.equal(outs["sdpa"][0], sdpa(q[:1], k[:1], v[:1])[0])
        ragged = torch.randint(1, ctx + 1, (B,), device=dev, generator=g, dtype=torch.int32)
        n0 = int(ragged[0])
        alone_r = O.decode_attention(q[:1], k[:1, :, :n0].contiguous(), v[:1, :, :n0].contiguous(), ragged[:1])
        r["ours_ragged_seq0_same_as_alone"] = torch.equal(O.decode_attention(q, k, v, ragged)[0], alone_r[0])
        if not (r["ours_seq0_same_as_alone"] and r["ours_ragged_seq0_same_as_alone"]):
            failures.append(f"decode ours B={B}: sequence 0 differs from the same sequence alone")
        print(f"decode check B={B}: max err vs float64 (2 seqs): ours {r['ours_max_err']:.2e}, "
              f"split-free {r['split_free_max_err']:.2e}, SDPA {r['sdpa_max_err']:.2e}; "
              f"seq 0 == alone: ours {r['ours_seq0_same_as_alone']} (ragged {r['ours_ragged_seq0_same_as_alone']}), "
              f"SDPA {r['sdpa_seq0_same_as_alone']}", flush=True)
        rows.append((r, fns, 2 * B * Hkv * ctx * D * k.element_size()))
    if failures:
        print("CORRECTNESS FAILED, not timing:\n" + "\n".join(failures), flush=True)
        res["decode"] = [r for r, _, _ in rows]
        return False
    if smoke:
        res["decode"] = [r for r, _, _ in rows]
        return True
    print(f"{'B':>4} {'ours us':>9} {'TB/s':>6} {'%copy':>6} {'kernels us':>11} {'TB/s':>6} {'%copy':>6} "
          f"{'SDPA us':>9} {'TB/s':>6} {'split-free us':>14} {'TB/s':>6}")
    for r, fns, nbytes in rows:
        for name, f in fns.items():
            t = bench(f)
            r[f"{name}_ms"] = t
            r[f"{name}_tbs"] = nbytes / t / 1e9
            if copy_tbs:
                r[f"{name}_frac_copy"] = r[f"{name}_tbs"] / copy_tbs
        pc = lambda n: f"{100 * r[n + '_frac_copy']:.0f}" if copy_tbs else "-"  # noqa: E731
        print(f"{r['B']:>4} {1e3 * r['ours_ms']:>9.1f} {r['ours_tbs']:>6.2f} {pc('ours'):>6} "
              f"{1e3 * r['ours_kernels_ms']:>11.1f} {r['ours_kernels_tbs']:>6.2f} {pc('ours_kernels'):>6} "
              f"{1e3 * r['sdpa_ms']:>9.1f} {r['sdpa_tbs']:>6.2f} {1e3 * r['split_free_ms']:>14.1f} "
              f"{r['split_free_tbs']:>6.2f}", flush=True)
    res["decode"] = [r for r, _, _ in rows]
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="batch_invariant_h200.json")
    ap.add_argument("--only", choices=("all", "decode"), default="all")
    ap.add_argument("--smoke", action="store_true", help="decode checks on tiny CPU shapes (TRITON_INTERPRET=1)")
    args = ap.parse_args()
    if args.smoke:
        if os.environ.get("TRITON_INTERPRET") != "1":
            sys.exit("--smoke needs TRITON_INTERPRET=1")
        from conformance import triton_interpreter
        triton_interpreter.apply()
        res = {}
        ok = decode_bench(res, "cpu", smoke=True)
        print(json.dumps(res["decode"], indent=1))
        sys.exit(0 if ok else 1)
    dev = "cuda"
    res = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
           "python": platform.python_version(), "tiles": {str(k): v for k, v in O.TILES.items()}}
    g = torch.Generator(device=dev).manual_seed(0)
    if args.only == "decode":
        x = torch.empty(8192, 8192, device=dev, dtype=torch.bfloat16)
        y = torch.empty_like(x)
        res["copy_tbs"] = 2 * x.numel() * x.element_size() / bench(lambda: y.copy_(x)) / 1e9
        print(f"copy 8192x8192 bf16: {res['copy_tbs']:.2f} TB/s", flush=True)
        ok = decode_bench(res, dev)
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)
        sys.exit(0 if ok else 1)
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
    ok = decode_bench(res, dev)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
