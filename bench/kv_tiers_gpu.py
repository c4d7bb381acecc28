"""KV offload and reload bandwidth on the device machine, and the reload-vs-recompute crossover with
those measured numbers (course 07.04-07.06; concept kv_tiers, docs/kv_tiers.md).

    python bench/kv_tiers_gpu.py                      # on a GPU; JSON to $OUT/kv_tiers_gpu.json ($OUT defaults to .)
    python bench/kv_tiers_gpu.py --device cpu --quick # the CPU path (host copies, the disk): a smoke run

What it measures (each a median of timed repeats, bytes / seconds):

* ``hbm->host`` and ``host->hbm``: ``copy_`` between a device tensor and a pinned host tensor (and a
  pageable one, for the difference), synchronised, for KV blocks of 2 MiB (16 tokens of Llama-3-8B
  in bf16: 2 x 32 layers x 8 KV heads x 128 x 2 bytes x 16) up to 1 GiB;
* ``host->disk`` and ``disk->host``: a block's raw bytes written to a file (``fsync``) and read back
  (after ``posix_fadvise(DONTNEED)`` where the platform has it, so the read is not the page cache's);
* the reference store (reference/kv_tiers.py ``KVTierStore`` with hbm on the device): ``offload`` to
  host and ``get`` back of one block, per call -- its half-and-half copy and bookkeeping included;
* the rate a prefill's matmuls reach: a bf16 (tokens x 4096) @ (4096 x 14336) GEMM (Llama-3-8B's
  MLP shape) at 2,048 tokens -- a stand-in for the whole prefill's FLOP rate (attention and the
  small matmuls are slower), stated as such (``--quick``: float32 8 x 512 x 1792 on the CPU).

Then ``crossover_tokens`` (reference/kv_tiers.py) of Llama-3-8B and Llama-3-70B shapes at the
measured host -> hbm and disk -> host bandwidths and the measured GEMM rate, with latency 0 and
the measured fixed cost of one small transfer (a synchronised 4 KiB pinned copy) as the latency. Nothing here is asserted; the numbers go to the
JSON and to docs/kv_tiers.md with this command.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from reference.kv_tiers import KVTierStore, crossover_tokens, reload_seconds  # noqa: E402
from reference.model import ModelConfig  # noqa: E402

LLAMA3_8B = ModelConfig(vocab_size=128256, dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, hidden_dim=14336,
                        rope_theta=500000.0, max_seq_len=8192, dtype=torch.bfloat16)
LLAMA3_70B = ModelConfig(vocab_size=128256, dim=8192, n_layers=80, n_heads=64, n_kv_heads=8, hidden_dim=28672,
                         rope_theta=500000.0, max_seq_len=8192, dtype=torch.bfloat16)
MiB = 1 << 20


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_seconds(fn, device: torch.device, repeats: int, before=None) -> float:
    """The median wall time of ``fn()`` over ``repeats`` calls after one warm-up; ``before()`` runs
    outside the clock before each call."""
    if before:
        before()
    fn()
    _sync(device)
    out = []
    for _ in range(repeats):
        if before:
            before()
        _sync(device)
        t0 = time.perf_counter()
        fn()
        _sync(device)
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def link_bandwidths(device: torch.device, sizes: list[int], repeats: int) -> list[dict]:
    rows = []
    for size in sizes:
        dev = torch.randint(0, 255, (size,), dtype=torch.uint8, device=device)
        pinned = torch.empty(size, dtype=torch.uint8, pin_memory=device.type == "cuda")
        pageable = torch.empty(size, dtype=torch.uint8)
        row = dict(bytes=size)
        row["hbm->host pinned"] = size / median_seconds(lambda: pinned.copy_(dev, non_blocking=True), device, repeats)
        row["host->hbm pinned"] = size / median_seconds(lambda: dev.copy_(pinned, non_blocking=True), device, repeats)
        row["hbm->host pageable"] = size / median_seconds(lambda: pageable.copy_(dev), device, repeats)
        row["host->hbm pageable"] = size / median_seconds(lambda: dev.copy_(pageable), device, repeats)
        rows.append(row)
        del dev, pinned, pageable
    return rows


def disk_bandwidths(folder: Path, sizes: list[int], repeats: int) -> list[dict]:
    rows = []
    for size in sizes:
        data = torch.randint(0, 255, (size,), dtype=torch.uint8).numpy().tobytes()
        path = folder / f"probe_{size}.kv"

        def write():
            with open(path, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())

        def drop_cache():
            if hasattr(os, "posix_fadvise"):
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)

        cpu = torch.device("cpu")
        row = dict(bytes=size, page_cache_dropped=hasattr(os, "posix_fadvise"))
        row["host->disk"] = size / median_seconds(write, cpu, repeats)
        row["disk->host"] = size / median_seconds(lambda: path.read_bytes(), cpu, repeats, before=drop_cache)
        path.unlink()
        rows.append(row)
    return rows


def store_calls(device: torch.device, size: int, repeats: int) -> dict:
    """The reference store, hbm on ``device``: offload of one block to host and its get back, per call."""
    with tempfile.TemporaryDirectory() as folder:
        store = KVTierStore((4, 4, 4), device=device, directory=Path(folder) / "tiers")
        block = torch.randint(0, 255, (size,), dtype=torch.uint8, device=device).view(torch.bfloat16)
        store.put("b", block)
        offload = median_seconds(lambda: (store.offload("b", 1), store.get("b")), device, repeats)
        store.offload("b", 1)
        t_get = median_seconds(lambda: (store.get("b"), store.offload("b", 1)), device, repeats)
        same = torch.equal(store.get("b").view(torch.uint8), block.view(torch.uint8))
        store.close()
    return dict(bytes=size, offload_then_get_s=offload, get_then_offload_s=t_get, reload_bitwise_equal=bool(same))


def gemm_rate(device: torch.device, tokens: int, repeats: int, k: int = 4096, n: int = 14336) -> dict:
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    a = torch.randn(tokens, k, device=device, dtype=dtype)
    w = torch.randn(k, n, device=device, dtype=dtype)
    seconds = median_seconds(lambda: a @ w, device, repeats)
    return dict(tokens=tokens, k=k, n=n, dtype=str(dtype), flops_per_s=2 * tokens * k * n / seconds)


def transfer_latency(device: torch.device, repeats: int) -> float:
    """The fixed cost of one small transfer: a synchronised 4 KiB pinned host -> hbm copy (seconds)."""
    dev = torch.empty(4096, dtype=torch.uint8, device=device)
    host = torch.empty(4096, dtype=torch.uint8, pin_memory=device.type == "cuda")
    return median_seconds(lambda: dev.copy_(host, non_blocking=True), device, repeats)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true", help="small sizes, few repeats (the CPU smoke run)")
    ap.add_argument("--out", default=None, help="the JSON file (default $OUT/kv_tiers_gpu.json, OUT defaulting to .)")
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: run with --device cpu for the CPU path")
    sizes = [64 << 10, 1 * MiB] if args.quick else [2 * MiB, 32 * MiB, 256 * MiB, 1024 * MiB]
    repeats = 3 if args.quick else 20
    result = dict(command=" ".join(["python bench/kv_tiers_gpu.py", *(argv if argv is not None else sys.argv[1:])]),
                  device=torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                  torch=torch.__version__)
    result["links"] = link_bandwidths(device, sizes, repeats)
    with tempfile.TemporaryDirectory() as folder:
        result["disk"] = disk_bandwidths(Path(folder), sizes, repeats)
    result["store"] = store_calls(device, sizes[0], repeats)
    result["gemm"] = gemm_rate(device, 8, repeats, 512, 1792) if args.quick else gemm_rate(device, 2048, repeats)
    result["transfer_latency_s"] = latency = transfer_latency(device, repeats)
    big = result["links"][-1]
    rate = result["gemm"]["flops_per_s"]
    links = {"host->hbm pinned": big["host->hbm pinned"], "disk->host": result["disk"][-1]["disk->host"]}
    result["crossover"] = [
        dict(model=name, link=link, bandwidth=bw, flops_rate=rate, latency=lat,
             crossover_tokens=crossover_tokens(c, bandwidth=bw, flops_rate=rate, latency=lat),
             reload_1k_s=reload_seconds(c, 1024, bandwidth=bw, latency=lat))
        for name, c in (("Llama-3-8B", LLAMA3_8B), ("Llama-3-70B", LLAMA3_70B))
        for link, bw in links.items() for lat in (0.0, latency)]
    out = Path(args.out) if args.out else Path(os.environ.get("OUT", ".")) / "kv_tiers_gpu.json"
    out.write_text(json.dumps(result, indent=1))
    for row in result["links"]:
        print({k: (f"{v / 1e9:.2f} GB/s" if "->" in k else v) for k, v in row.items()})
    for row in result["disk"]:
        print({k: (f"{v / 1e9:.2f} GB/s" if "->" in k else v) for k, v in row.items()})
    print(result["store"], f"GEMM {rate / 1e12:.1f} TFLOP/s")
    for row in result["crossover"]:
        print(f"{row['model']} over {row['link']} ({row['bandwidth'] / 1e9:.1f} GB/s, latency {row['latency'] * 1e6:.0f} us): "
              f"crossover {row['crossover_tokens']}")
    print(f"wrote {out}")
    return result


if __name__ == "__main__":
    main()
