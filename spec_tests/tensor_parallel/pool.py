"""A pool of forked gloo ranks, started once and reused by every example: where the implementation
runs (``impl.call_in_process``), :func:`run` forks :data:`SIZE` processes joined by
``init_process_group("gloo")`` on a free localhost port, with process groups of the first 2 and 3
ranks besides the whole world of 4; every later job of the same implementation reuses them.

A job is a module-level function ``fn(impl, rank, world, group, *args, **kwargs)`` of spec_tests
(sent by name: the ranks are forks, they have its module and the implementation loaded already)
run on ranks ``0..world-1`` with ``group`` the process group of those ranks; each rank answers
plain data: ``{"result", "error", "log", "seconds"}``. Starting the pool costs ~0.1-0.3 s (a fork
is ~20 ms, gloo's rendezvous and the two sub-groups the rest); a job then costs only its own work,
so a Hypothesis example of a 4-rank forward is milliseconds of set-up instead of a fresh group.

What each rank watches (``log``): every call of torch.distributed's ``ProcessGroup`` methods that
move data (``dist.all_reduce``, ``send``/``isend``, ``recv``/``irecv``, ``broadcast``, the
gathers, scatters and all-to-alls go through them) as ``(op, peer, [(dtype, shape, nbytes)],
tensors or None, time)``: ``peer`` the global rank of a send/recv (None for a collective), the
tensors cloned bit for bit when the job asks (``keep_tensors``), ``time`` ``time.monotonic()``
(one clock for every process of the machine). A receive is logged when its ``wait`` returns.
Jobs may add their own events with :func:`log_event`.

Failures: a rank that raises answers its traceback; a rank that does not answer within the job's
``timeout`` (a collective that not every rank joined, a hang), or within :data:`GRACE` seconds
after another rank raised, is reported "no answer" and the whole pool is killed (its process
group may be out of step); the next job starts a fresh one. A rank that skipped (a template's
stub: "not implemented") skips the test. One pool lives at a time per process (a new
implementation closes the previous pool); the ranks exit when their parent does (they poll it).
"""
from __future__ import annotations

import atexit
import datetime
import os
import pickle
import socket
import time
import traceback

import pytest
import torch

SIZE = 4                 # ranks in the pool: worlds of 2, 3 and 4 use its first ranks
GROUP_SIZES = (2, 3, 4)
TIMEOUT = 10.0           # seconds a job may take before the pool is killed (jobs take ~0.1-0.3 s)
GRACE = 2.0              # seconds the other ranks get once one rank raised
OPS = ("allreduce", "allreduce_coalesced", "allgather", "allgather_coalesced", "allgather_into_tensor_coalesced",
       "_allgather_base", "all_gather_single", "reduce_scatter", "_reduce_scatter_base", "reduce_scatter_single",
       "reduce_scatter_tensor_coalesced", "broadcast", "reduce", "gather", "scatter", "alltoall", "alltoall_base",
       "all_to_all_single", "send", "recv", "recv_anysource")

_STATE = {"log": [], "keep": False}   # in a rank: the current job's log


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def log_event(*event) -> None:
    """Add ``event`` (a tuple of plain data) to the running job's log, with the time: in a rank."""
    _STATE["log"].append(event + (time.monotonic(),))


def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _tensors(x)


def _describe(tensors):
    return [(str(t.dtype).removeprefix("torch."), tuple(t.shape), t.numel() * t.element_size()) for t in tensors]


class _Watched:
    """A Work whose ``wait`` logs the received tensors once they arrived."""

    def __init__(self, work, tensors, peer):
        self._work, self._tensors, self._peer = work, tensors, peer

    def wait(self, *args, **kwargs):
        out = self._work.wait(*args, **kwargs)
        kept = [t.detach().cpu().clone() for t in self._tensors] if _STATE["keep"] else None
        _STATE["log"].append(("recv", self._peer, _describe(self._tensors), kept, time.monotonic()))
        return out

    def __getattr__(self, name):
        return getattr(self._work, name)


def _watch() -> None:
    import torch.distributed as dist
    PG = dist.ProcessGroup

    def peer(group, rank):
        try:
            return dist.get_global_rank(group, rank)
        except Exception:  # noqa: BLE001 -- the default group: ranks are global
            return rank

    def wrap(name, original):
        if name == "recv":
            def watched(self, tensors, src, tag=0):
                return _Watched(original(self, tensors, src, tag), list(_tensors(tensors)), peer(self, src))
        elif name == "send":
            def watched(self, tensors, dst, tag=0):
                ts = list(_tensors(tensors))
                kept = [t.detach().cpu().clone() for t in ts] if _STATE["keep"] else None
                _STATE["log"].append(("send", peer(self, dst), _describe(ts), kept, time.monotonic()))
                return original(self, tensors, dst, tag)
        else:
            def watched(self, *args, **kwargs):
                ts = list(_tensors(args[0] if args else ()))
                kept = [t.detach().cpu().clone() for t in ts] if _STATE["keep"] else None
                _STATE["log"].append((name, None, _describe(ts), kept, time.monotonic()))
                return original(self, *args, **kwargs)
        return watched

    for name in OPS:
        original = getattr(PG, name, None)
        if original is not None:
            setattr(PG, name, wrap(name, original))


def _rank_main(impl, rank, port, conn, others, parent):
    import torch.distributed as dist
    for other in others:            # the parent's ends of the other ranks' pipes
        other.close()
    torch.set_num_threads(1)
    try:
        _watch()
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=SIZE,
                                timeout=datetime.timedelta(seconds=2 * TIMEOUT))
        groups = {n: (None if n == SIZE else dist.new_group(list(range(n)))) for n in GROUP_SIZES}
        conn.send_bytes(pickle.dumps({"ready": True}))
    except BaseException:  # noqa: BLE001
        conn.send_bytes(pickle.dumps({"ready": False, "error": traceback.format_exc()}))
        os._exit(1)
    while True:
        if not conn.poll(1.0):
            if os.getppid() != parent:
                os._exit(0)
            continue
        try:
            fn, world, args, kwargs, keep = pickle.loads(conn.recv_bytes())
        except (EOFError, OSError):
            os._exit(0)
        _STATE["log"], _STATE["keep"] = [], keep
        start = time.perf_counter()
        out = {"result": None, "error": None}
        try:
            out["result"] = fn(impl, rank, world, groups[world], *args, **kwargs)
        except pytest.skip.Exception as exc:
            out["error"], out["skip"] = traceback.format_exc(), exc
        except BaseException:  # noqa: BLE001 -- reported to the test, which decides
            out["error"] = traceback.format_exc()
        out["seconds"] = time.perf_counter() - start
        out["log"] = _STATE["log"]
        try:
            conn.send_bytes(pickle.dumps(out))
        except Exception:  # noqa: BLE001 -- a result that does not pickle
            conn.send_bytes(pickle.dumps({"result": None, "error": traceback.format_exc(), "log": [], "seconds": 0.0}))


class Pool:
    """:data:`SIZE` forked ranks of one implementation (module doc)."""

    def __init__(self, impl):
        import multiprocessing as mp
        ctx = mp.get_context("fork")
        self.impl, self.alive = impl, True
        port, parent = free_port(), os.getpid()
        self.procs, self.conns = [], []
        for rank in range(SIZE):
            mine, theirs = ctx.Pipe(duplex=True)
            p = ctx.Process(target=_rank_main, args=(impl, rank, port, theirs, list(self.conns), parent), daemon=True)
            p.start()
            theirs.close()
            self.procs.append(p)
            self.conns.append(mine)
        deadline = time.monotonic() + TIMEOUT
        for rank, conn in enumerate(self.conns):
            ok = conn.poll(max(0.0, deadline - time.monotonic()))
            msg = pickle.loads(conn.recv_bytes()) if ok else {"ready": False, "error": "no answer"}
            if not msg.get("ready"):
                self.close()
                raise RuntimeError(f"the gloo pool did not start: rank {rank}: {msg.get('error')}")

    def run(self, fn, world: int, args=(), kwargs=None, *, keep_tensors: bool = False,
            timeout: float = TIMEOUT) -> list[dict]:
        if world not in GROUP_SIZES:
            raise ValueError(f"world {world}: the pool runs worlds of {GROUP_SIZES}")
        job = pickle.dumps((fn, world, tuple(args), dict(kwargs or {}), keep_tensors))
        for conn in self.conns[:world]:
            conn.send_bytes(job)
        outs = [None] * world
        deadline = time.monotonic() + timeout
        while any(o is None for o in outs):
            waiting = [r for r in range(world) if outs[r] is None]
            got = False
            for r in waiting:
                if self.conns[r].poll(0.0):
                    try:
                        outs[r] = pickle.loads(self.conns[r].recv_bytes())
                    except (EOFError, OSError):
                        outs[r] = {"result": None, "error": "the rank died before it answered", "log": [], "dead": True}
                    got = True
                    if outs[r].get("error") is not None:
                        deadline = min(deadline, time.monotonic() + GRACE)
            if got:
                continue
            if time.monotonic() > deadline:
                for r in waiting:
                    outs[r] = {"result": None, "log": [], "dead": True,
                               "error": f"rank {r} gave no answer within {timeout:g} s (a collective that not "
                                        "every rank joined? a hang?)"}
                break
            time.sleep(0.002)
        if any(o.get("dead") for o in outs):
            self.close()
        for o in outs:
            if o.get("skip") is not None:
                raise o["skip"]
        return outs

    def close(self) -> None:
        self.alive = False
        for conn in self.conns:
            conn.close()
        for p in self.procs:
            if p.is_alive():
                p.kill()
        for p in self.procs:
            p.join(1.0)


_CURRENT: dict = {"pool": None, "owner": None}


def pool_for(impl) -> Pool:
    """The live pool of ``impl`` (its Implementation and the concept it is bound to: the ranks
    hold that view), starting one (and closing another's)."""
    owner = (getattr(impl, "implementation", impl), getattr(impl, "concept", None))
    pool = _CURRENT["pool"]
    if pool is not None and (_CURRENT["owner"][0] is not owner[0] or _CURRENT["owner"][1] != owner[1]
                             or not pool.alive):
        pool.close()
        pool = None
    if pool is None:
        pool = Pool(impl)
        _CURRENT.update(pool=pool, owner=owner)
    return pool


def run(impl, fn, world: int, *args, keep_tensors: bool = False, timeout: float = TIMEOUT, **kwargs) -> list[dict]:
    """``fn(impl, rank, world, group, *args, **kwargs)`` on ranks 0..world-1 of ``impl``'s pool."""
    return pool_for(impl).run(fn, world, args, kwargs, keep_tensors=keep_tensors, timeout=timeout)


@atexit.register
def _close_at_exit() -> None:
    if _CURRENT["pool"] is not None:
        _CURRENT["pool"].close()
