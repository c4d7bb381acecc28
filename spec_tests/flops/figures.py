"""The worked numbers of docs/flops.md: FLOPs, bytes and arithmetic intensity of Llama-3-8B-shaped
passes, computed by reference/flops.py -- no measurement, no GPU.

    python -m spec_tests.flops.figures

Prints the parameter count and a markdown table: per pass (batch B, new tokens T, context N) the
matmul FLOPs per component, the total, the bytes per component, the total and FLOPs per byte.
"""
from __future__ import annotations

import torch

from reference.flops import (arithmetic_intensity, bytes_breakdown, flops_breakdown, forward_bytes, forward_flops,
                             parameter_count)
from reference.model import ModelConfig

# Llama-3-8B's config.json, in bfloat16.
LLAMA3_8B = ModelConfig(vocab_size=128256, dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, hidden_dim=14336,
                        rope_theta=500000.0, max_seq_len=8192, dtype=torch.bfloat16)
PASSES = [("prefill", 1, 2048, 0), ("prefill", 8, 512, 0), ("decode", 1, 1, 0), ("decode", 1, 1, 1024),
          ("decode", 1, 1, 8191), ("decode", 64, 1, 1024), ("decode", 64, 1, 8191), ("chunk", 1, 512, 4096)]


def table(c: ModelConfig = LLAMA3_8B) -> list[str]:
    heads = ["pass", "B", "T", "N", *flops_breakdown(c, batch=1, new_tokens=1), "FLOPs", "weights", "KV read",
             "KV write", "bytes", "FLOP/byte"]
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for name, b, t, n in PASSES:
        a = dict(batch=b, new_tokens=t, context=n)
        cells = [name, str(b), str(t), str(n)]
        cells += [f"{v / 1e9:,.2f} G" for v in flops_breakdown(c, **a).values()]
        cells.append(f"{forward_flops(c, **a) / 1e12:,.3f} T")
        cells += [f"{v / 1e9:,.3f} GB" for v in bytes_breakdown(c, **a).values()]
        cells += [f"{forward_bytes(c, **a) / 1e9:,.3f} GB", f"{arithmetic_intensity(c, **a):,.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    print(f"parameters: {parameter_count(LLAMA3_8B):,}")
    print("\n".join(table()))


if __name__ == "__main__":
    main()
