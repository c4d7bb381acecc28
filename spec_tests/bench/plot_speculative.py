"""Plot the speculative-decoding closed forms (reference/drafts.py) -- no GPU, no measurement:

    docs/img/speculative_speedup.png   speedup(α, γ, c) vs α for γ = 1..8 at draft cost c (05.09)
    docs/img/speculative_batch.png     batch_speedup(α, γ, c, B) vs batch B under the roofline
                                       cost model (05.11: speculation loses at large batch)

    .venv/bin/python spec_tests/bench/plot_speculative.py [--c 0.05] [--alpha 0.8] [--ridge 295]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from reference.drafts import (RIDGE, batch_speedup, break_even_alpha, break_even_batch,  # noqa: E402
                              speedup)


def plot_alpha(c: float, dst: Path) -> None:
    alphas = [i / 200 for i in range(201)]
    fig, ax = plt.subplots(figsize=(7.5, 5))
    cmap = plt.get_cmap("viridis")
    for gamma in range(1, 9):
        color = cmap((gamma - 1) / 7)
        ax.plot(alphas, [speedup(a, gamma, c) for a in alphas], color=color, label=f"γ = {gamma}")
        a_star = break_even_alpha(gamma, c)
        ax.plot([a_star], [1.0], "o", color=color, ms=6, mec="black")
    ax.axhline(1.0, color="black", lw=1, ls="--")
    ax.set_xlabel("acceptance rate α = Σ min(p, q)")
    ax.set_ylabel("speedup over plain decoding")
    ax.set_title(f"speedup(α, γ, c) = (1 - α^(γ+1)) / ((1 - α)(cγ + 1)), draft cost c = {c}\n"
                 f"dots: break-even α (speedup 1)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, ncol=2, loc="upper left")
    fig.tight_layout()
    fig.savefig(dst, dpi=110)
    plt.close(fig)


def plot_batch(alpha: float, c: float, ridge: float, dst: Path) -> None:
    batches = [2 ** (i / 8) for i in range(0, 8 * 11 + 1)]          # 1 .. 2048
    fig, ax = plt.subplots(figsize=(7.5, 5))
    cmap = plt.get_cmap("viridis")
    for k, gamma in enumerate((1, 2, 4, 8)):
        color = cmap(k / 3)
        ax.plot(batches, [batch_speedup(alpha, gamma, c, b, ridge=ridge) for b in batches], color=color,
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
    fig.savefig(dst, dpi=110)
    plt.close(fig)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--c", type=float, default=0.05, help="draft step cost / target step cost")
    ap.add_argument("--alpha", type=float, default=0.8, help="acceptance rate for the batch plot")
    ap.add_argument("--ridge", type=float, default=RIDGE, help="tokens per forward where compute-bound begins")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    plot_alpha(args.c, args.out / "speculative_speedup.png")
    plot_batch(args.alpha, args.c, args.ridge, args.out / "speculative_batch.png")
    print(f"wrote {args.out / 'speculative_speedup.png'} and {args.out / 'speculative_batch.png'}")


if __name__ == "__main__":
    main()
