"""The batching page's numbers and plot: ``python -m spec_tests.batching.figures`` prints the table
of closed form vs simulation (docs/batching.md) and writes docs/img/batching_idle.png (idle fraction
of static batching vs batch size for the stated length distributions)."""
from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import torch

from reference.batching import LengthDistribution, expected_idle_fraction, simulate_idle_fraction

DISTS = [("constant 16", LengthDistribution("constant", 16)),
         ("uniform {1..31}", LengthDistribution("uniform", 31)),
         ("geometric p = 1/16", LengthDistribution("geometric", Fraction(1, 16)))]
TABLE_B = (2, 8, 32)
SIM_BATCHES = 20_000


def table() -> str:
    rows = ["| lengths (mean 16) | B | closed form | simulation (20,000 batches, seed 0) |", "|---|---|---|---|"]
    for name, d in DISTS:
        for b in TABLE_B:
            exact = expected_idle_fraction(d, b)
            sim = simulate_idle_fraction(d, b, SIM_BATCHES, torch.Generator().manual_seed(0))
            rows.append(f"| {name} | {b} | {float(exact):.4f} | {sim:.4f} |")
    return "\n".join(rows)


def plot(path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    sizes = list(range(1, 65))
    fig, ax = plt.subplots(figsize=(6.4, 4))
    for name, d in DISTS:
        ax.plot(sizes, [float(expected_idle_fraction(d, b)) for b in sizes], label=name)
        sim_b = [1, 2, 4, 8, 16, 32, 64]
        ax.scatter(sim_b, [simulate_idle_fraction(d, b, 2_000, torch.Generator().manual_seed(b)) for b in sim_b],
                   s=14, marker="x", color=ax.lines[-1].get_color())
    ax.set_xscale("log", base=2)
    ax.set_xlabel("static batch size B")
    ax.set_ylabel("idle slot fraction 1 - E[L] / E[max of B]")
    ax.set_title("Static batching wastes slots on long-tailed lengths\n(lines: closed form; x: simulation, 2,000 batches)")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    print(table())
    out = Path(__file__).resolve().parents[2] / "docs" / "img" / "batching_idle.png"
    plot(out)
    print(f"wrote {out}")
