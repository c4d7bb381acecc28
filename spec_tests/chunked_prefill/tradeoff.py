"""The TTFT/TPOT trade-off of the token budget (course 04.05), by simulation -- no measurement.

    python -m spec_tests.chunked_prefill.tradeoff [--requests 600] [--rate 2.0] [--seed 0]
        [--out docs/img/chunked_prefill_tradeoff.png] [--json docs/results/chunked_prefill_tradeoff.json]

The workload (fixed seed): Poisson arrivals of ``rate`` requests/s (exponential gaps); prompt
lengths uniform on [64, 2048] tokens, output lengths uniform on [16, 256] tokens (integers, both
ends included), drawn with ``random.Random(seed)`` in that order per request. Each budget B of
16, 32, ..., 2048 runs it through ``reference.chunked_prefill.simulate_serving(workload, B)`` (no chunk
cap beyond the budget: SARATHI's chunk is the budget the decodes leave) under the default
``StepCost()`` (an 8B model on one H100: step_time(n) = max(4.8 ms, 32 us x n)), and records p50
and p99 of TTFT and of TPOT, p99 and max of the inter-token gaps (ITL, pooled over requests)
(reference.metrics.summarize, numpy's linear percentiles), the mean step time, the number of
steps and the output throughput. B = 2048 >= every prompt: one chunk per prompt (no chunking,
decodes still piggybacked).
"""
from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from reference.chunked_prefill import StepCost, simulate_serving
from reference.metrics import summarize

ROOT = Path(__file__).resolve().parents[2]
BUDGETS = (16, 32, 64, 128, 256, 512, 1024, 2048)
PROMPTS, OUTPUTS = (64, 2048), (16, 256)


def poisson_workload(n: int, rate: float, seed: int) -> list[tuple[float, int, int]]:
    """``n`` requests: exponential inter-arrival gaps of mean 1/rate from t = 0, uniform prompt
    and output lengths (module doc)."""
    rng, t, out = random.Random(seed), 0.0, []
    for _ in range(n):
        t += rng.expovariate(rate)
        out.append((t, rng.randint(*PROMPTS), rng.randint(*OUTPUTS)))
    return out


def sweep(n: int, rate: float, seed: int) -> dict:
    workload = poisson_workload(n, rate, seed)
    rows = []
    for budget in BUDGETS:
        sim = simulate_serving(workload, budget)
        s = summarize([(a, t) for (a, _, _), t in zip(workload, sim.token_times)], percentiles=(50, 99))
        steps = len(sim.step_tokens)
        rows.append(dict(token_budget=budget, ttft_p50=s.ttft.percentiles[50.0], ttft_p99=s.ttft.percentiles[99.0],
                         tpot_p50=s.tpot.percentiles[50.0], tpot_p99=s.tpot.percentiles[99.0],
                         itl_p99=s.itl.percentiles[99.0], itl_max=s.itl.max,
                         steps=steps, mean_step_s=(sim.step_ends[-1] - workload[0][0]) / steps,
                         output_throughput=s.output_throughput))
    cost = StepCost()
    return dict(command="python -m spec_tests.chunked_prefill.tradeoff", requests=n, rate_per_s=rate, seed=seed,
                prompt_len_uniform=list(PROMPTS), output_len_uniform=list(OUTPUTS),
                cost=dict(weights_s=cost.weights, per_token_s=cost.per_token, overhead_s=cost.overhead),
                rows=rows)


def plot(data: dict, out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = data["rows"]
    b = [r["token_budget"] for r in rows]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for ax, metric, title in ((ax1, "ttft", "TTFT"), (ax2, "tpot", "TPOT")):
        for q, style in (("p50", "o-"), ("p99", "s--")):
            ax.plot(b, [1e3 * r[f"{metric}_{q}"] for r in rows], style, label=f"{title} {q}")
        if metric == "tpot":
            ax.plot(b, [1e3 * r["itl_p99"] for r in rows], "^:", label="ITL p99 (one gap)")
            ax.plot(b, [1e3 * r["itl_max"] for r in rows], "v:", label="ITL max (worst stall)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("token budget per step (= chunk size), tokens")
        ax.set_ylabel(f"{title}, ms")
        ax.set_title(f"{title} vs token budget")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle(f"Chunked prefill, simulated: {data['requests']} requests, Poisson {data['rate_per_s']}/s, "
                 f"prompts U{data['prompt_len_uniform']}, outputs U{data['output_len_uniform']}, "
                 f"8B on H100 roofline", fontsize=9)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=600)
    ap.add_argument("--rate", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "chunked_prefill_tradeoff.png")
    ap.add_argument("--json", type=Path, default=ROOT / "docs" / "results" / "chunked_prefill_tradeoff.json")
    args = ap.parse_args(argv)
    data = sweep(args.requests, args.rate, args.seed)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(data, indent=1) + "\n")
    plot(data, args.out)
    print(f"{'budget':>7} {'TTFT p50':>10} {'TTFT p99':>10} {'TPOT p50':>10} {'TPOT p99':>10} {'ITL p99':>9} "
          f"{'ITL max':>9} {'steps':>7}  (ms)")
    for r in data["rows"]:
        print(f"{r['token_budget']:>7} {1e3 * r['ttft_p50']:>10.1f} {1e3 * r['ttft_p99']:>10.1f} "
              f"{1e3 * r['tpot_p50']:>10.2f} {1e3 * r['tpot_p99']:>10.2f} {1e3 * r['itl_p99']:>9.2f} "
              f"{1e3 * r['itl_max']:>9.2f} {r['steps']:>7}")
    print(f"wrote {args.json} and {args.out}")


if __name__ == "__main__":
    main()
