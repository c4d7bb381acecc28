"""Waste of KV-cache memory: contiguous reservation vs paging (course 03.06-03.07).

Checks the course claim "paging reduces waste from 80 % to under 5 %" by simulation. A server
decodes ``BATCH`` requests at a time (continuous batching: a finished request is replaced by the
next one); every step each running request adds one token. Per step we count the slots that hold
a token and the slots reserved:

- contiguous, max-length: every running request reserves ``MAX_LEN`` = 2048 slots up front
  (the model's context; FasterTransformer/Orca "Max");
- contiguous, oracle: it reserves exactly its final length (prompt + output) up front -- the
  best any contiguous reservation can do without knowing the future less well;
- paged: blocks of 16 slots from optimized/paged.py's BlockAllocator (allocate the prompt, one
  append per token, free at the end); reserved = blocks in use x 16.

waste = 1 - (token-slots summed over steps) / (reserved slots summed over steps).
Also the same ratios at the end of each request (final lengths only, no decode timeline).

Length distributions (prompt, output), each clipped to [1, 1024] so a request fits MAX_LEN:
- uniform: prompt and output uniform on 1..1024;
- long-tailed (ShareGPT-like): log-normal, sigma 1, with the means vLLM's paper reports for
  ShareGPT (161 prompt tokens, 338 output tokens; Kwon et al. 2023, Fig. 11);
- short (Alpaca-like): the same with the paper's Alpaca means (19 prompt, 58 output tokens),
  where a half-empty last block is a larger share of each request.

    python3 spec_tests/bench/paged_waste.py      # table + docs/results/paged_waste.json
"""
from __future__ import annotations

import argparse
import json
import math
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from optimized.paged import BlockAllocator  # noqa: E402

MAX_LEN = 2048
BLOCK_SIZE = 16
BATCH = 64
N_REQUESTS = 2000


def lognormal(rng: random.Random, mean: float, sigma: float = 1.0) -> float:
    return rng.lognormvariate(math.log(mean) - sigma * sigma / 2, sigma)


def clip(x: float) -> int:
    return max(1, min(1024, round(x)))


DISTRIBUTIONS = {
    "uniform 1..1024 (prompt and output)":
        lambda rng: (rng.randint(1, 1024), rng.randint(1, 1024)),
    "long-tailed, ShareGPT-like (log-normal, means 161 / 338)":
        lambda rng: (clip(lognormal(rng, 161)), clip(lognormal(rng, 338))),
    "short, Alpaca-like (log-normal, means 19 / 58)":
        lambda rng: (clip(lognormal(rng, 19)), clip(lognormal(rng, 58))),
}


def simulate(sample, n_requests: int = N_REQUESTS, batch: int = BATCH, block_size: int = BLOCK_SIZE,
             seed: int = 0) -> dict:
    rng = random.Random(seed)
    requests = [sample(rng) for _ in range(n_requests)]
    pool = BlockAllocator(batch * (MAX_LEN // block_size), block_size)  # room for a full batch
    queue, running = list(enumerate(requests)), {}  # seq -> [tokens now, final tokens]
    used = res_max = res_oracle = res_paged = 0
    while queue or running:
        while queue and len(running) < batch:  # admit: prefill the prompt
            seq, (prompt, output) = queue.pop(0)
            pool.allocate(seq, prompt)
            running[seq] = [prompt, prompt + output]
        for seq, st in list(running.items()):   # one decode step for every running request
            pool.append(seq, 1)
            st[0] += 1
        tokens = sum(st[0] for st in running.values())
        used += tokens
        res_max += MAX_LEN * len(running)
        res_oracle += sum(st[1] for st in running.values())
        res_paged += (pool.num_blocks - pool.num_free_blocks) * block_size
        for seq, st in list(running.items()):
            if st[0] == st[1]:
                pool.free(seq)
                del running[seq]
    final = [p + o for p, o in requests]
    paged_final = sum(math.ceil(n / block_size) * block_size for n in final)
    return {
        "mean_prompt": sum(p for p, _ in requests) / n_requests,
        "mean_output": sum(o for _, o in requests) / n_requests,
        "mean_total": sum(final) / n_requests,
        "waste_over_time": {"contiguous_max_len": 1 - used / res_max,
                            "contiguous_oracle": 1 - used / res_oracle,
                            "paged": 1 - used / res_paged},
        "waste_at_completion": {"contiguous_max_len": 1 - sum(final) / (MAX_LEN * n_requests),
                                "contiguous_oracle": 0.0,
                                "paged": 1 - sum(final) / paged_final},
        "paged_max_empty_slots_per_seq": block_size - 1,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "docs/results/paged_waste.json"))
    args = p.parse_args()
    out = {"max_len": MAX_LEN, "block_size": BLOCK_SIZE, "batch": BATCH, "n_requests": N_REQUESTS,
           "results": {}}
    print(f"max_len {MAX_LEN}, block_size {BLOCK_SIZE}, batch {BATCH}, {N_REQUESTS} requests")
    print("| lengths | mean prompt / output | contiguous max-len | contiguous oracle | paged (16) |")
    print("|---|---|---|---|---|")
    for name, sample in DISTRIBUTIONS.items():
        r = simulate(sample)
        out["results"][name] = r
        t, c = r["waste_over_time"], r["waste_at_completion"]
        print(f"| {name} | {r['mean_prompt']:.0f} / {r['mean_output']:.0f} | "
              f"{t['contiguous_max_len']:.1%} ({c['contiguous_max_len']:.1%}) | "
              f"{t['contiguous_oracle']:.1%} | {t['paged']:.2%} ({c['paged']:.2%}) |")
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
