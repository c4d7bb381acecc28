"""The disagg tests' cluster runs, made where the implementation runs (``impl.call_in_process``):
``run`` forks the group (spec_tests/disagg/cluster.py) from the implementation's process, so its
workers are the implementation's own functions, and returns plain data for the test to judge."""
from __future__ import annotations

import contextlib

import torch

from reference.model import ModelConfig, Transformer
from spec_tests.disagg import cluster
from spec_tests.disagg.strategies import DisaggCase


def _plain_handoff(h) -> dict:
    logits = getattr(h, "first_logits", None)
    return {"status": str(getattr(h, "status", None)), "decode_rank": getattr(h, "decode_rank", None),
            "first_token": getattr(h, "first_token", None), "error": getattr(h, "error", None),
            "first_logits": None if logits is None else logits.detach().cpu().clone(),
            "attempts": [(a[0], None if a[1] is None else str(a[1])) for a in getattr(h, "attempts", [])]}


def _mode(invariant: bool):
    if not invariant:
        return contextlib.nullcontext()
    from reference.batch_invariant import invariant_mode
    return invariant_mode()


def run(impl, case: DisaggCase, *, faults=None, invariant: bool = False, timeout: float = 5.0,
        decode_changes=None) -> list[dict]:
    """One cluster run of ``case``: rank 0 ``prefill_worker`` (then, in the same process, the
    implementation's ``run_colocated`` and the reference's prefill KV of every request), ranks
    1.. ``decode_worker`` (a model of the case's config with ``decode_changes``). Per rank: the
    launcher's dict, ``result`` made plain."""
    from reference import disagg as ref
    model = Transformer(case.config(ModelConfig), seed=case.seed)
    dmodel = Transformer(case.config(ModelConfig, **(decode_changes or {})), seed=case.seed) if decode_changes else model
    Request = ref.Request
    ranks = list(range(1, case.world))

    def prefill_job(rank, groups):
        requests = [Request(rid, list(p), new) for rid, p, new in case.requests]
        with _mode(invariant):
            handoffs = impl.get("prefill_worker")(model, requests, ranks, groups=groups, timeout=timeout)
            plain = {int(rid): _plain_handoff(h) for rid, h in dict(handoffs).items()}
            colocated, kv = {}, {}
            for rid, p, new in case.requests:
                if len(p) + new - 1 <= case.max_seq_len:
                    tokens, logits = impl.get("run_colocated")(model, Request(rid, list(p), new))
                    colocated[rid] = (torch.as_tensor(tokens).cpu().clone(), logits.detach().cpu().clone())
                    ref_colocated = ref.run_colocated(model, ref.Request(rid, p, new))
                    cache, _, _ = ref.prefill(model, ref.Request(rid, p, new))
                    kv[rid] = (ref.pack_kv(cache), ref_colocated)
        return {"handoffs": plain, "colocated": colocated, "reference": kv}

    def decode_job(rank, groups):
        with _mode(invariant):
            done = impl.get("decode_worker")(dmodel, 0, group=groups[rank], timeout=timeout + 25)
        return {int(rid): (torch.as_tensor(t).cpu().clone(), lg.detach().cpu().clone()) for rid, (t, lg) in dict(done).items()}

    return cluster.launch([prefill_job] + [decode_job] * len(ranks), faults=faults, timeout=timeout + 30)
