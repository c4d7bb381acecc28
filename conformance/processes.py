"""Worker processes: the zygote that forks them, spawning where it cannot, their diagnostics files,
and cleanup at exit. Knows nothing of submissions or concepts: a worker is started with a config
(plain data) and two pipe ends; what runs in it is ``conformance.worker``.

Workers are forked from a *zygote* (a process that imported torch once), so a worker starts in
milliseconds; without ``os.fork``/``socket.send_fds`` they are spawned with
``python -m conformance.worker``.
"""
from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import torch

from conformance.clock import CLOCK

ZYGOTE_START_LIMIT = 300.0  # seconds for the zygote to import torch (not counted against a test)


class WorkerProcess:
    """A worker process: forked by the zygote or spawned."""

    def __init__(self, pid: int, zygote: "Zygote | None", popen: subprocess.Popen | None, diag: str):
        self.pid, self.zygote, self.popen, self.diag = pid, zygote, popen, diag
        self.code: int | None = None
        self.waited = False

    def kill(self) -> None:
        for target in (lambda: os.killpg(self.pid, signal.SIGKILL), lambda: os.kill(self.pid, signal.SIGKILL)):
            try:
                target()
                return
            except (ProcessLookupError, PermissionError, OSError):
                continue

    def wait(self, timeout: float) -> int | None:
        if self.waited:
            return self.code
        self.waited = True
        if self.popen is not None:
            try:
                self.code = self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                self.code = self.popen.wait(5)
        elif self.zygote is not None:
            self.code = self.zygote.wait(self.pid, timeout)
        return self.code

    def diagnostics(self) -> str:
        try:
            with open(self.diag, "rb") as f:
                text = f.read(6000).decode("utf-8", "replace").strip()
        except OSError:
            return ""
        if not text:
            return ""
        return "worker diagnostics (faulthandler):\n" + "\n".join("    " + l for l in text.splitlines()[:60])


class Zygote:
    """A process that forks workers on request: a fork of the judge itself, taken before any test
    runs (torch and the reference are already imported there, so a worker starts in
    milliseconds); where the judge cannot fork, a spawned ``python -m conformance.worker zygote``."""

    def __init__(self, tmpdir: str, fork: bool = True):
        self.lock = threading.Lock()
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = parent
        self.diag = os.path.join(tmpdir, "zygote.log")
        self.proc = None
        self.pid = None
        if fork:
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:  # the zygote: never returns into the judge's code
                try:
                    parent.close()
                    os.setsid()
                    from conformance import worker
                    worker.zygote_loop(child)
                finally:
                    os._exit(70)
            self.pid = pid
        else:
            with open(self.diag, "wb") as log:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "conformance.worker", "zygote", str(child.fileno())],
                    pass_fds=[child.fileno()], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                    stderr=log, start_new_session=True, env=_worker_env(), cwd=os.getcwd())
            self.pid = self.proc.pid
        child.close()
        self.ready = False
        self.broken = False

    def _await_ready(self) -> None:
        if self.ready:
            return
        t0 = time.monotonic()
        self.sock.settimeout(ZYGOTE_START_LIMIT)
        try:
            reply = json.loads(self.sock.recv(65536) or b"{}")
        except (OSError, ValueError):
            reply = {}
        finally:
            CLOCK.extend(time.monotonic() - t0)
        if not reply.get("ready"):
            self.broken = True
            raise RuntimeError(f"the worker zygote did not start: {_tail(self.diag)}")
        self.ready = True

    def fork(self, config: dict, fds: list[int]) -> int:
        with self.lock:
            self._await_ready()
            self.sock.settimeout(60)
            socket.send_fds(self.sock, [json.dumps({"op": "fork", "config": config}).encode()], fds)
            reply = json.loads(self.sock.recv(65536) or b"{}")
            if "pid" not in reply:
                self.broken = True
                raise RuntimeError(f"the worker zygote failed to fork: {reply}")
            return reply["pid"]

    def wait(self, pid: int, timeout: float) -> int | None:
        with self.lock:
            try:
                self.sock.settimeout(timeout)
                self.sock.send(json.dumps({"op": "wait", "pid": pid, "timeout": max(timeout - 1, 1)}).encode())
                return json.loads(self.sock.recv(65536) or b"{}").get("code")
            except (OSError, ValueError):
                return None

    def close(self, grace: float = 5.0) -> None:
        """Close the socket: the zygote reaps its workers (which exit when their pipes close) and
        exits; killed if it has not within ``grace`` seconds."""
        self.sock.close()
        end = time.monotonic() + grace
        while time.monotonic() < end:
            try:
                if self.proc is not None:
                    if self.proc.poll() is not None:
                        return
                elif os.waitpid(self.pid, os.WNOHANG)[0]:
                    return
            except ChildProcessError:
                return
            time.sleep(0.01)
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            if self.proc is not None:
                self.proc.wait(5)
            else:
                os.waitpid(self.pid, 0)
        except Exception:  # noqa: BLE001
            pass


def _tail(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read()[-3000:].decode("utf-8", "replace")
    except OSError:
        return ""


def _worker_env() -> dict:
    env = dict(os.environ)
    env.setdefault("PYTHONHASHSEED", "0")
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths + env.get("PYTHONPATH", "").split(os.pathsep)))
    return env


class Pool:
    """Worker processes of this judge: the zygote, temp files, cleanup at exit."""

    def __init__(self):
        self._tmpdir: str | None = None
        self.zygote: Zygote | None = None
        self.processes: list[WorkerProcess] = []
        self.connections: list = []
        self._counter = itertools.count(1)

    def prestart(self, fork: bool = False) -> None:
        """Start the zygote. ``fork=True`` forks this process, which is only safe before it has run
        a parallel torch op (a fork of a process whose OpenMP pool is running deadlocks in the
        child's first matmul): the plugin does it in pytest_configure. Otherwise the zygote is a
        fresh ``python -m conformance.worker zygote`` (one more torch import). Where CUDA is
        present the zygote is always spawned: a forked child cannot use CUDA once the parent has
        touched it ("Cannot re-initialize CUDA in forked subprocess"). ``INFERSPEC_ZYGOTE=spawn``
        forces the spawned zygote anywhere."""
        if self.zygote is None and _can_fork():
            try:
                fork = (fork and os.environ.get("INFERSPEC_ZYGOTE") != "spawn"
                        and not torch.cuda.is_available())
                self.zygote = Zygote(self.tmpdir, fork=fork)
            except Exception:  # noqa: BLE001
                self.zygote = None

    def start(self, config: dict) -> tuple[WorkerProcess, int, int]:
        n = next(self._counter)
        config = dict(config, diag=os.path.join(self.tmpdir, f"worker-{n}.log"), cwd=os.getcwd(),
                      sys_path=[p for p in sys.path], threads=torch.get_num_threads(),
                      env={k: v for k, v in os.environ.items() if k.startswith(("TRITON_", "INFERSPEC_"))})
        j2w_r, j2w_w = os.pipe()
        w2j_r, w2j_w = os.pipe()
        self.prestart()
        proc = None
        if self.zygote is not None and not self.zygote.broken:
            try:
                pid = self.zygote.fork(config, [j2w_r, w2j_w])
                proc = WorkerProcess(pid, self.zygote, None, config["diag"])
            except Exception:  # noqa: BLE001  (fall back to spawning)
                proc = None
        if proc is None:
            with open(os.path.join(self.tmpdir, f"worker-{n}.json"), "w") as f:
                json.dump(config, f)
            with open(config["diag"], "wb") as log:
                popen = subprocess.Popen(
                    [sys.executable, "-m", "conformance.worker", "serve", str(j2w_r), str(w2j_w), f.name],
                    pass_fds=[j2w_r, w2j_w], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                    stderr=log, start_new_session=True, env=_worker_env())
            proc = WorkerProcess(popen.pid, None, popen, config["diag"])
        os.close(j2w_r)
        os.close(w2j_w)
        self.processes.append(proc)
        return proc, w2j_r, j2w_w

    def shutdown(self) -> None:
        for conn in self.connections:
            conn.close()
        self.connections.clear()
        for p in self.processes:  # their pipes are closed: they exit on their own; these are stragglers
            if p.popen is not None and p.popen.poll() is None:
                try:
                    p.popen.wait(2)
                except subprocess.TimeoutExpired:
                    p.kill()
        for p in self.processes:
            if p.popen is not None:
                try:
                    p.popen.wait(5)
                except Exception:  # noqa: BLE001
                    pass
        self.processes.clear()
        if self.zygote is not None:
            self.zygote.close()
            self.zygote = None
        if self._tmpdir is not None:  # the workers' logs: their words are in the verdicts by now
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    @property
    def tmpdir(self) -> str:
        """The workers' diagnostics folder, made when the first worker starts, removed at shutdown."""
        if self._tmpdir is None:
            self._tmpdir = tempfile.mkdtemp(prefix="inferspec-workers-")
        return self._tmpdir


def _can_fork() -> bool:
    return hasattr(os, "fork") and hasattr(socket, "send_fds") and sys.platform.startswith("linux")


_POOL: Pool | None = None


def pool() -> Pool:
    """This judge's pool, made on first use and shut down at exit."""
    global _POOL
    if _POOL is None:
        import atexit
        _POOL = Pool()
        atexit.register(_POOL.shutdown)
    return _POOL


def shutdown() -> None:
    """End every worker and the zygote now, if a pool was ever made (the plugin calls it when the
    session ends)."""
    if _POOL is not None:
        _POOL.shutdown()
