"""Expert-parallel runs: a gloo group of forked processes on this machine, made where the
implementation runs (the tests call :func:`ep_run` and :func:`ep_call` through
``impl.call_in_process``: for a submission, in its worker), so every rank calls the
implementation's own ``ep_moe_forward``.

A run forks W processes (about 20-50 ms: torch and the implementation are already loaded),
joins them with ``init_process_group("gloo")`` on a free localhost port and runs a LIST of cases
in that one group (one spawn checks several cases); each rank sends back, through a pipe, plain
data: its outputs as tensors, or the exception it raised. A rank that has not reported after
``timeout`` seconds is killed and reported as such.
"""
from __future__ import annotations

import datetime
import os
import pickle
import socket
import time
import traceback

import pytest
import torch

from spec_tests.moe.strategies import MoECase


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _child(rank, world, port, job, conn, timeout):
    import torch.distributed as dist
    torch.set_num_threads(1)          # a forked child must not enter the parent's OpenMP pool
    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=timeout))
        out = {"result": job(rank), "error": None}
    except pytest.skip.Exception as exc:   # a template's stub: "not implemented"
        out = {"result": None, "error": traceback.format_exc(), "skip": exc}
    except BaseException as exc:  # noqa: BLE001 -- reported to the test, which decides
        # the exception as plain data: its classes' names (most derived first) and its message
        out = {"result": None, "error": traceback.format_exc(),
               "exception": ([c.__name__ for c in type(exc).__mro__], str(exc))}
    try:
        conn.send_bytes(pickle.dumps(out))
        conn.close()
    finally:
        os._exit(0)


def launch(world: int, job, *, timeout: float = 60.0) -> list[dict]:
    """``job(rank)`` on each rank of a fresh gloo group of ``world`` forked processes. Per rank
    ``{"result", "error", "exception"?}`` (the exception as (its classes' names, its message));
    a rank that did not report has the error "no report before the deadline" (it is killed)."""
    import multiprocessing as mp
    ctx = mp.get_context("fork")
    port, procs, pipes = _free_port(), [], []
    for rank in range(world):
        read, write = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_child, args=(rank, world, port, job, write, timeout), daemon=True)
        p.start()
        write.close()
        procs.append(p)
        pipes.append(read)
    deadline = time.monotonic() + timeout + 5
    outs = []
    for p, read in zip(procs, pipes):
        out = {"result": None, "error": "no report before the deadline"}
        if read.poll(max(0.0, deadline - time.monotonic())):
            try:
                out = pickle.loads(read.recv_bytes())
            except EOFError:
                out["error"] = "the process died before it reported"
        read.close()
        outs.append(out)
    for p in procs:
        p.join(max(0.1, min(2.0, deadline - time.monotonic())))
        if p.is_alive():
            p.kill()
            p.join()
    for out in outs:
        if out.get("skip") is not None:
            raise out["skip"]
    return outs


def rank_slices(experts: int, split: tuple[int, ...]) -> list[tuple[slice, slice]]:
    """Per rank (its tokens, its experts): tokens in rank order ``split[r]`` each, experts in
    contiguous blocks of E / W."""
    world = len(split)
    per = experts // world
    starts = [sum(split[:r]) for r in range(world)]
    return [(slice(starts[r], starts[r] + split[r]), slice(r * per, (r + 1) * per)) for r in range(world)]


def ep_run(impl, runs: list[tuple[MoECase | dict, tuple[int, ...]]], *, idle: int = 0,
           timeout: float = 60.0) -> list[dict]:
    """Every (case, split) of ``runs`` (a case: a MoECase or moe_forward's keyword arguments) in ONE group of ``len(split)`` ranks (all splits the same
    length): each rank calls ``ep_moe_forward`` on its tokens and experts of each case in turn.
    ``idle`` > 0: the world has that many more ranks, first, which take no part: the MoE ranks
    pass ``group=dist.new_group([idle, ...])`` (else the default group, ``group`` not passed).
    Per MoE rank: ``{"result": [its output per case], "error"}``."""
    impl.get("ep_moe_forward")                      # not implemented: a skip, here
    size = len(runs[0][1])
    assert all(len(split) == size for _, split in runs)
    built = []
    for case, split in runs:
        kw = case.build() if isinstance(case, MoECase) else case
        built.append((kw, rank_slices(kw["w_gate"].shape[0], split)))

    def job(rank):
        import torch.distributed as dist
        group = dist.new_group(list(range(idle, idle + size))) if idle else None
        outs = []
        if rank >= idle:
            fn = impl.get("ep_moe_forward")
            extra = dict(group=group) if idle else {}
            for kw, slices in built:
                tok, exp = slices[rank - idle]
                y = fn(kw["x"][tok], kw["router_logits"][tok], kw["w_gate"][exp], kw["w_up"][exp], kw["w_down"][exp],
                       kw["k"], kw["capacity_factor"], kw["renormalize"], **extra)
                outs.append(y.detach().cpu().clone() if isinstance(y, torch.Tensor) else y)
        if idle:
            dist.barrier()            # the idle ranks stay until the group is done with the store
        return outs

    return launch(idle + size, job, timeout=timeout)[idle:]


def ep_call(impl, kwargs: dict, *, world: int = 1, timeout: float = 20.0) -> dict:
    """One call ``ep_moe_forward(**kwargs)`` on rank 0 of a group of ``world`` (the others make
    the same call): rank 0's ``{"result", "error", "exception"?}``."""
    impl.get("ep_moe_forward")

    def job(rank):
        y = impl.get("ep_moe_forward")(**kwargs)
        return y.detach().cpu().clone() if isinstance(y, torch.Tensor) else y

    return launch(world, job, timeout=timeout)[0]


class OneRankGroup:
    """``impl`` seen through a process group of one rank: ``get(name)(**kwargs)`` runs the
    implementation's ``name`` on rank 0 of a fresh one-rank gloo group (:func:`ep_call`) and
    returns its result or raises the exception it raised there (for bad-input tables, whose calls
    must fail before any message)."""

    def __init__(self, impl):
        self.impl = impl

    def get(self, name: str):
        assert name == "ep_moe_forward", name
        impl = self.impl

        def call(**kwargs):
            out = impl.call_in_process(ep_call, kwargs)
            if out.get("exception") is not None:
                raise rebuild(*out["exception"])
            if out["error"] is not None:
                raise AssertionError(out["error"])
            return out["result"]
        return call


def rebuild(classes: list[str], message: str) -> BaseException:
    """The first built-in exception class among ``classes`` (a student's ValueError subclass
    comes back as a ValueError), with the message."""
    import builtins
    for name in classes:
        cls = getattr(builtins, name, None)
        if isinstance(cls, type) and issubclass(cls, BaseException):
            return cls(message)
    return RuntimeError(message)
