"""Lesson 03.01 ("Why cache anything"): the KV cache's speedup as a function of output length.

Times reference.generate.generate (prefill + cached decode) against generate_uncached (the whole
sequence recomputed every step) on one model, alternately in one process, best of ``--repeats``,
and prints cached/uncached time and the speedup per output length. Both loops are greedy and must
produce the same tokens (checked; up to a genuine float32 near-tie: check_same_greedy).

Expected shape: for N new tokens after a P-token prompt the uncached loop processes
sum_{t<N} (P + t) = N P + N(N-1)/2 token-positions, the cached one P + N - 1, so the speedup grows
roughly linearly in N once N >> P, and is ~1 for short outputs: the prefill both loops share
dominates, plus a cached decode step is not free (fixed per-step cost of a forward).

    python3 spec_tests/bench/kv_cache_speedup.py                      # the table in docs/generate.md
    python3 spec_tests/bench/kv_cache_speedup.py --lengths 1 8 64 --threads 2
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from reference.generate import generate, generate_uncached  # noqa: E402
from reference.model import ModelConfig, Transformer  # noqa: E402

# A GPT-2-small-ish shape scaled down for a 2-core CPU: ~3.3 M parameters, GQA 8:2.
BENCH_CONFIG = ModelConfig(vocab_size=512, dim=256, n_layers=4, n_heads=8, n_kv_heads=2,
                           max_seq_len=1024, dtype=torch.float32)
PROMPT_LEN = 16


def bench_model(config: ModelConfig = BENCH_CONFIG, seed: int = 0) -> Transformer:
    return Transformer(config, seed=seed).eval()


def bench_prompt(config: ModelConfig = BENCH_CONFIG, prompt_len: int = PROMPT_LEN, batch: int = 1) -> torch.Tensor:
    return torch.randint(0, config.vocab_size, (batch, prompt_len), generator=torch.Generator().manual_seed(0))


def time_pair(model, prompt, new_tokens: int, repeats: int = 3) -> tuple[float, float]:
    """(cached, uncached) best-of-``repeats`` seconds, timed alternately; checks equal tokens."""
    best = {"cached": float("inf"), "uncached": float("inf")}
    out = {}
    for _ in range(repeats):
        for name, fn in (("cached", generate), ("uncached", generate_uncached)):
            t0 = time.perf_counter()
            out[name] = fn(model, prompt, new_tokens)
            best[name] = min(best[name], time.perf_counter() - t0)
    check_same_greedy(*out["cached"], out["uncached"][0])
    return best["cached"], best["uncached"]


NEAR_TIE = 2e-5   # relative; the two loops' float32 logits of a step differ by ~3.5e-6 (of ~4.2) here


def check_same_greedy(tokens, logits, other) -> None:
    """Cached and uncached greedy tokens are equal up to their first divergence, which may only be
    a genuine near-tie: the two chosen tokens' logits within NEAR_TIE x (1 + max |logit|) of each
    other. The loops compute a step's logits in other shapes (a one-token decode vs the whole
    sequence), so BLAS and ATen round them differently, by the CPU's instruction set too."""
    differ = (tokens != other).any(dim=0).nonzero()
    if not differ.numel():
        return
    step = int(differ[0])
    for row in (tokens[:, step] != other[:, step]).nonzero()[:, 0].tolist():
        lg = logits[row, step].double()
        gap = abs(float(lg[tokens[row, step]] - lg[other[row, step]]))
        if gap > NEAR_TIE * (1 + float(lg.abs().max())):
            raise AssertionError(f"cached and uncached greedy tokens differ at step {step} (row {row}), "
                                 f"logit gap {gap:.3e}: not a near-tie")
    print(f"cached and uncached greedy tokens part at step {step}, a genuine near-tie")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lengths", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64, 128, 256, 512])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, prompt = bench_model(), bench_prompt()
    n_params = sum(t.numel() for t in model.parameters())
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
          f"{args.threads} thread(s)")
    print(f"# model {BENCH_CONFIG}, {n_params / 1e6:.2f} M parameters; prompt {PROMPT_LEN} tokens, batch 1, greedy")
    print(f"{'new tokens':>10} {'cached ms':>10} {'uncached ms':>12} {'speedup':>8} {'cached ms/tok':>14}")
    for n in args.lengths:
        cached, uncached = time_pair(model, prompt, n, args.repeats if n <= 128 else 1)
        print(f"{n:>10} {cached * 1e3:>10.1f} {uncached * 1e3:>12.1f} {uncached / cached:>7.2f}x "
              f"{cached * 1e3 / n:>14.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
