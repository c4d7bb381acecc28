"""Serving benchmark of the engine concept: the optimized engine with continuous batching, the same
engine with continuous batching off (static batches), and Hugging Face ``generate`` with static
batches, on one model and one Poisson workload; throughput and TTFT/TPOT percentiles by
``reference.metrics.summarize``; JSON to the path given.

    python bench/engine_serving.py --out docs/results/engine_serving.json            # GPU, 8 layers
    python bench/engine_serving.py --out /tmp/engine_tiny.json --tiny                 # CPU smoke run
    python bench/engine_serving.py --rates 2,8,32,inf --static-rates 8,inf --out R.json   # load sweep
    python bench/engine_serving.py --plot R.json --out docs/img/engine_throughput.png   # its plot

Model: Llama-3-8B's shape (dim 4096, 32 query / 8 KV heads of 128, SwiGLU 14336, vocab 128256,
rope_theta 500000) with ``--layers`` layers (default 8, not 32: the random-weight draw of 8 B
parameters in float32 on the host takes minutes and 32 GB; per-layer costs scale), random bf16
weights from ``reference.model.Transformer(config, seed=0)``; the same state_dict loaded into
``transformers.LlamaForCausalLM``. ``--tiny``: a 2-layer dim-64 float32 model on CPU, 12 short
requests (checks the script, measures nothing).

Workload (seeded): ``--requests`` requests, Poisson arrivals at ``--rate`` requests/s
(exponential gaps), ShareGPT-like lengths: prompt ~ round(lognormal(ln 160, 0.8)) clipped to
[4, 1024], output ~ round(lognormal(ln 200, 0.8)) clipped to [4, 512]; token ids uniform. Greedy
decoding; no stop tokens (random weights have no meaningful EOS), every request generates its
output length.

Systems (each runs the whole workload in real time, arrivals replayed against the wall clock):
  engine_continuous  optimized.engine.Engine, requests added as they arrive (continuous batching,
                     chunked prefill, ``--max-num-seqs``, ``--budget`` tokens per step)
  engine_static      the same engine, a new batch (up to ``--static-batch`` arrived requests)
                     admitted only when the previous batch finished: continuous batching off
  hf_static          transformers' ``generate`` on batches of up to ``--static-batch`` arrived
                     requests, left-padded, ``max_new_tokens`` = the batch's longest output; a
                     request's token j is timed at the batch's step j (a logits processor's clock)
Start-up is outside every clock, as a server's is: a warm run of 16 requests compiles the kernels,
and each engine captures its decode graphs (``Engine.warmup``) before its clock starts.
A token's time is when the step that produced it returned to the host. TTFT/TPOT/E2E and
throughput: reference.metrics.summarize over (arrival, token times).
"""
from __future__ import annotations

import argparse
import json
import math
import platform
import time

import torch

from optimized.engine import Engine
from reference.metrics import summarize
from reference.model import ModelConfig, Transformer


def llama3_8b_shape(layers: int, dtype: torch.dtype) -> ModelConfig:
    return ModelConfig(vocab_size=128256, dim=4096, n_layers=layers, n_heads=32, n_kv_heads=8, head_dim=128,
                       hidden_dim=14336, rope_theta=500000.0, norm_eps=1e-5, max_seq_len=2048, dtype=dtype)


def tiny_shape() -> ModelConfig:
    return ModelConfig(vocab_size=128, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, max_seq_len=128,
                       dtype=torch.float32)


def workload(n: int, rate: float, seed: int, vocab: int, *, prompt_median: float, output_median: float,
             sigma: float, prompt_max: int, output_max: int) -> list[dict]:
    """Poisson arrivals, lognormal lengths (module doc)."""
    g = torch.Generator().manual_seed(seed)
    t, out = 0.0, []
    for i in range(n):
        gap = float(-math.log(1.0 - float(torch.rand(1, generator=g, dtype=torch.float64))))
        t += 0.0 if math.isinf(rate) else gap / rate
        p = int(min(max(round(math.exp(math.log(prompt_median) + sigma * float(torch.randn(1, generator=g)))), 4), prompt_max))
        o = int(min(max(round(math.exp(math.log(output_median) + sigma * float(torch.randn(1, generator=g)))), 4), output_max))
        out.append(dict(request_id=i, arrival=t, prompt=torch.randint(0, vocab, (p,), generator=g).tolist(), max_tokens=o))
    return out


def run_engine(model, requests, args, *, continuous: bool) -> list[tuple[float, list[float]]]:
    """Replay ``requests`` against the wall clock through the optimized engine."""
    engine = Engine(model, num_blocks=args.num_blocks, block_size=args.block_size,
                    max_num_batched_tokens=args.budget, max_num_seqs=args.max_num_seqs)
    engine.warmup()                          # start-up: every decode graph captured before the clock starts
    times = {r["request_id"]: [] for r in requests}
    pending = list(requests)
    start = time.perf_counter()
    while pending or engine.has_unfinished_requests():
        now = time.perf_counter() - start
        if continuous:
            while pending and pending[0]["arrival"] <= now:
                r = pending.pop(0)
                engine.add_request(r["request_id"], r["prompt"], max_tokens=r["max_tokens"])
        elif not engine.has_unfinished_requests():
            if pending and pending[0]["arrival"] > now:
                time.sleep(pending[0]["arrival"] - now)
                now = time.perf_counter() - start
            batch = [r for r in pending if r["arrival"] <= now][:args.static_batch]
            for r in batch:
                pending.remove(r)
                engine.add_request(r["request_id"], r["prompt"], max_tokens=r["max_tokens"])
        if not engine.has_unfinished_requests():
            time.sleep(max(0.0, min(0.01, pending[0]["arrival"] - now)))
            continue
        outs = engine.step()
        t = time.perf_counter() - start
        for o in outs:
            times[o.request_id].extend([t] * len(o.new_token_ids))
    return [(r["arrival"], times[r["request_id"]]) for r in requests]


def hf_model(model, device):
    from transformers import LlamaConfig, LlamaForCausalLM
    c = model.config
    cfg = LlamaConfig(vocab_size=c.vocab_size, hidden_size=c.dim, intermediate_size=c.hidden_dim,
                      num_hidden_layers=c.n_layers, num_attention_heads=c.n_heads, num_key_value_heads=c.n_kv_heads,
                      head_dim=c.head_dim, rope_theta=c.rope_theta, rms_norm_eps=c.norm_eps,
                      max_position_embeddings=c.max_seq_len, tie_word_embeddings=False, attention_bias=False,
                      mlp_bias=False, torch_dtype=c.dtype, pad_token_id=0, bos_token_id=None, eos_token_id=None)
    hf = LlamaForCausalLM(cfg).to(dtype=c.dtype)
    hf.load_state_dict(model.state_dict())
    return hf.to(device).eval()


def run_hf(hf, requests, args, device) -> list[tuple[float, list[float]]]:
    """Static batches through ``hf.generate`` (module doc)."""
    from transformers import LogitsProcessor, LogitsProcessorList

    class Clock(LogitsProcessor):
        def __init__(self):
            self.ticks = []

        def __call__(self, input_ids, scores):
            self.ticks.append(time.perf_counter())
            return scores

    times = {}
    pending = list(requests)
    start = time.perf_counter()
    while pending:
        now = time.perf_counter() - start
        if pending[0]["arrival"] > now:
            time.sleep(pending[0]["arrival"] - now)
            now = time.perf_counter() - start
        batch = [r for r in pending if r["arrival"] <= now][:args.static_batch]
        for r in batch:
            pending.remove(r)
        width = max(len(r["prompt"]) for r in batch)
        ids = torch.zeros(len(batch), width, dtype=torch.long)
        mask = torch.zeros(len(batch), width, dtype=torch.long)
        for i, r in enumerate(batch):                   # left padding
            ids[i, width - len(r["prompt"]):] = torch.tensor(r["prompt"])
            mask[i, width - len(r["prompt"]):] = 1
        clock = Clock()
        n = max(r["max_tokens"] for r in batch)
        with torch.no_grad():
            hf.generate(input_ids=ids.to(device), attention_mask=mask.to(device), max_new_tokens=n, min_new_tokens=n,
                        do_sample=False, logits_processor=LogitsProcessorList([clock]), pad_token_id=0)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        # the processor runs before each step's token is chosen; the step ends at the next tick
        ends = clock.ticks[1:] + [time.perf_counter()]
        for r in batch:
            times[r["request_id"]] = [t - start for t in ends[:r["max_tokens"]]]
    return [(r["arrival"], times[r["request_id"]]) for r in requests]


def summary_json(pairs) -> dict:
    s = summarize(pairs)
    dist = lambda d: None if d is None else dict(mean=d.mean, min=d.min, max=d.max,
                                                 percentiles={str(k): v for k, v in d.percentiles.items()})
    return dict(num_requests=s.num_requests, output_tokens=s.output_tokens, duration_s=s.duration,
                request_throughput=s.request_throughput, output_throughput=s.output_throughput,
                ttft_s=dist(s.ttft), tpot_s=dist(s.tpot), e2e_s=dist(s.e2e))


def plot(result: dict, path: str) -> None:
    """Output throughput (tokens/s) against the offered request rate, one line per system, from a
    result of :func:`main` (``python bench/engine_serving.py --plot RESULT.json --out PNG``); an
    all-at-once run (rate inf) is drawn at the right edge, past the largest finite rate."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    base = result["workload"]["rate"]
    series: dict[str, list] = {}
    for name, s in result["systems"].items():
        if "output_throughput" not in s:
            continue
        system, _, rate = name.partition("@")
        series.setdefault(system, []).append((float(rate) if rate else base, s["output_throughput"]))
    finite = [r for pts in series.values() for r, _ in pts if r != float("inf")]
    edge = 2 * max(finite) if finite else 1.0
    fig, ax = plt.subplots(figsize=(6, 4))
    for system, pts in sorted(series.items()):
        pts = sorted((edge if r == float("inf") else r, t) for r, t in pts)
        ax.plot([r for r, _ in pts], [t for _, t in pts], marker="o", label=system)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"offered load, requests/s (rightmost point: all {result['workload']['requests']} at once)")
    ax.set_ylabel("output throughput, tokens/s")
    ax.set_title(f"{result['device']}: {result['config'].get('n_layers')} Llama-3-8B-shaped layers, bf16")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def static_rates(args, rates: list[float]) -> list[float]:
    return [float(r) for r in args.static_rates.split(",")] if args.static_rates else rates


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="the JSON file to write")
    ap.add_argument("--tiny", action="store_true", help="a tiny float32 model on CPU (a smoke run)")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--rate", type=float, default=4.0, help="Poisson arrival rate, requests/s")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--num-blocks", type=int, default=8192)
    ap.add_argument("--budget", type=int, default=2048, help="max_num_batched_tokens")
    ap.add_argument("--max-num-seqs", type=int, default=64)
    ap.add_argument("--static-batch", type=int, default=16)
    ap.add_argument("--skip-hf", action="store_true")
    ap.add_argument("--rates", default="", help="a load sweep: comma-separated arrival rates (inf: all at once) "
                                                "for the continuous engine; default: --rate only")
    ap.add_argument("--static-rates", default="", help="the rates of --rates at which the static systems run "
                                                       "too (default: every one)")
    ap.add_argument("--plot", default=None, metavar="RESULT_JSON",
                    help="draw throughput vs offered load from a result file to --out (a .png); runs nothing")
    args = ap.parse_args(argv)
    if args.plot:
        with open(args.plot) as f:
            plot(json.load(f), args.out)
        return {}
    if args.tiny:
        device, config = torch.device("cpu"), tiny_shape()
        torch.set_num_threads(1)       # tiny matmuls: threads only add contention
        args.requests, args.rate, args.block_size, args.num_blocks = min(args.requests, 12), 50.0, 4, 256
        args.budget, args.max_num_seqs, args.static_batch = 32, 8, 4
        lengths = dict(prompt_median=12, output_median=10, sigma=0.5, prompt_max=48, output_max=32)
    else:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        config = llama3_8b_shape(args.layers, torch.bfloat16)
        lengths = dict(prompt_median=160, output_median=200, sigma=0.8, prompt_max=1024, output_max=512)
    model = Transformer(config, seed=0).to(device).eval()
    requests = workload(args.requests, args.rate, args.seed, config.vocab_size, **lengths)
    result = dict(command="python bench/engine_serving.py " + " ".join(argv or []),
                  device=torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
                  torch=torch.__version__, config={k: str(v) for k, v in vars(config).items()},
                  workload=dict(requests=args.requests, rate=args.rate, seed=args.seed, **lengths),
                  engine=dict(block_size=args.block_size, num_blocks=args.num_blocks, budget=args.budget,
                              max_num_seqs=args.max_num_seqs, static_batch=args.static_batch),
                  systems={})
    # compile the kernels (every batch shape the sampler and attention meet) before any clock starts
    warm = workload(min(args.max_num_seqs, 16), 1e6, args.seed + 1, config.vocab_size, **lengths)
    run_engine(model, warm, args, continuous=True)

    def record(name, pairs):
        result["systems"][name] = summary_json(pairs)
        with open(args.out, "w") as f:       # after every system: a run cut short keeps what it measured
            json.dump(result, f, indent=2)

    rates = [float(r) for r in args.rates.split(",")] if args.rates else [args.rate]
    for rate in rates:                       # the load sweep: same lengths and seed, another arrival rate
        load = workload(args.requests, rate, args.seed, config.vocab_size, **lengths)
        suffix = "" if rate == args.rate else f"@{rate:g}"
        record("engine_continuous" + suffix, run_engine(model, load, args, continuous=True))
        if rate in static_rates(args, rates):
            record("engine_static" + suffix, run_engine(model, load, args, continuous=False))
    if not args.skip_hf:
        try:
            hf = hf_model(model, device)
        except ImportError as exc:
            result["systems"]["hf_static"] = dict(skipped=f"transformers not importable: {exc}")
        else:
            run_hf(hf, warm, args, device)
            for rate in static_rates(args, rates):
                load = workload(args.requests, rate, args.seed, config.vocab_size, **lengths)
                record("hf_static" + ("" if rate == args.rate else f"@{rate:g}"), run_hf(hf, load, args, device))
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    for name, s in result["systems"].items():
        if "output_throughput" in s:
            print(f"{name:18s} {s['output_throughput']:10.1f} tok/s  TTFT p50 {s['ttft_s']['percentiles']['50.0']:.4f} s"
                  f"  TPOT p50 {(s['tpot_s'] or {}).get('percentiles', {}).get('50.0', float('nan')):.4f} s")
        else:
            print(name, s)
    return result


if __name__ == "__main__":
    import sys
    main(sys.argv[1:])
