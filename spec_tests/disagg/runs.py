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
        decode_changes=None, default_src: bool = False, prefill_rank: int = 0) -> list[dict]:
    """One cluster run of ``case``: rank 0 ``prefill_worker`` (then, in the same process, the
    implementation's ``run_colocated`` and the reference's prefill KV of every request), ranks
    1.. ``decode_worker`` (a model of the case's config with ``decode_changes``; ``default_src``:
    called without ``src``, the contract's default 0 being the prefill's rank). Per rank: the
    launcher's dict, ``result`` made plain. ``prefill_rank`` 1 (a world of 2): the roles swapped,
    the prefill worker on rank 1 and the decode worker on rank 0 (``src`` 1)."""
    from reference import disagg as ref
    for name in ("prefill_worker", "decode_worker", "run_colocated"):   # not implemented: a skip, here
        impl.get(name)
    model = Transformer(case.config(ModelConfig), seed=case.seed)
    dmodel = Transformer(case.config(ModelConfig, **(decode_changes or {})), seed=case.seed) if decode_changes else model
    Request = ref.Request
    ranks = list(range(1, case.world))
    if prefill_rank:
        assert prefill_rank == 1 and case.world == 2, "roles swapped: a world of 2 only"
        ranks = [0]

    def prefill_job(rank, groups):
        groups = {0: groups[1]} if prefill_rank else groups     # the pair group (0, 1)
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
            src = () if default_src else (prefill_rank,)
            group = groups[1] if prefill_rank else groups[rank]
            done = impl.get("decode_worker")(dmodel, *src, group=group, timeout=timeout + 25)
        return {int(rid): (torch.as_tensor(t).cpu().clone(), lg.detach().cpu().clone()) for rid, (t, lg) in dict(done).items()}

    jobs = [decode_job, prefill_job] if prefill_rank else [prefill_job] + [decode_job] * len(ranks)
    return cluster.launch(jobs, faults=faults, timeout=timeout + 30)


def run_header(impl, case: DisaggCase, words, *, timeout: float = 2.0) -> list[dict]:
    """Rank 0 is the tests' own sender, speaking the reference's wire format: it sends the int64
    message ``words`` as a header to the implementation's ``decode_worker`` on rank 1 and waits
    ``timeout`` s for a reply (then, if one came, sends the reference's STOP). Rank 0's result:
    ``{"reply": the reply as a list, or None}``."""
    import datetime

    import torch.distributed as dist
    from reference import disagg as ref
    impl.get("decode_worker")
    model = Transformer(case.config(ModelConfig), seed=case.seed)
    wait = datetime.timedelta(seconds=timeout)

    def sender(rank, groups):
        dist.isend(torch.tensor(words, dtype=torch.int64), dst=1, group=groups[1]).wait(wait)
        reply = torch.zeros(2, dtype=torch.int64)
        try:
            dist.irecv(reply, src=1, group=groups[1]).wait(wait)
        except Exception:  # noqa: BLE001 -- no reply: the worker ended or stayed silent
            return {"reply": None}
        try:
            dist.isend(ref.STOP.clone(), dst=1, group=groups[1]).wait(wait)
        except Exception:  # noqa: BLE001
            pass
        return {"reply": reply.tolist()}

    def decode_job(rank, groups):
        done = impl.get("decode_worker")(model, 0, group=groups[rank], timeout=timeout + 1)
        return {int(rid): None for rid in dict(done)}

    return cluster.launch([sender, decode_job], timeout=timeout + 10)
