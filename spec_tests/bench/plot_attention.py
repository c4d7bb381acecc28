"""Plot docs/img/attention_tflops.png from docs/results/attention_h200.json (made on any machine).

    python3 spec_tests/bench/plot_attention.py [docs/results/attention_h200.json] [docs/img/attention_tflops.png]
"""
from __future__ import annotations

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLE = {"ours": ("tab:red", "Triton FA-2 (this repo)"), "sdpa_cudnn": ("tab:blue", "SDPA cuDNN"),
         "sdpa_flash": ("tab:green", "SDPA FlashAttention-2"), "reference": ("tab:gray", "reference (PyTorch)")}


def main(src="docs/results/attention_h200.json", dst="docs/img/attention_tflops.png"):
    r = json.load(open(src))
    rows = [x for x in r["rows"] if "tflops" in x and x["dtype"] == "bf16"]
    ceiling = r["matmul_ceiling_tflops"]["bf16"]
    panels = [(p, d, c) for p in ("fwd", "bwd") for d in (64, 128) for c in (False, True)]
    fig, axes = plt.subplots(2, 4, figsize=(17, 8), sharey=True)
    for ax, (pass_, d, causal) in zip(axes.flat, panels):
        for prov, (color, label) in STYLE.items():
            pts = sorted((x["N"], x["tflops"]) for x in rows
                         if x["pass"] == pass_ and x["D"] == d and x["causal"] == causal and x["provider"] == prov)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=color, label=label)
        ax.axhline(ceiling, color="black", ls="--", lw=1, label=f"bf16 matmul ceiling ({ceiling:.0f})")
        ax.set_xscale("log", base=2)
        ax.set_xticks([1024, 4096, 16384], ["1k", "4k", "16k"])
        ax.set_title(f"{pass_}  D={d}  {'causal' if causal else 'non-causal'}")
        ax.set_xlabel("sequence length N")
        ax.grid(alpha=0.3)
    for ax in axes[:, 0]:
        ax.set_ylabel("TFLOP/s (bf16)")
    axes[0, 0].legend(fontsize=8, loc="lower right")
    fig.suptitle(f"Attention on {r['device']} (torch {r['torch']}, triton {r['triton']}), bf16, "
                 f"batch x N = 16k tokens, heads x D = 2048; FLOPs = 4BHN\u00b2D (x0.5 causal, x2.5 backward); "
                 f"do_bench medians", fontsize=11)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)
    print("wrote", dst)


if __name__ == "__main__":
    main(*sys.argv[1:])
