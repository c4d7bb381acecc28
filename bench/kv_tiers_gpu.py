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
the measured fixed cost of one small transfer (a synchronised 4 KiB pinned copy) as the latency.

``measured_crossover``: the crossover measured directly, on ONE decoder layer of Llama-3-8B's shape
(dim 4096, 32 query / 8 KV heads of 128, SwiGLU 14336, bf16; ``--quick``: a tiny float32 layer on
the CPU) built as the reference model itself, ``reference.model.Transformer`` of a 1-layer
``ModelConfig`` with a 256-token vocabulary (its embedding lookup and lm_head are ~0.5 % of the
layer's FLOPs: negligible, and counted by the prediction too). For each prefix length n (1 to
8,192 tokens; ``--quick`` 1 to 256), medians of synchronised repeats after one warm-up per shape:

* recompute: the model's own prefill forward of n tokens into a fresh KV cache (``new_cache``,
  made outside the clock), which writes the layer's K and V; under ``torch.inference_mode``. Three
  ways: with the reference attention (``reference.attention.attention``: the n x n scores materialised in
  float32, the specification, slow at long n) and with torch's ``scaled_dot_product_attention``
  (causal, GQA, torch's choice of kernel: FlashAttention-class on the GPU) passed as the model's
  ``attention`` callable -- the rest of the forward is the reference's either way; and the decoder
  layer's own forward alone (``model.model.layers[0]``, sdpa; the embedding and the RoPE table made
  outside the clock): one layer's share of an L-layer prefill, without the per-forward fixed costs;
* reload: that layer's KV of n tokens (2 x n x 8 x 128 x 2 bytes), the very K and V the prefill
  wrote, laid out as blocks of 16 tokens (each block (K|V, kv_heads, 16, head_dim), contiguous, the
  last one ragged; n < 16 is one block) in pinned host memory, copied to the GPU ``non_blocking`` either one copy per
  block ("per-block") or the whole prefix in one copy ("one copy"); the reloaded bytes are checked
  bit for bit against what the prefill wrote.

Per n: both times, which wins; per (recompute, reload) pair the measured crossover (the smallest n
of the list from which reload <= recompute for every longer n of the list; None if reload does
not win at the longest); beside it the predicted one, ``crossover_tokens`` of the same 1-layer
config at this run's measured host -> hbm pinned bandwidth (the largest size), GEMM rate and small
transfer's latency. That formula prices recompute as matmul FLOPs at the GEMM rate, with
attention's n^2 term (the full n x n rectangle, masked half included) and the lm_head; it has no
term for reading the layer's weights (~440 MB: the floor of a short prefill) nor for kernel
launches, and one latency per reload however many blocks (per-block pays ceil(n / 16) copies' fixed
costs, which the formula does not see).

Per layer is enough: reload bytes and recompute FLOPs both scale with the number of layers L, so
an L-layer model's crossover is one layer's but for the fixed costs. A latency paid once per
layer (one transfer per layer, or blocks laid out layer by layer) scales with L too: the crossover
is the 1-layer one. A latency paid once for all layers (one transfer of the whole prefix, or
blocks holding every layer as the 2 MiB blocks above do) is latency / L per layer: the crossover is
the 1-layer one at latency / L (the JSON gives that prediction for L = 32). Likewise the measured
1-layer forward pays once what an L-layer one pays once (input checks, the RoPE table, the
embedding, the final norm, the lm_head), so its short-prefix recompute over-states a layer's share;
the layer-only timing is that share.

Nothing here is asserted; the numbers go to the JSON and to docs/kv_tiers.md with this command.
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
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from reference.kv_tiers import KVTierStore, crossover_tokens, reload_seconds  # noqa: E402
from reference.attention import attention as reference_attention  # noqa: E402
from reference.flops import flops_breakdown  # noqa: E402
from reference.kv_tiers import recompute_seconds  # noqa: E402
from reference.model import ModelConfig, Transformer, rope_cos_sin  # noqa: E402

LLAMA3_8B = ModelConfig(vocab_size=128256, dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, hidden_dim=14336,
                        rope_theta=500000.0, max_seq_len=8192, dtype=torch.bfloat16)
LLAMA3_70B = ModelConfig(vocab_size=128256, dim=8192, n_layers=80, n_heads=64, n_kv_heads=8, hidden_dim=28672,
                         rope_theta=500000.0, max_seq_len=8192, dtype=torch.bfloat16)
MiB = 1 << 20
BLOCK_TOKENS = 16
# one decoder layer of Llama-3-8B's shape; a 256-token vocabulary keeps the embedding and lm_head negligible
LLAMA3_8B_LAYER = LLAMA3_8B.replace(n_layers=1, vocab_size=256)
TINY_LAYER = ModelConfig(vocab_size=128, dim=256, n_layers=1, n_heads=8, n_kv_heads=2, hidden_dim=704,
                         max_seq_len=256, dtype=torch.float32)
PREFIXES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]
QUICK_PREFIXES = [1, 4, 16, 64, 256]
RECOMPUTES = ("reference attention", "sdpa attention", "sdpa layer only")


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


def sdpa_attention(q, k, v, *, causal, window, scale):
    """torch's ``scaled_dot_product_attention`` with the reference attention's signature, for a prefill
    without a cache (q_len == kv_len, where torch's top-left causal mask is the reference's
    bottom-right one); no window."""
    if window is not None or q.shape[2] != k.shape[2]:
        raise ValueError("sdpa_attention: prefill only (q_len == kv_len, no window)")
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=q.shape[1] != k.shape[1])


def stable_crossover(ns: list[int], wins: list[bool]) -> int | None:
    """The smallest n of ``ns`` (ascending) from which ``wins`` holds for every longer n; None if it
    fails at the last one."""
    first = None
    for n, win in zip(reversed(ns), reversed(wins)):
        if not win:
            break
        first = n
    return first


def measured_crossover(device: torch.device, quick: bool, *, bandwidth: float, flops_rate: float,
                       latency: float, repeats: int) -> dict:
    """Recompute (the 1-layer reference model's prefill) against reload (its KV from pinned host memory)
    per prefix length, measured; and the predicted crossover beside it (module doc)."""
    config = TINY_LAYER if quick else LLAMA3_8B_LAYER
    prefixes = QUICK_PREFIXES if quick else PREFIXES
    pin = device.type == "cuda"
    chosen = [reference_attention]
    t0 = time.perf_counter()
    model = Transformer(config, seed=0, attention=lambda *a, **kw: chosen[0](*a, **kw))
    model = model.to(device).requires_grad_(False).eval()
    build_s = time.perf_counter() - t0
    element = torch.empty((), dtype=config.dtype).element_size()
    per_token = 2 * config.n_kv_heads * config.head_dim * element          # one layer's K and V
    g = torch.Generator().manual_seed(0)
    rows = []
    with torch.inference_mode():
        for n in prefixes:
            tokens = torch.randint(0, config.vocab_size, (1, n), generator=g).to(device)
            cache = [None]

            def fresh_cache():
                cache[0] = model.new_cache(1, n)

            # the layer alone: its input (the embedding) and the RoPE table made outside the clock
            h = model.model.embed_tokens(tokens)
            cos, sin = rope_cos_sin(torch.arange(n, device=device), config.head_dim, config.rope_theta, config.dtype)
            layer = model.model.layers[0]
            variants = {
                "reference attention": (reference_attention, lambda: model(tokens, cache[0])),
                "sdpa attention": (sdpa_attention, lambda: model(tokens, cache[0])),
                "sdpa layer only": (sdpa_attention, lambda: layer(h, cos, sin, cache[0], 0, sdpa_attention)),
            }
            row = dict(tokens=n, kv_bytes=n * per_token, blocks=-(-n // BLOCK_TOKENS))
            for name, (fn, call) in variants.items():
                chosen[0] = fn
                try:
                    row[f"recompute {name} s"] = median_seconds(call, device, repeats, before=fresh_cache)
                except torch.OutOfMemoryError as e:     # the reference attention's n x n float32 scores
                    row[f"recompute {name} s"] = None
                    row[f"recompute {name} error"] = f"out of memory: {str(e).splitlines()[0]}"
                    cache[0] = None
                    torch.cuda.empty_cache()
            # the KV the last prefill wrote (layer 0's K and V come before its attention: every
            # variant writes the same bits)
            if cache[0] is None:
                fresh_cache()
                model(tokens, cache[0])
            k, v = cache[0].k[0, 0, :, :n], cache[0].v[0, 0, :, :n]          # (kv_heads, n, head_dim)
            blocks = [torch.stack([k[:, s:s + BLOCK_TOKENS], v[:, s:s + BLOCK_TOKENS]]).reshape(-1)
                      for s in range(0, n, BLOCK_TOKENS)]
            source = torch.cat(blocks)
            cache[0] = None
            host = torch.empty(source.shape, dtype=source.dtype, pin_memory=pin)
            host.copy_(source)
            dest = torch.empty_like(source)
            offsets = [0]
            for b in blocks:
                offsets.append(offsets[-1] + b.numel())
            pairs = [(dest[a:z], host[a:z]) for a, z in zip(offsets, offsets[1:])]

            def per_block():
                for dst, src in pairs:
                    dst.copy_(src, non_blocking=True)

            dest.zero_()
            row["reload per-block s"] = median_seconds(per_block, device, repeats)
            equal = torch.equal(dest, source)
            dest.zero_()
            row["reload one copy s"] = median_seconds(lambda: dest.copy_(host, non_blocking=True), device, repeats)
            row["reload_bitwise_equal"] = bool(equal and torch.equal(dest, source))
            row["predicted recompute s"] = recompute_seconds(config, n, flops_rate=flops_rate)
            row["predicted reload s"] = reload_seconds(config, n, bandwidth=bandwidth, latency=latency)
            row["winner"] = {f"{r} / {c}": ("reload" if row[f"reload {r} s"] <= row[f"recompute {c} s"] else "recompute")
                             for c in RECOMPUTES for r in ("per-block", "one copy")
                             if row[f"recompute {c} s"] is not None}
            rows.append(row)
            del tokens, h, cos, sin, k, v, blocks, source, host, dest, pairs
    measured = {}
    for c in RECOMPUTES:
        for r in ("per-block", "one copy"):
            ok = [row for row in rows if row[f"recompute {c} s"] is not None]
            measured[f"reload {r} / recompute {c}"] = stable_crossover(
                [row["tokens"] for row in ok], [row[f"reload {r} s"] <= row[f"recompute {c} s"] for row in ok])
    predicted = {
        "latency 0": crossover_tokens(config, bandwidth=bandwidth, flops_rate=flops_rate, latency=0.0),
        "latency measured (one transfer per layer)": crossover_tokens(
            config, bandwidth=bandwidth, flops_rate=flops_rate, latency=latency),
        "latency measured / 32 (one transfer for all 32 layers)": crossover_tokens(
            config, bandwidth=bandwidth, flops_rate=flops_rate, latency=latency / 32),
    }
    one = flops_breakdown(config, batch=1, new_tokens=1)
    lm_head_share = one["lm_head"] / sum(one.values())
    weight_bytes = sum(p.numel() * p.element_size() for name, p in model.named_parameters()
                       if name.startswith("model.layers."))
    del model
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return dict(
        config=dict(dim=config.dim, n_layers=config.n_layers, n_heads=config.n_heads, n_kv_heads=config.n_kv_heads,
                    head_dim=config.head_dim, hidden_dim=config.hidden_dim, vocab_size=config.vocab_size,
                    max_seq_len=config.max_seq_len, dtype=str(config.dtype)),
        model="reference.model.Transformer of this 1-layer config, a fresh KV cache per call: 'reference "
              "attention' = its own forward as specified; 'sdpa attention' = its own forward with torch "
              "scaled_dot_product_attention (causal, enable_gqa, torch's kernel choice) as its attention callable; "
              "'sdpa layer only' = its decoder layer's forward alone (model.model.layers[0], the same sdpa), the "
              "embedding and RoPE table made outside the clock: one layer's share of an L-layer prefill",
        lm_head_flop_share=lm_head_share, layer_weight_bytes=weight_bytes, build_s=build_s, block_tokens=BLOCK_TOKENS, kv_bytes_per_token=per_token,
        repeats=repeats, pinned=pin, rows=rows, measured_crossover_tokens=measured,
        predicted=dict(bandwidth=bandwidth, flops_rate=flops_rate, latency=latency, crossover_tokens=predicted),
        note=("crossover_tokens prices recompute as forward_flops / GEMM rate: attention's n^2 term included "
              "(the full n x n rectangle, masked half counted) and the lm_head (2 n dim vocab: lm_head_flop_share of "
              "a 1-token prefill's FLOPs, less at longer n) and "
              "the embedding (0 FLOPs); no term for reading the layer's weights (layer_weight_bytes: the floor of "
              "a short prefill) nor kernel launches. Reload is priced with one latency however many blocks. "
              "The embedding/lm_head of this small vocabulary are negligible in FLOPs. Per layer is enough: reload "
              "bytes and recompute FLOPs both scale with the layer count L, so an L-layer model's crossover is "
              "this one's when the latency is paid once per layer (one transfer or one set of blocks per layer), "
              "and this one's at latency / L when it is paid once for all layers (one transfer of the whole "
              "prefix, or blocks holding every layer); the measured 1-layer forward also pays once the per-"
              "forward fixed costs (input checks, RoPE table, embedding, final norm, lm_head) that an L-layer "
              "forward pays once, so its short-prefix recompute over-states one layer's share: 'sdpa layer only' "
              "times the layer alone."),
    )


def print_measured_crossover(m: dict) -> None:
    c = m["config"]
    print(f"measured crossover: one layer (dim {c['dim']}, {c['n_heads']}/{c['n_kv_heads']} heads of {c['head_dim']}, "
          f"SwiGLU {c['hidden_dim']}, {c['dtype']}; vocab {c['vocab_size']}: lm_head {m['lm_head_flop_share']:.1%} "
          f"of the FLOPs at n = 1, the embedding 0), "
          f"reference.model.Transformer's forward; times in us, medians of {m['repeats']}")

    def us(x):
        return "OOM" if x is None else f"{x * 1e6:.1f}"

    print(f"{'n':>6} {'KV bytes':>10} {'rec ref':>9} {'rec sdpa':>9} {'rec lyr':>9} {'rel blk':>9} {'rel 1cp':>9} "
          f"{'pred rec':>9} {'pred rel':>9}  winner of one copy vs ref / sdpa / layer")
    for r in m["rows"]:
        w = r["winner"]
        print(f"{r['tokens']:>6} {r['kv_bytes']:>10} {us(r['recompute reference attention s']):>9} "
              f"{us(r['recompute sdpa attention s']):>9} {us(r['recompute sdpa layer only s']):>9} "
              f"{us(r['reload per-block s']):>9} {us(r['reload one copy s']):>9} "
              f"{us(r['predicted recompute s']):>9} {us(r['predicted reload s']):>9}  "
              + " / ".join(w.get(f"one copy / {c}", "-") for c in RECOMPUTES) +
              f"{'' if r['reload_bitwise_equal'] else '  RELOAD NOT BIT-EQUAL'}")
    print("measured crossover (tokens):")
    for pair, n in m["measured_crossover_tokens"].items():
        print(f"  {pair}: {n}")
    p = m["predicted"]
    print(f"predicted crossover (crossover_tokens, {p['bandwidth'] / 1e9:.1f} GB/s, {p['flops_rate'] / 1e12:.1f} TFLOP/s, "
          f"latency {p['latency'] * 1e6:.1f} us):", p["crossover_tokens"])


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
    result["measured_crossover"] = measured_crossover(device, args.quick, bandwidth=big["host->hbm pinned"],
                                                      flops_rate=rate, latency=latency, repeats=3 if args.quick else 10)
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
    print_measured_crossover(result["measured_crossover"])
    print(f"wrote {out}")
    return result


if __name__ == "__main__":
    main()
