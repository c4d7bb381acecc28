"""The tensor-parallel runs, made where the implementation runs (``impl.call_in_process``): world 1
in that process (no process group: the contract calls no collective there), worlds 2 and 4 on
the gloo pool (spec_tests/tensor_parallel/pool.py). Every function returns plain data."""
from __future__ import annotations

import torch

from reference.model import ModelConfig, Transformer
from spec_tests.tensor_parallel import pool
from spec_tests.tensor_parallel.strategies import TPCase

NAMES = ("TensorParallelTransformer",)


def _forward_job(impl, rank, world, group, case: TPCase) -> dict:
    """On one rank: the sharded model of ``case``; its logits for the prefill and each decode
    step through its own cache; the cache's shape."""
    model = Transformer(case.config(ModelConfig), seed=case.seed)
    tp = impl.get("TensorParallelTransformer")(model, rank, world, group=group)
    cache = tp.new_cache(case.batch)
    pool.log_event("forward")
    logits = []
    for i, tokens in enumerate(case.tokens()):
        if i:
            pool.log_event("forward")
        logits.append(tp(tokens, cache=cache).detach().cpu().clone())
    return {"logits": logits, "cache_shape": tuple(cache.k.shape), "cache_nbytes": int(cache.nbytes)}


def forward(impl, case: TPCase) -> list[dict]:
    """Per rank: ``{"result", "error", "log"}`` of :func:`_forward_job` (world 1: in this process,
    its log empty)."""
    impl.get(NAMES[0])                                   # not implemented: a skip, here
    if case.world == 1:
        return [_in_process(_forward_job, impl, case)]
    return pool.run(impl, _forward_job, case.world, case)


def _in_process(job, impl, *args) -> dict:
    import traceback
    try:
        return {"result": job(impl, 0, 1, None, *args), "error": None, "log": []}
    except Exception:  # noqa: BLE001 -- reported like a rank's
        return {"result": None, "error": traceback.format_exc(), "log": []}


def _sweep_job(impl, rank, world, group, configs) -> list:
    """Every (n_heads, n_kv_heads) of ``configs`` at this world: the logits of one prefill (or the
    error the constructor raised: its type and message), one model after another."""
    out = []
    for n_heads, n_kv, hidden, seed in configs:
        cfg = ModelConfig(vocab_size=16, dim=n_heads * 2, n_layers=1, n_heads=n_heads, n_kv_heads=n_kv, head_dim=2,
                          hidden_dim=hidden, max_seq_len=8)
        model = Transformer(cfg, seed=seed)
        try:
            tp = impl.get("TensorParallelTransformer")(model, rank, world, group=group)
        except (ValueError, TypeError) as exc:
            out.append(("error", type(exc).__name__, str(exc)))
            continue
        tokens = torch.arange(5).remainder(16)[None]
        out.append(("logits", tp(tokens).detach().cpu().clone(), tuple(tp.new_cache(1).k.shape)))
    return out


def sweep(impl, world: int, configs) -> list[dict]:
    impl.get(NAMES[0])
    return pool.run(impl, _sweep_job, world, list(configs))


def _bad_job(impl, rank, world, group, what: str) -> dict:
    """One bad call on every rank of a real group: ``what`` "rank" (the rank of another process),
    "world" (a world size the group does not have), "cache" (a cache of every KV head: the
    implementation's own world-1 cache). Returns the error's type and message, or None when nothing was raised."""
    cfg = ModelConfig(vocab_size=16, dim=16, n_layers=1, n_heads=4, n_kv_heads=4, hidden_dim=16, max_seq_len=8)
    model = Transformer(cfg, seed=1)
    TP = impl.get("TensorParallelTransformer")
    try:
        if what == "rank":
            TP(model, (rank + 1) % world, world, group=group)
        elif what == "world":
            TP(model, rank, 4 if world == 2 else 2, group=group)
        else:
            whole = TP(model, 0, 1).new_cache(1)          # world 1: every KV head, the implementation's own cache
            TP(model, rank, world, group=group)(torch.zeros(1, 2, dtype=torch.long), cache=whole)
    except (ValueError, TypeError) as exc:
        return {"type": type(exc).__name__, "message": str(exc)}
    return None


def bad(impl, world: int, what: str) -> list[dict]:
    impl.get(NAMES[0])
    return pool.run(impl, _bad_job, world, what)


def world_one(impl, case: TPCase) -> dict:
    """World 1 in this process with no process group: the logits (or the error)."""
    impl.get(NAMES[0])
    return _in_process(_forward_job, impl, case)


def _whoami_job(impl, rank, world, group) -> dict:
    import os

    import torch.distributed as dist
    return {"pid": os.getpid(), "rank": dist.get_rank(group), "backend": str(dist.get_backend(group))}


def whoami(impl, world: int) -> list[dict]:
    """Each rank's process id, rank and backend: the pool is real processes of one gloo group."""
    return [{"result": o["result"], "error": o["error"]} for o in pool.run(impl, _whoami_job, world)]


def head_shards(impl, domain) -> list:
    """``head_shard(h, k, r, p)`` for every (h, k, p) of ``domain`` and every rank r < p, in this
    order: ``("ok", q_heads, kv_heads)`` as lists, or ``("error", type name, message)``. One call
    into the implementation's process for the whole domain."""
    fn, out = impl.get("head_shard"), []
    for h, k, p in domain:
        for r in range(p):
            try:
                q, kv = fn(h, k, r, p)
                out.append(("ok", [int(x) for x in q], [int(x) for x in kv]))
            except Exception as exc:  # noqa: BLE001 -- judged by the test
                out.append(("error", type(exc).__name__, str(exc)))
    return out


def state_dict_shards(impl, case: TPCase) -> tuple[dict, list[dict], bool]:
    """The reference model of ``case``: its state dict, ``shard_state_dict`` of it for every rank
    of ``case.world`` (plain dicts of tensors), and whether the model's weights were left unchanged."""
    model = Transformer(case.config(ModelConfig), seed=case.seed)
    full = {k: v.detach().clone() for k, v in model.state_dict().items()}
    fn = impl.get("shard_state_dict")
    shards = [{str(k): torch.as_tensor(v).detach().clone() for k, v in dict(fn(model.state_dict(), model.config, r, case.world)).items()}
              for r in range(case.world)]
    unchanged = all(torch.equal(v, full[k]) for k, v in model.state_dict().items())
    return full, shards, unchanged


def aliasing(impl, case: TPCase) -> list[str]:
    """The tensors of ``shard_state_dict`` (rank 1 of 2) and of ``column_shard``/``row_shard`` that
    share storage with the full weights, where the implementation runs."""
    model = Transformer(case.config(ModelConfig), seed=case.seed)
    sd = model.state_dict()
    out = [name for name, t in impl.get("shard_state_dict")(sd, model.config, 1, 2).items()
           if t.untyped_storage().data_ptr() == sd[name].untyped_storage().data_ptr()]
    w = torch.randn(4, 4)
    for name in ("column_shard", "row_shard"):
        if impl.get(name)(w, 0, 2).untyped_storage().data_ptr() == w.untyped_storage().data_ptr():
            out.append(name)
    return out
