"""Generation (course 03.01, "Why cache anything"): the KV cache's speedup as a function of the
output length. reference.generate.generate (prefill + cached decode) against generate_uncached
(the whole sequence recomputed every step), one model, timed alternately, best of 3 (1 for
N > 128), one intra-op thread. Both loops are greedy and must give the same tokens (up to a
genuine float32 near-tie: check_same_greedy). docs/generate.md has the table.

For N new tokens after a P-token prompt the uncached loop processes N P + N(N-1)/2 token-positions,
the cached one P + N - 1: the speedup grows roughly linearly in N once N >> P, and is ~1 for short
outputs (the shared prefill dominates, and a cached decode step still pays a forward's fixed cost).
"""
from __future__ import annotations

import torch

from bench.runner import Case, P
from reference.generate import generate, generate_uncached
from reference.model import ModelConfig, Transformer

# A GPT-2-small-ish shape scaled down for a 2-core CPU: ~3 M parameters, GQA 8:2.
BENCH_CONFIG = ModelConfig(vocab_size=512, dim=256, n_layers=4, n_heads=8, n_kv_heads=2,
                           max_seq_len=1024, dtype=torch.float32)
PROMPT_LEN = 16
LENGTHS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
NEAR_TIE = 2e-5   # relative; the two loops' float32 logits of a step differ by ~3.5e-6 (of ~4.2) here


def bench_model(config: ModelConfig = BENCH_CONFIG, seed: int = 0) -> Transformer:
    return Transformer(config, seed=seed).eval()


def bench_prompt(config: ModelConfig = BENCH_CONFIG, prompt_len: int = PROMPT_LEN, batch: int = 1) -> torch.Tensor:
    return torch.randint(0, config.vocab_size, (batch, prompt_len), generator=torch.Generator().manual_seed(0))


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


def time_pair(model, prompt, new_tokens: int, repeats: int = 3) -> tuple[float, float]:
    """(cached, uncached) best-of-``repeats`` seconds, timed alternately (bench.timing.compare);
    checks the tokens first."""
    from bench.timing import compare
    check_same_greedy(*generate(model, prompt, new_tokens), generate_uncached(model, prompt, new_tokens)[0])
    t = compare({"cached": lambda: generate(model, prompt, new_tokens),
                 "uncached": lambda: generate_uncached(model, prompt, new_tokens)},
                rounds=repeats, repeats=1, min_warmup=0, warmup_ms=0, budget_ms=None)
    return t["cached"].min_ms / 1e3, t["uncached"].min_ms / 1e3


def _case(n: int, tags=()) -> Case:
    best_of = 3 if n <= 128 else 1
    return Case(f"{n} new tokens after a {PROMPT_LEN}-token prompt", dict(new_tokens=n, prompt=PROMPT_LEN, threads=1),
                (P("cached"), P("uncached")), metric="ms", devices=("cpu",), tags=tags,
                timing=dict(rounds=best_of, repeats=1, min_warmup=0, warmup_ms=0, budget_ms=None))


CASES = [_case(n) for n in LENGTHS] + [_case(3, ("smoke",))]


def setup(case, device):
    torch.set_num_threads(case.params["threads"])
    return dict(model=bench_model(), prompt=bench_prompt())


def check(problem, case, device) -> dict:
    n = case.params["new_tokens"]
    cached = generate(problem["model"], problem["prompt"], n)
    check_same_greedy(*cached, generate_uncached(problem["model"], problem["prompt"], n)[0])
    return dict(ok=True, what="same greedy tokens (up to a genuine near-tie)")


BUILDERS = {
    "cached": lambda p, case, device: lambda: generate(p["model"], p["prompt"], case.params["new_tokens"]),
    "uncached": lambda p, case, device: lambda: generate_uncached(p["model"], p["prompt"], case.params["new_tokens"]),
}
