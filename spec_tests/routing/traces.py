"""The stated synthetic traces of docs/routing.md, and the command that prints their numbers.

    python -m spec_tests.routing.traces            # the tables of docs/routing.md
    python -m spec_tests.routing.traces --plot     # also docs/img/routing_load_cap.png

Every trace is built from a fixed seed (``random.Random(seed)``), token ids drawn from
``[0, 32000)``; prompts are short (tens to a few hundred tokens) so that the naive reference radix
cache replays them in seconds: the hit *rates* and the shape of the queueing are what is compared,
under a service-time model whose constants are stated per trace.

1. ``multi_turn``: 07.02's session trace. 24 conversations, 6 turns each, on 4 replicas. A
   conversation opens with a 48-token system prompt shared by all (one tenant) and its own
   32-token first message; each later turn's prompt is the previous prompt, the previous answer
   (16 tokens) and a new 16-token message. Conversations start 0.5 s apart in a random order of
   turns (a turn arrives 1.0 to 3.0 s after the previous turn of its conversation); per-replica
   capacity 1536 tokens (about 6 conversations' histories).
2. ``multi_tenant``: 06.07's shared-prefix trace. 8 tenants, each with its own 96-token system
   prompt; 240 requests, each a random tenant's prompt plus a unique 8-token question, arriving
   every 0.05 s on 4 replicas whose caches hold 256 tokens each (two tenants' prompts and some
   questions): round-robin must keep every tenant everywhere and thrashes; cache-aware partitions.
3. ``hot_prefix``: where cache-aware hurts. One 160-token system prompt shared by every request, 160
   requests with unique 8-token questions arriving every 0.025 s on 4 replicas, 16 output tokens each
   (service about 0.08 s: 82 % of the 4 replicas' capacity): without a load cap every request matches the one replica that cached the
   prefix first, which queues everything while three replicas idle; the load cap trades a few
   misses (one per replica) for balance.
"""
from __future__ import annotations

import argparse
import random

from reference.routing import POLICIES, ServiceCost

VOCAB = 32000
COST = ServiceCost()  # the defaults: an 8B model on one H100, batch 1


def _tokens(rng: random.Random, n: int) -> list[int]:
    return [rng.randrange(VOCAB) for _ in range(n)]


def multi_turn(seed: int = 0, conversations: int = 24, turns: int = 6) -> list[tuple]:
    rng = random.Random(seed)
    system = _tokens(rng, 48)
    out = []
    for c in range(conversations):
        t = 0.5 * c
        prompt = system + _tokens(rng, 32)
        for _ in range(turns):
            out.append((round(t, 6), list(prompt), 16, f"conv{c}"))
            prompt = prompt + _tokens(rng, 16) + _tokens(rng, 16)   # the answer, then the next message
            t += rng.uniform(1.0, 3.0)
    out.sort(key=lambda r: r[0])
    return out


def multi_tenant(seed: int = 0, tenants: int = 8, requests: int = 240) -> list[tuple]:
    rng = random.Random(seed)
    systems = [_tokens(rng, 96) for _ in range(tenants)]
    return [(round(0.05 * i, 6), systems[rng.randrange(tenants)] + _tokens(rng, 8), 16, None)
            for i in range(requests)]


def hot_prefix(seed: int = 0, requests: int = 160) -> list[tuple]:
    rng = random.Random(seed)
    system = _tokens(rng, 160)
    return [(round(0.025 * i, 6), system + _tokens(rng, 8), 16, None) for i in range(requests)]


TRACES = {
    "multi_turn": (multi_turn, dict(num_replicas=4, capacity=1536)),
    "multi_tenant": (multi_tenant, dict(num_replicas=4, capacity=256)),
    "hot_prefix": (hot_prefix, dict(num_replicas=4, capacity=None)),
}
LOAD_CAPS = (None, 0, 1, 2, 4, 8, 16, 32)


def run(simulate_routing, name: str, policy: str, load_cap=None, seed: int = 0) -> dict:
    make, kw = TRACES[name]
    return simulate_routing(make(seed), policy=policy, load_cap=load_cap, cost=COST, **kw)


def table(simulate_routing) -> str:
    lines = ["| trace | policy | load_cap | token hit rate | mean queueing (s) | max queueing (s) | mean response (s) | requests per replica |",
             "|---|---|---|---|---|---|---|---|"]
    for name in TRACES:
        rows = [(p, None) for p in POLICIES] + [("cache_aware", 2), ("session_affinity", 2)]
        for policy, cap in rows:
            r = run(simulate_routing, name, policy, cap)
            lines.append(f"| {name} | {policy} | {cap} | {r['token_hit_rate']:.3f} | {r['mean_queueing']:.3f} | "
                         f"{r['max_queueing']:.3f} | {r['mean_response']:.3f} | {r['replica_requests']} |")
    return "\n".join(lines)


def plot(simulate_routing, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    caps = [c for c in LOAD_CAPS if c is not None]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for name in TRACES:
        rs = [run(simulate_routing, name, "cache_aware", c) for c in caps]
        rr = run(simulate_routing, name, "round_robin")
        line, = axes[0].plot(caps, [r["token_hit_rate"] for r in rs], marker="o", label=f"{name}: cache_aware")
        axes[0].axhline(rr["token_hit_rate"], color=line.get_color(), linestyle=":", label=f"{name}: round_robin")
        axes[1].plot(caps, [r["mean_queueing"] for r in rs], marker="o", color=line.get_color(), label=f"{name}: cache_aware")
        axes[1].axhline(rr["mean_queueing"], color=line.get_color(), linestyle=":", label=f"{name}: round_robin")
    axes[0].set(xscale="symlog", xlabel="load_cap (requests above the least-loaded)", ylabel="token hit rate",
                title="hit rate vs load cap")
    axes[1].set(xscale="symlog", xlabel="load_cap", ylabel="mean queueing (s)", title="queueing vs load cap", ylim=(0, None))
    axes[0].legend(fontsize=7)
    fig.suptitle("reference/routing.py simulate_routing, 4 replicas (python -m spec_tests.routing.traces --plot)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    from reference.routing import simulate_routing
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plot", nargs="?", const="docs/img/routing_load_cap.png", default=None)
    args = ap.parse_args()
    print(table(simulate_routing))
    if args.plot:
        plot(simulate_routing, args.plot)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
