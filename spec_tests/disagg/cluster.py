"""A small gloo group of forked processes that runs an implementation's workers, where the
implementation runs (``impl.call_in_process``).

Rank 0 runs ``prefill_worker``, ranks 1..W-1 ``decode_worker``; every rank is a ``fork`` of the
calling process (about 20 ms each: torch, the model and the implementation are already loaded,
nothing is imported or pickled to start one), joined by ``init_process_group("gloo")`` on a free
localhost port, with one process group per (0, r) pair. Each child:

* watches torch.distributed's point-to-point traffic: ``ProcessGroup.send`` / ``.recv`` (which
  ``dist.send``/``isend``/``recv``/``irecv`` and ``batch_isend_irecv`` go through) are wrapped so
  every tensor sent (at the call) and received (when its ``wait`` returns) is logged with the peer
  rank, bit for bit;
* may carry an injected fault: ``"exit_after_first_recv"`` exits (code :data:`FAULT_EXIT`) as soon
  as its first receive completes (a decode worker that dies after reading a header);
  ``"exit_before_ack"`` exits when it first tries to send after it has received floating-point
  data (it dies holding the KV, before acknowledging it); ``"hang_after_first_recv"`` stops
  answering after its first receive (killed when the group is done);
* sends back, through a pipe, plain data: its worker's result made into dicts, lists and tensors,
  the traffic log, or the traceback of what it raised.

Nothing of the submission crosses the pipe but tensors and numbers, so any implementation (a
mutant loaded from patched source, a student's file) works.
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

FAULT_EXIT = 17
GRACE = 5.0          # seconds the decode ranks get to report once the prefill rank has
FAULTS = ("exit_after_first_recv", "exit_before_ack", "hang_after_first_recv")


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class _Watched:
    """A Work whose ``wait`` logs the received tensors (and runs a fault) once they arrived."""

    def __init__(self, work, tensors, peer, state):
        self._work, self._tensors, self._peer, self._state = work, tensors, peer, state

    def wait(self, *args, **kwargs):
        out = self._work.wait(*args, **kwargs)
        st = self._state
        st["log"].append(("recv", self._peer, [t.detach().cpu().clone() for t in self._tensors]))
        if any(t.is_floating_point() for t in self._tensors):
            st["got_float"] = True
        st["recvs"] += 1
        if st["fault"] == "exit_after_first_recv" and st["recvs"] == 1:
            os._exit(FAULT_EXIT)
        if st["fault"] == "hang_after_first_recv" and st["recvs"] == 1:
            time.sleep(3600)
        return out

    def __getattr__(self, name):
        return getattr(self._work, name)


def _watch(state) -> None:
    import torch.distributed as dist
    PG = dist.ProcessGroup
    send, recv = PG.send, PG.recv

    def peer(group, rank):
        try:
            return dist.get_global_rank(group, rank)
        except Exception:  # noqa: BLE001 -- the default group: ranks are global
            return rank

    def watched_send(self, tensors, dst, tag=0):
        if state["fault"] == "exit_before_ack" and state["got_float"]:
            os._exit(FAULT_EXIT)
        state["log"].append(("send", peer(self, dst), [t.detach().cpu().clone() for t in tensors]))
        return send(self, tensors, dst, tag)

    def watched_recv(self, tensors, src, tag=0):
        return _Watched(recv(self, tensors, src, tag), tensors, peer(self, src), state)

    PG.send, PG.recv = watched_send, watched_recv


def _child(rank, world, port, job, fault, conn, timeout):
    import torch.distributed as dist
    torch.set_num_threads(1)
    state = {"log": [], "fault": fault, "recvs": 0, "got_float": False}
    try:
        _watch(state)
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=timeout))
        groups = {r: dist.new_group([0, r]) for r in range(1, world)}
        out = {"result": job(rank, groups), "error": None}
    except pytest.skip.Exception as exc:   # the rank skipped (a template's stub: "not implemented")
        out = {"result": None, "error": traceback.format_exc(), "skip": exc}
    except BaseException:  # noqa: BLE001 -- reported to the test, which decides
        out = {"result": None, "error": traceback.format_exc()}
    out["log"] = state["log"]
    try:
        conn.send_bytes(pickle.dumps(out))
        conn.close()
    finally:
        os._exit(0)


def launch(jobs, *, faults=None, timeout: float = 30.0) -> list[dict]:
    """Run ``jobs[r](rank, groups)`` on rank r of a fresh gloo group of ``len(jobs)`` forked
    processes; ``faults`` ``{rank: fault}``. Returns per rank ``{"result", "error", "log",
    "exitcode"}`` (a rank that died has result None and its exit code). Every child still alive
    after ``timeout`` + 5 seconds, or :data:`GRACE` seconds after rank 0 reported (a hung one), is
    killed."""
    import multiprocessing as mp
    faults = faults or {}
    ctx = mp.get_context("fork")
    port, procs, pipes = free_port(), [], []
    for rank, job in enumerate(jobs):
        read, write = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_child, args=(rank, len(jobs), port, job, faults.get(rank), write, timeout),
                        daemon=True)
        p.start()
        write.close()
        procs.append(p)
        pipes.append(read)
    deadline = time.monotonic() + timeout + 5
    outs = []
    order = sorted(range(len(jobs)), key=lambda r: str(faults.get(r, "")).startswith("hang"))
    for rank in order:
        p, read = procs[rank], pipes[rank]
        out = {"result": None, "error": None, "log": []}
        hung = str(faults.get(rank, "")).startswith("hang")   # waited for only once the others are done
        if read.poll(0.0 if hung else max(0.0, deadline - time.monotonic())):
            if rank == 0:                      # the others have GRACE seconds more to stop
                deadline = min(deadline, time.monotonic() + GRACE)
            try:
                out = pickle.loads(read.recv_bytes())
            except EOFError:
                out["error"] = "the process died before it reported"
        else:
            out["error"] = "no report before the deadline"
        read.close()
        outs.append(out)
    outs = [outs[order.index(r)] for r in range(len(jobs))]
    for rank, (p, out) in enumerate(zip(procs, outs)):
        hung = str(faults.get(rank, "")).startswith("hang")
        p.join(0.0 if hung else max(0.1, min(2.0, deadline - time.monotonic())))
        if p.is_alive():
            p.kill()
            p.join()
        out["exitcode"] = p.exitcode
    for out in outs:                           # a rank that skipped skips the test, the same way
        if out.get("skip") is not None:
            raise out["skip"]
    return outs
