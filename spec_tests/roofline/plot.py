"""Every optimized kernel of the project on the H200 roofline, from its RECORDED benchmark results
(docs/results/*.json; nothing is measured here, no number is typed in: each is read from its file).

    python -m spec_tests.roofline.plot                                    # the table of docs/roofline.md
    python -m spec_tests.roofline.plot --out docs/img/roofline_kernels.png   # and the figure

**The roof.** The highest dense 16-bit matmul rate recorded on the H200 (the 8192^3 ``matmul
ceiling`` runs of attention_h200.json and attention_h200_defaults_n4096.json; the larger is taken:
a kernel cannot beat the peak, so the best measurement is the closest to it) and the highest copy
bandwidth recorded on it (``y.copy_(x)`` of 0.5 to 1 GiB, read + write bytes over the time:
paged_attention_h200.json, paged_attention_h200_sweep.json, batch_invariant_h200.json,
batch_invariant_decode_h200.json). Measured ceilings, not the datasheet's.

**Each point** is a kernel call whose time the file records: its FLOPs over that time (achieved
FLOP/s) at its arithmetic intensity, FLOPs over the *compulsory* bytes (each input read once, each
output written once; what a perfect kernel moves):

* FlashAttention (optimized/flash_attention.py), forward: Q, K, V read, O written, the row
  log-sum-exp (float32) written; FLOPs 4 B Hq N^2 D (x 1/2 causal), as recorded. Backward: Q, K,
  V, O, dO read, dQ, dK, dV written, lse and delta (float32) read; FLOPs x 2.5 of the forward's.
  attention_h200.json (N 1k-16k, D 64/128, MHA) and attention_issue14_h200_host.json (GQA, D 256,
  many short sequences; the shipped variant: host descriptors for N <= 4096).
* Paged decode (optimized/paged_attention.py, graph replay): K and V of every cached token
  (the file's ``kv_bytes``), q read and out written, the int32 block table; FLOPs 4 B Hq ctx D.
* Batch-invariant matmul (optimized/batch_invariant.py), (M, 4096) @ (4096, 4096) bf16: A, W read,
  C written; FLOPs 2 M N K. Its rms_norm and log_softmax of 8192 x 8192 bf16: read + write, and its
  split-free decode attention (ctx 4096, 32/8 heads, D 128): K + V read, FLOPs 4 B H ctx D. The
  shapes are the bench script's (``git show 328bb93^:spec_tests/bench/batch_invariant_h200.py``).
* The sort-free sampler (optimized/sampling/, 256 x 128,256 float32 logits) and the Triton
  verifier (optimized/speculative.py, p and q of 256 x gamma 4 x 128,256 float32: (2 gamma + 1)
  rows of logits per sequence): the probabilities read once.
* FP8 / INT8 / bf16 KV decode (optimized/kv_quant.py, kv_quant_h200.json): the bytes the file
  records per provider (codes + scales); FLOPs 4 B Hq ctx D.
* W4A16 matmul, fused MoE and multi-LoRA (optimized/weight_quant.py, moe.py, lora.py): their H200
  runs (weight_quant_h200.json, moe_h200.json, lora_h200.json), the bytes and FLOPs of
  ``quant_and_fleet_points``.

Elementwise kernels (norms, softmax, samplers) do no matmul: their FLOPs are a stated nominal
4 per element read (``NOMINAL``), which places them on the x axis; the fraction of the roofline of a
memory-bound kernel is its bandwidth over the memory roof, whatever its FLOP count (while its
intensity stays below the ridge, as every one here does).
"""
from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from reference.roofline import attainable_flops, flops_per_byte, regime, ridge_point, roofline_fraction

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
NOMINAL = 4          # FLOPs per element of an elementwise kernel (stated, module doc)
E16 = 2              # bytes of a bf16/fp16 element
F32 = 4


def load(name: str) -> dict:
    return json.loads((RESULTS / name).read_text())


@dataclass(frozen=True)
class Point:
    family: str
    label: str
    flops: float
    bytes: float
    seconds: float
    source: str
    device: str = "H200"

    @property
    def intensity(self) -> float:
        return float(flops_per_byte(self.flops, self.bytes))

    @property
    def achieved(self) -> float:
        return self.flops / self.seconds


def ceilings() -> dict:
    """The H200's measured roof: (value, file) of the best matmul FLOP/s and memory bytes/s recorded
    (copies, and the bf16 KV decode's read rate, which exceeds them: a read-only stream)."""
    peaks = [(load(f)["matmul_ceiling_tflops"][dt] * 1e12, f, dt)
             for f in ("attention_h200.json", "attention_h200_defaults_n4096.json") for dt in ("bf16", "fp16")]
    copies = [(load(f)["ceilings"]["copy_tbps"] * 1e12, f) for f in ("paged_attention_h200.json",
                                                                       "paged_attention_h200_sweep.json")]
    copies += [(load(f)["copy_tbs"] * 1e12, f) for f in ("batch_invariant_h200.json", "batch_invariant_decode_h200.json")]
    # a read-only stream can beat a copy (no write turnaround): the bf16 decode's own read rate
    copies += [(r["bytes_read"] / (r["median_ms"] * 1e-3), "kv_quant_h200.json (the bf16 decode's read)")
               for case in load("kv_quant_h200.json")["cases"] for r in case["results"] if r["provider"] == "bf16 (graph)"]
    peak, bandwidth = max(peaks), max(copies)
    return {"peak": peak[0], "peak_source": f"{peak[1]} (matmul_ceiling_tflops.{peak[2]})",
            "bandwidth": bandwidth[0], "bandwidth_source": f"{bandwidth[1]}",
            "all_peaks": peaks, "all_copies": copies}


def _attention_bytes(b, hq, hkv, n, d, backward: bool) -> int:
    q_like, kv_like = b * hq * n * d * E16, b * hkv * n * d * E16
    if backward:   # Q, O, dO read, dQ written; K, V read, dK, dV written; lse and delta read
        return 4 * q_like + 4 * kv_like + 2 * b * hq * n * F32
    return 2 * q_like + 2 * kv_like + b * hq * n * F32     # Q read, O written; K, V read; lse written


def attention_points() -> list[Point]:
    out = []
    src = "attention_h200.json"
    for r in load(src)["rows"]:
        if r["provider"] != "ours":
            continue
        flops = r["tflops"] * 1e12 * r["ms"] * 1e-3
        label = (f"{r['pass']} B{r['B']} H{r['H']} N{r['N']} D{r['D']}{' causal' if r['causal'] else ''} {r['dtype']}")
        out.append(Point(f"FlashAttention {r['pass']}", label, flops,
                         _attention_bytes(r["B"], r["H"], r["H"], r["N"], r["D"], r["pass"] == "bwd"), r["ms"] * 1e-3, src))
    src = "attention_issue14_h200_host.json"
    for r in load(src)["rows"]:
        shipped = "ours_host" if r["N"] <= 4096 and r["pass"] == "fwd" else "ours"
        if r["provider"] != shipped:
            continue
        flops = r["tflops"] * 1e12 * r["ms"] * 1e-3
        label = (f"{r['pass']} B{r['B']} H{r['Hq']}/{r['Hkv']} N{r['N']} D{r['D']}{' causal' if r['causal'] else ''} "
                 f"{r['dtype']}")
        out.append(Point(f"FlashAttention {r['pass']}", label, flops,
                         _attention_bytes(r["B"], r["Hq"], r["Hkv"], r["N"], r["D"], r["pass"] == "bwd"),
                         r["ms"] * 1e-3, src))
    return out


def paged_points() -> list[Point]:
    src = "paged_attention_h200.json"
    out = []
    for s in load(src)["shapes"]:
        b, ctx, hq, d = s["batch"], s["context"], s["q_heads"], s["head_dim"]
        moved = s["kv_bytes"] + 2 * b * hq * d * E16 + b * (ctx // s["block_size"]) * 4
        out.append(Point("paged decode", f"B{b} ctx{ctx} H{hq}/{s['kv_heads']} D{d} (graph)", 4 * b * hq * ctx * d,
                         moved, s["times_ms"]["ours (graph)"] * 1e-3, src))
    return out


def batch_invariant_points() -> list[Point]:
    src = "batch_invariant_h200.json"
    data = load(src)
    out = []
    k = n = 4096
    for r in data["matmul"]:
        m = r["M"]
        out.append(Point("batch-invariant matmul", f"M{m} x 4096 x 4096 bf16", 2 * m * n * k,
                         (m * k + k * n + m * n) * E16, r["invariant_ms"] * 1e-3, src))
    elements = 8192 * 8192
    for r in data["rowops"]:
        if "invariant_ms" in r:
            out.append(Point("batch-invariant row ops", f"{r['op']} 8192 x 8192 bf16", NOMINAL * elements,
                             2 * elements * E16, r["invariant_ms"] * 1e-3, src))
    for r in data["decode"]:
        b, ctx, h, hkv, d = r["B"], r["ctx"], r["H"], r["Hkv"], r["D"]
        out.append(Point("batch-invariant decode", f"B{b} ctx{ctx} H{h}/{hkv} D{d}", 4 * b * h * ctx * d,
                         2 * b * hkv * ctx * d * E16, r["ours_ms"] * 1e-3, src))
    return out


def sampler_points() -> list[Point]:
    src = "sampling_speed_h200.json"
    data = load(src)
    rows, vocab = data["info"]["batch"], data["info"]["vocab"]
    out = [Point("sampler (sort-free)", f"{name} {rows} x {vocab}", NOMINAL * rows * vocab, rows * vocab * F32,
                 t["ms"] * 1e-3, src) for name, t in data["targets"].items()]
    src = "speculative_speed_h200.json"
    for r in load(src)["rows"]:
        elements = r["batch"] * (2 * r["gamma"] + 1) * r["vocab"]
        out.append(Point("speculative verify (Triton)", f"{r['config']} {r['batch']} x g{r['gamma']} x {r['vocab']}",
                         NOMINAL * elements, elements * F32, r["median_ms"]["optimized_triton"] * 1e-3, src))
    return out


def _h200(src: str) -> dict:
    data = load(src)
    assert "H200" in data["device"], (src, data["device"])
    return data


def kv_quant_points() -> list[Point]:
    """The quantised (and bf16) KV decode of the kv_quant run, graph replays."""
    src = "kv_quant_h200.json"
    out = []
    for case in _h200(src)["cases"]:
        p = case["params"]
        flops = 4 * p["batch"] * p["q_heads"] * p["context"] * p["head_dim"]
        for r in case["results"]:
            if "(graph)" in r["provider"]:
                out.append(Point(f"KV decode {r['provider'].split()[0]}", f"B{p['batch']} ctx{p['context']} "
                                 f"{r['provider']}", flops, r["bytes_read"], r["median_ms"] * 1e-3, src))
    return out


def quant_and_fleet_points() -> list[Point]:
    """The W4A16 matmul, the fused MoE and multi-LoRA, each from its H200 run (graph replay):
    W4A16: the row's recorded ``bytes`` (packed weights, scales, zeros, x, y), FLOPs 2 M N K.
    MoE (1,024 and 8,192 tokens, top-2 of 8 experts: with 2,048+ picks every expert is touched):
    the eight experts' three matrices, x read and y written; FLOPs the case's ``work``. Multi-LoRA:
    the base weight, all adapters' A and B, x, y; FLOPs 2 B d_out d_in + 2 B r (d_in + d_out)."""
    out = []
    src = "weight_quant_h200.json"
    data = _h200(src)
    for case in data["cases"]:
        p = case["params"]
        if "tiles" in case["name"] or p["m"] not in (1, 16, 256):
            continue
        r = next(r for r in case["results"] if r["provider"] == "ours (graph)")
        out.append(Point("W4A16 matmul", f"M{p['m']} K{p['k']} N{p['n']} (graph)", 2 * p["m"] * p["n"] * p["k"],
                         r["bytes"], r["median_ms"] * 1e-3, src))
    src = "moe_h200.json"
    data = _h200(src)
    for case in data["cases"]:
        p = case["params"]
        if p["tokens"] * p["k"] < 2048:
            continue
        r = next(r for r in case["results"] if r["provider"] == "ours (graph)")
        moved = (p["experts"] * 3 * p["d"] * p["f"] + 2 * p["tokens"] * p["d"]) * E16
        out.append(Point("fused MoE", f"T{p['tokens']} E{p['experts']} k{p['k']} d{p['d']} F{p['f']} (graph)",
                         case["work"], moved, r["median_ms"] * 1e-3, src))
    src = "lora_h200.json"
    data = _h200(src)
    for case in data["cases"]:
        p = case["params"]
        b, di, do, a, rk = p["batch"], p["d_in"], p["d_out"], p["adapters"], p["rank"]
        r = next(r for r in case["results"] if r["provider"] == "ours (graph)")
        moved = (do * di + a * rk * (di + do) + b * (di + do)) * E16
        out.append(Point("multi-LoRA", f"B{b} d{di} {a} adapters r{rk} (graph)",
                         2 * b * do * di + 2 * b * rk * (di + do), moved, r["median_ms"] * 1e-3, src))
    return out


def points() -> list[Point]:
    return (attention_points() + paged_points() + batch_invariant_points() + sampler_points() + kv_quant_points()
            + quant_and_fleet_points())


# the rows of docs/roofline.md's table (every point is plotted)
TABLE = [
    ("FlashAttention fwd", "fwd B4 H16 N4096 D128 bf16"), ("FlashAttention fwd", "fwd B4 H16 N4096 D128 causal bf16"),
    ("FlashAttention fwd", "fwd B1 H16 N16384 D128 causal bf16"), ("FlashAttention bwd", "bwd B4 H16 N4096 D128 bf16"),
    ("FlashAttention bwd", "bwd B4 H16 N4096 D128 causal bf16"), ("FlashAttention fwd", "fwd B32 H32/8 N512 D128 causal bf16"),
    ("FlashAttention bwd", "bwd B2 H8/8 N4096 D256 causal bf16"),
    ("paged decode", "B64 ctx4096 H32/8 D128 (graph)"), ("paged decode", "B1 ctx32768 H32/8 D128 (graph)"),
    ("paged decode", "B256 ctx512 H32/8 D128 (graph)"),
    ("batch-invariant matmul", "M1 x 4096 x 4096 bf16"), ("batch-invariant matmul", "M128 x 4096 x 4096 bf16"),
    ("batch-invariant matmul", "M4096 x 4096 x 4096 bf16"), ("batch-invariant row ops", "rms_norm 8192 x 8192 bf16"),
    ("batch-invariant decode", "B64 ctx4096 H32/8 D128"),
    ("sampler (sort-free)", "peaked / top-p 0.9 256 x 128256"),
    ("speculative verify (Triton)", "good draft 256 x g4 x 128256"),
    ("KV decode fp8", "B64 ctx32768 fp8 (graph)"), ("KV decode int8", "B64 ctx32768 int8 (graph)"),
    ("KV decode bf16", "B64 ctx32768 bf16 (graph)"),
    ("W4A16 matmul", "M1 K8192 N8192 (graph)"), ("W4A16 matmul", "M16 K8192 N8192 (graph)"),
    ("W4A16 matmul", "M256 K8192 N8192 (graph)"),
    ("fused MoE", "T1024 E8 k2 d4096 F14336 (graph)"), ("fused MoE", "T8192 E8 k2 d4096 F14336 (graph)"),
    ("multi-LoRA", "B64 d4096 32 adapters r16 (graph)"),
]


def rows() -> list[dict]:
    roof = ceilings()
    index = {(p.family, p.label): p for p in points()}
    out = []
    for key in TABLE:
        p = index[key]
        peak, bw = roof["peak"], roof["bandwidth"]
        out.append(dict(kernel=f"{p.family}: {p.label}", device=p.device, intensity=p.intensity, achieved=p.achieved,
                        attainable=attainable_flops(p.intensity, peak, bw), regime=regime(p.intensity, peak, bw),
                        fraction=roofline_fraction(p.achieved, p.intensity, peak, bw), source=p.source))
    return out


def table() -> str:
    roof = ceilings()
    lines = [f"H200 roof: peak {roof['peak'] / 1e12:.1f} TFLOP/s ({roof['peak_source']}), memory "
             f"{roof['bandwidth'] / 1e12:.3f} TB/s ({roof['bandwidth_source']}, copy), ridge "
             f"{ridge_point(roof['peak'], roof['bandwidth']):.1f} FLOPs/byte",
             "", "| kernel | device | FLOPs/byte | achieved TFLOP/s | attainable TFLOP/s | regime | % of roofline | source |",
             "|---|---|---:|---:|---:|---|---:|---|"]
    for r in rows():
        lines.append(f"| {r['kernel']} | {r['device']} | {r['intensity']:.3g} | {r['achieved'] / 1e12:.3g} | "
                     f"{r['attainable'] / 1e12:.3g} | {r['regime']} | {100 * r['fraction']:.1f} | `{r['source']}` |")
    return "\n".join(lines)


def plot(path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    roof = ceilings()
    peak, bw = roof["peak"], roof["bandwidth"]
    pts = points()
    fig, ax = plt.subplots(figsize=(12, 6.5))
    xs = [0.1 * 1.12 ** k for k in range(130)]
    ax.plot(xs, [attainable_flops(x, peak, bw) / 1e12 for x in xs], color="black", lw=2,
            label=f"H200 measured roof: {peak / 1e12:.0f} TFLOP/s, {bw / 1e12:.2f} TB/s")
    ridge = ridge_point(peak, bw)
    ax.axvline(ridge, color="black", lw=0.6, ls=":")
    ax.annotate(f"ridge {ridge:.0f} FLOPs/byte", (ridge, peak / 1e12 * 0.2), rotation=90, fontsize=8, ha="right")
    markers = "osD^v<>pP*Xh"
    families = sorted({p.family for p in pts})
    cmap = lambda k: plt.get_cmap("tab10")(k % 10)  # noqa: E731
    for k, fam in enumerate(families):
        group = [p for p in pts if p.family == fam]
        ax.scatter([p.intensity for p in group], [p.achieved / 1e12 for p in group], marker=markers[k % len(markers)],
                   s=28, facecolors=cmap(k), edgecolors=cmap(k), label=fam, zorder=3)
    ax.set(xscale="log", yscale="log", xlabel="arithmetic intensity (FLOPs per compulsory byte)",
           ylabel="achieved TFLOP/s", xlim=(0.1, 2e4), ylim=(0.05, 2e3))
    ax.grid(True, which="both", lw=0.3, alpha=0.5)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title("Recorded kernels of inferspec on the H200 roofline (docs/results/*.json)\n"
                 "python -m spec_tests.roofline.plot --out docs/img/roofline_kernels.png", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="write the figure here (PNG)")
    args = ap.parse_args()
    print(table())
    if args.out:
        plot(args.out)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
