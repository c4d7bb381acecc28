"""The figures of docs/img/, drawn on any machine from the results in docs/results/ (the runner's
JSON, or the files of the scripts that came before it, which the docs' figures were made from):

    python -m bench.plots attention [--json docs/results/attention_h200.json] [--out docs/img/attention_tflops.png]
    python -m bench.plots radix     [--json docs/results/radix_speed_cpu.json] [--out docs/img/radix_match.png]
    python -m bench.plots paged     [--json docs/results/paged_speed_cpu.json] [--out docs/img/paged_speed_cpu.png]
    python -m bench.plots speculative [--c 0.05] [--alpha 0.8] [--ridge 295] [--out docs/img]

``speculative`` plots closed forms (reference/drafts.py), no measurement: speedup(alpha, gamma, c)
against alpha for gamma = 1..8 (lesson 05.09) and batch_speedup against the batch under the
roofline cost model (05.11: speculation loses at large batch).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS, IMG = ROOT / "docs" / "results", ROOT / "docs" / "img"


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _runner(data: dict) -> bool:
    return str(data.get("schema", "")).startswith("inferspec-bench/")


def _cases(data: dict, concept: str) -> list[dict]:
    return [c for c in data["cases"] if c.get("concept") == concept and "skipped" not in c]


def _value(case: dict, provider: str):
    return next((r.get("value") for r in case["results"] if r["provider"] == provider), None)


# ----------------------------------------------------------------------------- attention
ATTENTION_STYLE = {"ours": ("tab:red", "Triton FA-2 (this repo)"), "sdpa_cudnn": ("tab:blue", "SDPA cuDNN"),
                   "sdpa_flash": ("tab:green", "SDPA FlashAttention-2"),
                   "reference": ("tab:gray", "reference (PyTorch)")}


def attention_rows(data: dict) -> tuple[list[dict], float]:
    """(rows of pass, dtype, D, N, causal, provider, tflops; the bf16 matmul ceiling) of the main
    sweep (batch x N = 16k tokens, heads x D = 2048)."""
    if not _runner(data):
        return [x for x in data["rows"] if "tflops" in x], data["matmul_ceiling_tflops"]["bf16"]
    rows, ceiling = [], None
    for c in _cases(data, "flash_attention"):
        p = c["params"]
        if p.get("dtype") == "bf16" and "M" in p:
            ceiling = _value(c, "torch.matmul")
        if "pass_" not in p or p["B"] * p["N"] != 16384 or p["Hq"] * p["D"] != 2048 or p["Hq"] != p["Hkv"]:
            continue
        for r in c["results"]:
            if "value" in r:
                rows.append(dict(pass_=p["pass_"], dtype=p["dtype"], D=p["D"], N=p["N"], causal=p["causal"],
                                 provider=r["provider"], tflops=r["value"]))
    for r in rows:
        r["pass"] = r.pop("pass_")
    return rows, ceiling


def attention(src: Path, dst: Path) -> None:
    plt = _pyplot()
    data = json.loads(src.read_text())
    rows, ceiling = attention_rows(data)
    rows = [x for x in rows if x["dtype"] == "bf16"]
    panels = [(p, d, c) for p in ("fwd", "bwd") for d in (64, 128) for c in (False, True)]
    fig, axes = plt.subplots(2, 4, figsize=(17, 8), sharey=True)
    for ax, (pass_, d, causal) in zip(axes.flat, panels):
        for prov, (color, label) in ATTENTION_STYLE.items():
            pts = sorted((x["N"], x["tflops"]) for x in rows
                         if x["pass"] == pass_ and x["D"] == d and x["causal"] == causal and x["provider"] == prov)
            if pts:
                ax.plot([q[0] for q in pts], [q[1] for q in pts], "o-", color=color, label=label)
        if ceiling:
            ax.axhline(ceiling, color="black", ls="--", lw=1, label=f"bf16 matmul ceiling ({ceiling:.0f})")
        ax.set_xscale("log", base=2)
        ax.set_xticks([1024, 4096, 16384], ["1k", "4k", "16k"])
        ax.set_title(f"{pass_}  D={d}  {'causal' if causal else 'non-causal'}")
        ax.set_xlabel("sequence length N")
        ax.grid(alpha=0.3)
    for ax in axes[:, 0]:
        ax.set_ylabel("TFLOP/s (bf16)")
    axes[0, 0].legend(fontsize=8, loc="lower right")
    fig.suptitle(f"Attention on {data['device']} (torch {data['torch']}, triton {data['triton']}), bf16, "
                 f"batch x N = 16k tokens, heads x D = 2048; FLOPs = 4BHN\u00b2D (x0.5 causal, x2.5 backward); "
                 f"medians", fontsize=11)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)
    print("wrote", dst)


# ----------------------------------------------------------------------------- radix
def radix_rows(data: dict) -> tuple[list[dict], str, list | None]:
    """(rows of cached_sequences and the match_prefix statistics, the machine, the load average at
    the end)."""
    if not _runner(data):
        return data["rows"], data.get("machine", "CPU"), data.get("load_average_at_end")
    rows = []
    for c in _cases(data, "radix"):
        row = dict(cached_sequences=c["params"]["cached_sequences"], **(_value(c, "optimized") or {}))
        ref = _value(c, "reference")
        if ref:
            row.update(ref)
        rows.append(row)
    return sorted(rows, key=lambda r: r["cached_sequences"]), data["device"], (data["load_average"][-1] or None)


def radix(src: Path, dst: Path) -> None:
    plt = _pyplot()
    rows, machine, load = radix_rows(json.loads(src.read_text()))
    n = [r["cached_sequences"] for r in rows]
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    ax.plot(n, [r["match_us_median"] for r in rows], "o-", color="tab:red", label="radix tree (optimized): median per call")
    ax.fill_between(n, [r["match_us_median"] for r in rows], [r["match_us_p90"] for r in rows],
                    color="tab:red", alpha=0.15, label="  ... to the 90th percentile")
    ax.plot(n, [r["match_us_batch"] for r in rows], "s--", color="tab:orange",
            label="radix tree: batch mean (includes machine load)")
    if "reference_us_median" in rows[0]:
        ax.plot(n, [r["reference_us_median"] for r in rows], "o-", color="tab:gray",
                label="naive store (reference): scans every sequence")
    ax.axhline(30, color="black", ls=":", lw=1, label="target: 30 µs")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("cached sequences (1,000-2,000 tokens each, 8 shared system prompts)")
    ax.set_ylabel("match_prefix time (µs)")
    busy = f", load average {load[0]:.1f} at the end" if load else ""
    ax.set_title(f"match_prefix of a 1-2k-token prompt, page 1\n({machine}{busy})", fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)
    print("wrote", dst)


# ----------------------------------------------------------------------------- paged
def paged_rows(data: dict) -> tuple[list[dict], int]:
    """(rows of num_blocks and the optimized / reference microseconds per operation, operations)."""
    if not _runner(data):
        return data["rows"], data["n_ops"]
    rows, n_ops = {}, None
    for c in _cases(data, "paged"):
        if c["metric"] != "us/op":
            continue
        n_ops = c["params"]["ops"]
        row = rows.setdefault(c["params"]["pool"], dict(num_blocks=c["params"]["pool"]))
        for impl in ("optimized", "reference"):
            if _value(c, impl) is not None:
                row[f"{impl}_us_per_op"] = _value(c, impl)
    return [rows[k] for k in sorted(rows)], n_ops


def paged(src: Path, dst: Path) -> None:
    plt = _pyplot()
    rows, n_ops = paged_rows(json.loads(src.read_text()))
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([r["num_blocks"] for r in rows], [r["optimized_us_per_op"] for r in rows], "o-",
            label="optimized (free stack, ref-count array)")
    refs = [r for r in rows if "reference_us_per_op" in r]
    ax.plot([r["num_blocks"] for r in refs], [r["reference_us_per_op"] for r in refs], "s-",
            label="reference (list front, counted refs)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("pool size (blocks of 16 slots)")
    ax.set_ylabel("time per operation (µs)")
    ax.set_title(f"Block allocator: {n_ops:,} allocate/append/free ops")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(dst, dpi=120)
    print("wrote", dst)


# ----------------------------------------------------------------------------- speculative
def speculative(c: float, alpha: float, ridge: float, out: Path) -> None:
    from reference.drafts import batch_speedup, break_even_alpha, break_even_batch, speedup
    plt = _pyplot()
    out.mkdir(parents=True, exist_ok=True)
    alphas = [i / 200 for i in range(201)]
    fig, ax = plt.subplots(figsize=(7.5, 5))
    cmap = plt.get_cmap("viridis")
    for gamma in range(1, 9):
        color = cmap((gamma - 1) / 7)
        ax.plot(alphas, [speedup(a, gamma, c) for a in alphas], color=color, label=f"γ = {gamma}")
        ax.plot([break_even_alpha(gamma, c)], [1.0], "o", color=color, ms=6, mec="black")
    ax.axhline(1.0, color="black", lw=1, ls="--")
    ax.set_xlabel("acceptance rate α = Σ min(p, q)")
    ax.set_ylabel("speedup over plain decoding")
    ax.set_title(f"speedup(α, γ, c) = (1 - α^(γ+1)) / ((1 - α)(cγ + 1)), draft cost c = {c}\n"
                 f"dots: break-even α (speedup 1)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, ncol=2, loc="upper left")
    fig.tight_layout()
    fig.savefig(out / "speculative_speedup.png", dpi=110)
    plt.close(fig)
    batches = [2 ** (i / 8) for i in range(0, 8 * 11 + 1)]          # 1 .. 2048
    fig, ax = plt.subplots(figsize=(7.5, 5))
    for k, gamma in enumerate((1, 2, 4, 8)):
        ax.plot(batches, [batch_speedup(alpha, gamma, c, b, ridge=ridge) for b in batches], color=cmap(k / 3),
                label=f"γ = {gamma} (break-even batch {break_even_batch(alpha, gamma, c, ridge=ridge):.0f})")
    ax.axhline(1.0, color="black", lw=1, ls="--")
    ax.axvline(ridge, color="gray", lw=1, ls=":", label=f"ridge = {ridge:g} tokens/forward")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch (sequences decoded together)")
    ax.set_ylabel("throughput speedup over plain decoding")
    ax.set_title(f"Roofline cost model, α = {alpha}, c = {c}: a forward over T tokens costs max(1, T / ridge)\n"
                 f"verification of B(γ+1) tokens turns compute-bound first: speculation loses at large batch",
                 fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "speculative_batch.png", dpi=110)
    plt.close(fig)
    print(f"wrote {out / 'speculative_speedup.png'} and {out / 'speculative_batch.png'}")


def main(argv=None) -> int:
    from reference.drafts import RIDGE
    ap = argparse.ArgumentParser(prog="python -m bench.plots", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="figure", required=True)
    for name, src, dst in (("attention", "attention_h200.json", "attention_tflops.png"),
                           ("radix", "radix_speed_cpu.json", "radix_match.png"),
                           ("paged", "paged_speed_cpu.json", "paged_speed_cpu.png")):
        p = sub.add_parser(name)
        p.add_argument("--json", type=Path, default=RESULTS / src)
        p.add_argument("--out", type=Path, default=IMG / dst)
    p = sub.add_parser("speculative")
    p.add_argument("--c", type=float, default=0.05, help="draft step cost / target step cost")
    p.add_argument("--alpha", type=float, default=0.8, help="acceptance rate for the batch plot")
    p.add_argument("--ridge", type=float, default=RIDGE, help="tokens per forward where compute-bound begins")
    p.add_argument("--out", type=Path, default=IMG)
    args = ap.parse_args(argv)
    if args.figure == "speculative":
        speculative(args.c, args.alpha, args.ridge, args.out)
    else:
        globals()[args.figure](args.json, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
