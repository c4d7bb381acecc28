"""What the all-reduces cost a tensor-parallel forward over a slow interconnect: the reference
``TensorParallelTransformer`` on gloo between CPU processes (loopback TCP), worlds 1, 2 and 4.

    python bench/tensor_parallel_gloo.py
    python bench/tensor_parallel_gloo.py --layers 4 --dim 512 --repeats 20 --json /tmp/tp.json

Per world, on the gloo pool of spec_tests/tensor_parallel/pool.py (forked ranks, one thread each):
the median time of one ``dist.all_reduce`` of ``dim`` float32 (a decode token's activations), of a
decode step (batch 1, one token, through a KV cache: 2 x layers all-reduces of ``dim`` elements)
and of a prefill (batch 1, ``--seq`` tokens), rank 0's clock, after a warm-up; and the bytes each
forward handed to all-reduces (the closed form ``allreduce_bytes_per_token`` x tokens). World 1 is
the unsharded model (no collective). On a 2-core machine world 4 time-shares the cores: its
numbers measure the scheduler as much as the collective. Every process runs one thread.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from reference import tensor_parallel  # noqa: E402
from reference.model import ModelConfig, Transformer  # noqa: E402
from spec_tests.tensor_parallel import pool  # noqa: E402


class _Reference:
    """The reference module as the pool's jobs see an implementation (``impl.get(name)``)."""

    concept = "tensor_parallel"

    def get(self, name):
        return getattr(tensor_parallel, name)


def _median(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _job(impl, rank, world, group, shape, repeats):
    import torch.distributed as dist
    layers, dim, seq = shape
    cfg = ModelConfig(vocab_size=256, dim=dim, n_layers=layers, n_heads=dim // 64, n_kv_heads=max(1, dim // 256),
                      max_seq_len=seq + repeats + 4)
    tp = impl.get("TensorParallelTransformer")(Transformer(cfg, seed=0), rank, world, group=group)
    x = torch.ones(dim)
    allreduce = _median(lambda: dist.all_reduce(x, group=group), repeats) if world > 1 else 0.0
    prompt = torch.randint(0, 256, (1, seq), generator=torch.Generator().manual_seed(1))
    prefill = _median(lambda: tp(prompt), repeats)
    cache = tp.new_cache(1)
    tp(prompt, cache=cache)
    decode = _median(lambda: tp(torch.tensor([[7]]), cache=cache), repeats)
    return {"allreduce_s": allreduce, "prefill_s": prefill, "decode_s": decode}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--worlds", default="1,2,4")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)                # as every rank of the pool: one thread per process
    impl, shape = _Reference(), (args.layers, args.dim, args.seq)
    cfg = ModelConfig(dim=args.dim, n_layers=args.layers, n_heads=args.dim // 64, n_kv_heads=max(1, args.dim // 256))
    print(f"{args.layers} layers of dim {args.dim}, float32, prefill of {args.seq} tokens, gloo on {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}; medians of {args.repeats}")
    print(f"{'world':>5} {'all-reduce of dim':>18} {'decode step':>12} {'prefill':>10} {'bytes all-reduced / token':>26}")
    rows = []
    for world in [int(w) for w in args.worlds.split(",")]:
        if world == 1:
            out = _job(impl, 0, 1, None, shape, args.repeats)
        else:
            outs = pool.run(impl, _job, world, shape, args.repeats, timeout=600)
            for o in outs:
                if o["error"]:
                    raise RuntimeError(o["error"])
            out = outs[0]["result"]
        out["world"] = world
        out["bytes_per_token"] = tensor_parallel.allreduce_bytes_per_token(cfg, world)
        rows.append(out)
        print(f"{world:>5} {out['allreduce_s'] * 1e6:>15.0f} us {out['decode_s'] * 1e3:>9.2f} ms "
              f"{out['prefill_s'] * 1e3:>7.1f} ms {out['bytes_per_token']:>26,}")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "when": time.strftime("%Y-%m-%d %H:%M"),
                                               "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
