"""The alpha trade-off of SmoothQuant (course 05.04) on the stated outlier model, by computation with
the reference -- no measurement, no GPU.

    python -m spec_tests.smoothquant.figures [--seeds 100] [--out docs/img/smoothquant_alpha.png]
        [--json docs/results/smoothquant_alpha.json]
    python -m spec_tests.smoothquant.figures --ratios 5000      # the false-alarm statistic of the spec

The outlier model is spec_tests.smoothquant.strategies.OutlierCase: x (32 tokens, 64 channels) and
w (32, 64) i.i.d. N(0, 1) in float64, 4 channels of x (chosen by the seed) multiplied by U[10, 100];
seeds 0 .. seeds-1. For each alpha in 0, 0.05, ..., 1: s from the calibrated absmax of x
(reference.smoothquant.calibrate_absmax([x])) and eq. 4, X' = X / s, W' = W s, then symmetric INT8
with per-output-channel weight scales and activation scales per tensor (left panel, the static
setting of the paper's O2/O3 levels) or per token (right panel). Three errors, each in the output's
units and relative to ||X W^T||_F, median over the seeds with the 10-90 % band:

* activation error  ||(deq(Q(X')) - X') W'^T||_F   (what rounding the activations alone costs),
* weight error      ||X' (deq(Q(W')) - W')^T||_F   (what rounding the weights alone costs),
* output error      ||W8A8(X', W') - X W^T||_F     (both; reference.smoothquant.w8a8_linear),

and the W8A8 output error without smoothing (dashed). The activation error falls as alpha grows
(the outliers leave X; per token it rises again past ~0.7: measured in the output, X's rounding
errors are multiplied by W', whose former-outlier columns are now large), the weight error rises steeply past ~0.3 (the outliers
arrive in W's columns, and a per-output-channel scale sees every column); the output error is
lowest in between (0.5-0.6 here) and at alpha = 1 or 0 no better than without smoothing.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from reference.smoothquant import (calibrate_absmax, quantize_activations, quantize_weights, smooth,
                                   smoothing_factors, w8a8_linear)
from spec_tests.smoothquant.strategies import OutlierCase

ROOT = Path(__file__).resolve().parents[2]
ALPHAS = [round(0.05 * i, 2) for i in range(21)]


def errors(x: torch.Tensor, w: torch.Tensor, alpha: float | None, per_token: bool) -> dict[str, float]:
    """The three relative errors of the module doc at one alpha (None: no smoothing)."""
    y = x @ w.T
    norm = float(y.norm())
    if alpha is not None:
        x, w = smooth(x, w, smoothing_factors(calibrate_absmax([x]), w, alpha))
    qx, sx = quantize_activations(x, per_token=per_token)
    qw, sw = quantize_weights(w, per_channel=True)
    x_hat, w_hat = qx.double() * sx, qw.double() * sw
    return {"activation": float(((x_hat - x) @ w.T).norm()) / norm,
            "weight": float((x @ (w_hat - w).T).norm()) / norm,
            "output": float((w8a8_linear(x, w, per_token=per_token) - y).norm()) / norm}


def sweep(seeds: int) -> dict:
    cases = [OutlierCase(seed=i).tensors() for i in range(seeds)]
    out = {"seeds": seeds, "alphas": ALPHAS, "model": repr(OutlierCase(seed=0)).replace("seed=0", "seed=i")}
    for per_token in (False, True):
        key = "per_token" if per_token else "per_tensor"
        rows = {k: [] for k in ("activation", "weight", "output")}
        for a in ALPHAS:
            per_seed = [errors(x, w, a, per_token) for x, w in cases]
            for k in rows:
                v = torch.tensor([e[k] for e in per_seed])
                rows[k].append([float(v.quantile(q)) for q in (0.1, 0.5, 0.9)])
        plain = torch.tensor([errors(x, w, None, per_token)["output"] for x, w in cases])
        rows["no_smoothing_output"] = [float(plain.quantile(q)) for q in (0.1, 0.5, 0.9)]
        best = min(range(len(ALPHAS)), key=lambda i: rows["output"][i][1])
        rows["best_alpha"] = ALPHAS[best]
        out[key] = rows
    return out


def ratios(n: int) -> dict:
    """error_before / error_after at alpha 0.5 over seeds 0..n-1 (the spec's statistic)."""
    res = {}
    for per_token in (False, True):
        r = []
        for i in range(n):
            x, w = OutlierCase(seed=i).tensors()
            before = errors(x, w, None, per_token)["output"]
            r.append(before / errors(x, w, 0.5, per_token)["output"])
        lr = torch.tensor(r).log()
        res["per_token" if per_token else "per_tensor"] = {
            "seeds": n, "min_ratio": float(torch.tensor(r).min()), "log_mean": float(lr.mean()),
            "log_std": float(lr.std()), "z": float(lr.mean() / lr.std())}
    return res


def plot(data: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    a = data["alphas"]
    for ax, key, title in zip(axes, ("per_tensor", "per_token"), ("activations per tensor", "activations per token")):
        rows = data[key]
        for k, color, label in (("activation", "tab:blue", "activation rounding"), ("weight", "tab:orange", "weight rounding"),
                                ("output", "black", "W8A8 output")):
            lo, med, hi = zip(*rows[k])
            ax.plot(a, med, color=color, label=label, lw=2 if k == "output" else 1.5)
            ax.fill_between(a, lo, hi, color=color, alpha=0.15)
        ax.axhline(rows["no_smoothing_output"][1], color="gray", ls="--", label="W8A8 without smoothing")
        ax.set_yscale("log")
        ax.set_xlabel("migration strength alpha")
        ax.set_title(f"{title}, weights per output channel (best alpha {rows['best_alpha']})", fontsize=10)
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("error / ||X W^T||  (median, 10-90 % band)")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"SmoothQuant's alpha trade-off: x 32x64 N(0,1) with 4 channels x U[10,100], w 32x64 N(0,1); "
                 f"{data['seeds']} seeds", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=100)
    p.add_argument("--out", default=str(ROOT / "docs/img/smoothquant_alpha.png"))
    p.add_argument("--json", default=str(ROOT / "docs/results/smoothquant_alpha.json"))
    p.add_argument("--ratios", type=int, default=0, help="print the before/after ratio statistic over N seeds instead")
    args = p.parse_args(argv)
    if args.ratios:
        print(json.dumps(ratios(args.ratios), indent=1))
        return
    data = sweep(args.seeds)
    plot(data, Path(args.out))
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(data, indent=1) + "\n")
    for key in ("per_tensor", "per_token"):
        r = data[key]
        print(f"{key}: best alpha {r['best_alpha']}, output error there {r['output'][ALPHAS.index(r['best_alpha'])][1]:.4f}, "
              f"at 0.5 {r['output'][10][1]:.4f}, without smoothing {r['no_smoothing_output'][1]:.4f}")


if __name__ == "__main__":
    main()
