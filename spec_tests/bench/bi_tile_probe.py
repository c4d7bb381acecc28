"""Probe (H200): do other tile shapes of optimized/batch_invariant.py's matmul kernel give the SAME
bits as the shipped one (same BLOCK_K, same K loop, so the same per-element order by construction
if the MMA instruction's internal K order does not depend on the tile's M/N size), and how fast
are they at small M? Evidence for or against an M-bucketed tile choice that keeps invariance.

    PYTHONPATH=. python3 spec_tests/bench/bi_tile_probe.py --out $OUT/bi_tile_probe.json
"""
from __future__ import annotations

import argparse
import json

import torch
import triton
from triton.testing import do_bench

import optimized.batch_invariant as bi

ALTS = {
    torch.bfloat16: [(128, 128, 64, 8, 3), (64, 256, 64, 4, 3), (64, 128, 64, 4, 4), (64, 64, 64, 4, 4),
                     (32, 64, 64, 4, 4), (16, 64, 64, 4, 4), (16, 32, 64, 2, 4)],
    torch.float32: [(32, 64, 32, 4, 3), (16, 64, 32, 4, 3), (64, 32, 32, 4, 3)],
}


def run(a, b, tile):
    M, K = a.shape
    N = b.shape[1]
    bm, bn, bk, warps, stages = tile
    c = torch.empty(M, N, dtype=a.dtype, device=a.device)
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    bi._matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                            c.stride(0), c.stride(1), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                            IEEE=a.dtype == torch.float32, GROUP_M=8, num_warps=warps, num_stages=stages)
    return c


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bi_tile_probe.json")
    args = ap.parse_args()
    torch.manual_seed(0)
    rows = []
    for dtype, alts in ALTS.items():
        K = N = 4096
        a = torch.randn(512, K, device="cuda", dtype=dtype)
        b = torch.randn(K, N, device="cuda", dtype=dtype) / 64
        ship = bi.TILES[dtype]
        base = run(a, b, ship)
        for tile in [ship] + alts:
            same = {}
            for M in (512, 300, 129, 16, 1):
                try:
                    c = run(a[:M], b, tile)
                except Exception as e:  # noqa: BLE001  (a config that does not compile)
                    same[M] = f"error: {type(e).__name__}: {str(e)[:80]}"
                    continue
                same[M] = bool(torch.equal(c, base[:M]))
            times = {}
            for M in (1, 16, 128, 1024, 4096):
                x = torch.randn(M, K, device="cuda", dtype=dtype)
                try:
                    t = do_bench(lambda: run(x, b, tile), warmup=25, rep=100)
                except Exception:  # noqa: BLE001
                    continue
                tc = do_bench(lambda: torch.matmul(x, b), warmup=25, rep=100)
                times[M] = dict(ms=t, cublas_ms=tc, tflops=2 * M * K * N / t / 1e9, ratio=tc / t)
            row = dict(dtype=str(dtype), tile=tile, shipped=tile == ship, bitwise_equal_to_shipped=same,
                       times=times)
            rows.append(row)
            print(str(dtype), tile, "same bits:", same, " ratio vs cuBLAS:",
                  {m: round(v["ratio"], 2) for m, v in times.items()}, flush=True)
    json.dump(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, rows=rows), open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
