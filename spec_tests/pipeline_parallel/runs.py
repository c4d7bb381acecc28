"""The pipeline runs, made where the implementation runs (``impl.call_in_process``): one stage
(p = 1) in that process, 2-4 stages on the gloo pool of spec_tests/tensor_parallel/pool.py (one
rank per stage). Each rank watches its model's modules with forward hooks (``("pre" | "post",
module, micro-batch size)`` events in the rank's log, next to its sends and receives), so the
tests see the order of every stage's steps and when each ran. Every function returns plain data."""
from __future__ import annotations

import torch

from reference.model import ModelConfig, Transformer
from spec_tests.pipeline_parallel.strategies import PPCase
from spec_tests.tensor_parallel import pool


def watch_modules(model) -> list:
    """Hook every stage-able module of ``model`` (embedding, layers, norm, head) to log its forward
    calls and batch sizes to the pool's event log; returns the hook handles."""
    handles = []
    named = [("embed", model.model.embed_tokens)] + [(f"layer{i}", layer) for i, layer in enumerate(model.model.layers)]
    named += [("norm", model.model.norm), ("lm_head", model.lm_head)]
    for name, module in named:
        handles.append(module.register_forward_pre_hook(
            lambda mod, args, name=name: pool.log_event("pre", name, int(args[0].shape[0]))))
        handles.append(module.register_forward_hook(
            lambda mod, args, out, name=name: pool.log_event("post", name, int(args[0].shape[0]))))
    return handles


def _stage_job(impl, rank, world, group, case: PPCase, args=None) -> dict:
    model = Transformer(case.config(ModelConfig), seed=case.seed)
    watch_modules(model)
    call = args if args is not None else (case.microbatches, rank, world)
    out = impl.get("pipeline_forward")(model, case.tokens(), *call, group=group)
    return {"logits": None if out is None else torch.as_tensor(out).detach().cpu().clone(),
            "returned_none": out is None}


def forward(impl, case: PPCase) -> list[dict]:
    """Per stage: ``{"result", "error", "log"}`` (p = 1: in this process; its log holds the
    module events only)."""
    impl.get("pipeline_forward")                          # not implemented: a skip, here
    if case.stages == 1:
        import traceback
        saved, pool._STATE["log"] = pool._STATE["log"], []
        try:
            result, error = _stage_job(impl, 0, 1, None, case), None
        except Exception:  # noqa: BLE001 -- reported like a rank's
            result, error = None, traceback.format_exc()
        log, pool._STATE["log"] = pool._STATE["log"], saved
        return [{"result": result, "error": error, "log": log}]
    return pool.run(impl, _stage_job, case.stages, case, keep_tensors=True)


def _bad_job(impl, rank, world, group, case: PPCase, what: str):
    model = Transformer(case.config(ModelConfig), seed=case.seed)
    call = {"stage": ((rank + 1) % world, world), "world": (rank, 4 if world == 2 else 2)}[what]
    try:
        impl.get("pipeline_forward")(model, case.tokens(), case.microbatches, *call, group=group)
    except (ValueError, TypeError) as exc:
        return {"type": type(exc).__name__, "message": str(exc)}
    return None


def bad(impl, case: PPCase, what: str) -> list[dict]:
    """On a real group: ``what`` "stage" (another rank's stage) or "world" (a stage count the
    group does not have): the error each rank raised (type, message) or None."""
    impl.get("pipeline_forward")
    return pool.run(impl, _bad_job, case.stages, case, what)


def small_schedules(impl, domain) -> list:
    """For each (p, m, kind, training, (t_f, t_b)) of ``domain``: the implementation's schedule (plain
    lists), its simulation and ``bubble_fraction(p, m)`` -- one call into the implementation's
    process for the whole domain."""
    schedule_fn, simulate, bubble = impl.get("pipeline_schedule"), impl.get("simulate_schedule"), impl.get("bubble_fraction")
    out = []
    for p, m, kind, training, (tf, tb) in domain:
        sched = [[(str(k), int(j)) for k, j in steps] for steps in schedule_fn(p, m, kind, training=training)]
        sim = dict(simulate(sched, tf, tb))
        sim = {"steps": [[tuple(x) for x in st] for st in sim["steps"]], "makespan": sim["makespan"],
               "busy": list(sim["busy"]), "bubble": sim["bubble"], "peak_in_flight": list(sim["peak_in_flight"])}
        out.append((sched, sim, bubble(p, m)))
    return out
