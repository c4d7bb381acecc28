"""The worker process of an isolated submission (:mod:`conformance.submission`): it imports one submission and serves the
judge's calls of one concept.

    python -m conformance.worker zygote FD           import torch once, fork a worker per request
    python -m conformance.worker serve RFD WFD JSON  one worker, spawned (no fork available)

A worker starts in its own session (the judge kills its process group), dies with its parent
(PR_SET_PDEATHSIG), writes C-level output to /dev/null and Python-level output to a small capped
buffer that goes back to the judge with the next message (so a submission printing 10 MB per call
costs nothing), dumps a crash's Python traceback with faulthandler to a file the judge reads, and
caps its address space at ``--memory`` GB (RLIMIT_AS).
"""
from __future__ import annotations

import contextlib
import faulthandler
import importlib
import importlib.abc
import io
import json
import os
import signal
import socket
import sys
import time
import types
from pathlib import Path

import torch

from conformance.bridge import flat_tensors
from conformance.implementation import (Implementation, NotImplementedInImpl, describe_import_failure, import_path,
                                        resolve_in, submission_home, view_for)
from conformance.verdict import ForbiddenReference, Verdict
from conformance.wire import (GUARDED_ROOTS, INSIDE_ROOTS, MAX_TEXT, Peer, ProtocolError, data_class,
                              shared_class)

PENDING_LIMIT = 4000  # characters of output carried per message (the rest is counted, dropped)


class _Capped(io.TextIOBase):
    """sys.stdout / sys.stderr of a worker: keeps a little, counts the rest."""

    def __init__(self):
        super().__init__()
        self.pending = []
        self.size = 0
        self.dropped = 0

    def write(self, s) -> int:
        s = str(s)
        room = PENDING_LIMIT - self.size
        if room > 0:
            self.pending.append(s[:room])
            self.size += min(len(s), room)
        self.dropped += max(len(s) - max(room, 0), 0)
        return len(s)

    def take(self):
        if not self.pending and not self.dropped:
            return None
        out = ("".join(self.pending), self.dropped)
        self.pending, self.size, self.dropped = [], 0, 0
        return out

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return 1  # /dev/null


class _ForbiddenModule(types.ModuleType):
    """Stands for a module of reference/, optimized/ or spec_tests/ while --forbid-reference:
    only the allowed names (vocabulary data types, constants, plain modules) are there."""

    def __getattr__(self, attr: str):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        raise ForbiddenReference(f"{self.__name__}.{attr}")


def _plain_constant(value) -> bool:
    if isinstance(value, (int, float, str, bytes, bool, type(None), torch.dtype)):
        return True
    if isinstance(value, (tuple, frozenset)):
        return all(_plain_constant(v) for v in value)
    return False


class _Guard(importlib.abc.MetaPathFinder):
    """--forbid-reference: while submission code runs, ``reference``/``optimized``/``spec_tests``
    in sys.modules are stubs; the real modules are swapped back in while the wire (un)pickles.

    ``allowed`` (module name -> names, from the judge's registry) is all the guard knows of the
    concepts: it imports each of those modules itself, so their stubs exist however this process
    was started (forked from a judge that imported them all, or spawned with nothing)."""

    def __init__(self, allowed: dict[str, list[str]]):
        for name in allowed:
            importlib.import_module(name)
        self.allowed = allowed
        self.real: dict[str, types.ModuleType] = {}
        self.stubs: dict[str, types.ModuleType] = {}
        self._seen = -1
        self.refresh()
        self.active = False
        sys.meta_path.insert(0, self)

    def refresh(self) -> None:
        """Stub every guarded module not stubbed yet: those imported since by the judge's side of
        this process (a class unpickled from a spec_tests module, a judge's function run here by
        ``call_in_process``), so that the submission cannot reach them either."""
        if len(sys.modules) == self._seen:
            return
        new = {n: m for n, m in list(sys.modules.items())
               if n.partition(".")[0] in GUARDED_ROOTS and n not in self.real and not isinstance(m, _ForbiddenModule)}
        for name, module in new.items():
            stub = _ForbiddenModule(name, getattr(module, "__doc__", None))
            if hasattr(module, "__path__"):
                stub.__path__ = []
            for attr in self.allowed.get(name, ()):
                if hasattr(module, attr):
                    setattr(stub, attr, getattr(module, attr))
            for attr, value in list(vars(module).items()):
                if attr.startswith("__"):
                    continue
                if isinstance(value, types.ModuleType):
                    if value.__name__.partition(".")[0] not in GUARDED_ROOTS:
                        setattr(stub, attr, value)
                elif _plain_constant(value):
                    setattr(stub, attr, value)
            self.real[name], self.stubs[name] = module, stub
        for name in new:  # packages hold their stub submodules
            parent, _, child = name.rpartition(".")
            if parent in self.stubs:
                setattr(self.stubs[parent], child, self.stubs[name])
        self._seen = len(sys.modules)

    def find_spec(self, fullname, path=None, target=None):
        if self.active and fullname.partition(".")[0] in GUARDED_ROOTS:
            raise ForbiddenReference(fullname)
        return None

    def enter(self) -> bool:
        was = self.active
        if not was:
            self.refresh()
            sys.modules.update(self.stubs)
            self.active = True
        return was

    def leave(self, was: bool) -> None:
        if not was:
            sys.modules.update(self.real)
            self.active = False

    def real_modules(self):
        guard = self

        class _Real:
            def __enter__(self):
                self.was = guard.active
                if self.was:
                    sys.modules.update(guard.real)
                    guard.active = False

            def __exit__(self, *exc):
                if self.was:
                    guard.refresh()
                    sys.modules.update(guard.stubs)
                    guard.active = True
                return False
        return _Real()


class _Submission:
    """Context: run submission code (under the guard's stubs when forbidding)."""

    def __init__(self, guard: _Guard | None):
        self.guard = guard

    def __enter__(self):
        self.was = self.guard.enter() if self.guard else True

    def __exit__(self, *exc):
        if self.guard:
            self.guard.leave(self.was)
        return False


class ImportFailed(Exception):
    """The submission did not import: ``str()`` is the verdict's one line, ``detail`` where it
    failed in the submission's own code (:func:`conformance.implementation.describe_import_failure`)."""

    def __init__(self, summary: str, detail: str = ""):
        super().__init__(summary)
        self.detail = detail


def _oom(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError):
        return True
    text = str(exc) if isinstance(exc, RuntimeError) else ""
    return "can't allocate memory" in text or "not enough memory" in text or "std::bad_alloc" in text


def _forbidden_in(exc: BaseException | None) -> ForbiddenReference | None:
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, ForbiddenReference):
            return exc
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


class WorkerPeer(Peer):
    def __init__(self, rfd: int, wfd: int, config: dict, capture: _Capped | None):
        super().__init__(rfd, wfd, "worker", handler=self._operation)
        self.config = config
        self.capture = capture
        self.guard = _Guard(config.get("allowed", {})) if config.get("forbid") else None
        self.module = None
        self._inside_impl = None
        self._rng_known = None
        self._exit_code = None

    def _serve(self, msg, received) -> None:
        super()._serve(msg, received)
        if self._exit_code is not None:
            os._exit(self._exit_code)

    # ---- the wire runs with the real modules; submission code with the stubs
    def _codec(self):
        return self.guard.real_modules() if self.guard else contextlib.nullcontext()

    def _run(self, fn, *args, **kwargs):
        with _Submission(self.guard):
            return fn(*args, **kwargs)

    def _meta(self) -> dict:
        meta = super()._meta()
        if self.capture is not None:
            out = self.capture.take()
            if out:
                meta["out"] = out
        if self.serving == 1 and self.depth == 0:
            state = torch.random.get_rng_state()
            if self._rng_known is None or not torch.equal(state, self._rng_known):
                meta["rng"] = state
                self._rng_known = state
        return meta

    def _apply_meta(self, meta: dict) -> None:
        super()._apply_meta(meta)
        if "rng" in meta:
            torch.random.set_rng_state(meta["rng"])
            self._rng_known = meta["rng"]

    def _special_exc(self, exc: BaseException) -> dict | None:
        """What ends the cell, as its Verdict and what the judge needs to word it; or a stub's
        "not implemented"."""
        forbidden = _forbidden_in(exc)
        if forbidden is not None:
            return {"died": Verdict.FORBIDDEN.value, "what": forbidden.what}
        if isinstance(exc, NotImplementedInImpl):
            return {"notimpl": list(exc.names)}
        if isinstance(exc, ImportFailed):
            return {"died": Verdict.IMPORT_FAILED.value, "what": str(exc), "tb": exc.detail[-MAX_TEXT:]}
        if _oom(exc):
            return {"died": Verdict.OUT_OF_MEMORY.value, "what": f"{type(exc).__name__}: {str(exc)[:500]}"}
        if isinstance(exc, SystemExit):
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            self._exit_code = code
            return {"died": Verdict.EXITED.value, "what": code}
        return None

    # ---- operations
    def _invoke(self, fn, args, kwargs, opts, received, more):
        if not opts.get("track"):
            return self._run(fn, *args, **kwargs)
        leaves = [i for i, t in enumerate(received) if t.requires_grad and t.is_leaf]
        with torch.enable_grad():
            value = self._run(fn, *args, **kwargs)
        outs = flat_tensors(value)
        diff = [bool(o.requires_grad) for o in outs]
        more["diff"] = diff
        if any(diff) and leaves:
            key = next(self._next)
            self.grad_contexts[key] = ([received[i] for i in leaves], [o for o, d in zip(outs, diff) if d], diff)
            while len(self.grad_contexts) > 32:
                self.grad_contexts.pop(next(iter(self.grad_contexts)))
            more.update(key=key, inputs=leaves)
        return value

    def _operation(self, op, body, opts, received, more):
        if op == "start":
            return self._start()
        if op == "resolve":
            return self._resolve(body)
        if op == "inside":
            return self._inside(*body)
        if op == "backward":
            key, grads = body
            inputs, outputs, diff = self.grad_contexts.pop(key)
            wanted = [g for g, d in zip(grads, diff) if d]
            pairs = [(o, g if g is not None else torch.zeros_like(o)) for o, g in zip(outputs, wanted)]
            with _Submission(self.guard):
                got = torch.autograd.grad([o for o, _ in pairs], inputs, [g for _, g in pairs], allow_unused=True)
            return list(got)
        raise ProtocolError(f"unknown operation {op!r}")

    def _start(self):
        target = self.config
        try:
            with _Submission(self.guard):
                if target.get("path"):
                    self.module = import_path(Path(target["path"]))
                else:
                    self.module = importlib.import_module(target["module"])
        except BaseException as exc:  # noqa: BLE001
            if _forbidden_in(exc) is not None or _oom(exc) or isinstance(exc, SystemExit):
                raise
            raise ImportFailed(*describe_import_failure(exc, submission_home(target))) from exc
        return None

    def _inside(self, module: str, qualname: str, args, kwargs):
        """Run the judge's ``module.qualname(impl, *args, **kwargs)`` here (``call_in_process``)."""
        if module.partition(".")[0] not in INSIDE_ROOTS:
            raise ProtocolError(f"inside: {module} is not a module of {INSIDE_ROOTS}")
        fn = importlib.import_module(module)
        for part in qualname.split("."):
            fn = getattr(fn, part)
        if self._inside_impl is None:
            self._inside_impl = _Inside(self).impl
        return fn(view_for(self._inside_impl, fn), *args, **kwargs)  # bound to fn's concept

    def _resolve(self, name: str):
        with _Submission(self.guard):
            found = resolve_in(self.module, name, self.config["name"])
        if isinstance(found, type) and shared_class(found) and not data_class(found):
            # a behaviour class re-exported from the reference (``from reference.model import
            # Transformer``) is the submission's class: built and used here, like its own classes
            self.send_by_handle(found)
        return None if found is None else (found,)


class _Inside:
    """The ``impl`` that a judge's function run in this worker receives (``call_in_process``): the
    submission's names resolved here, directly, their calls run as submission code (under the
    --forbid-reference guard). Objects they return (a context manager, a kernel registered with
    torch's dispatcher) are used as they are: code of the submission that they run later runs
    without the guard."""

    def __init__(self, peer: "WorkerPeer"):
        self.peer = peer
        self.impl = Implementation(peer.config["name"], peer.module, peer.config.get("path") or peer.config.get("module", ""),
                                   contracts=peer.config.get("contracts") or {})
        original = self.impl.resolve

        def resolve(contract_name: str):
            with _Submission(peer.guard):
                found = original(contract_name)
            if peer.guard is not None and callable(found) and not isinstance(found, type):
                return _guarded(found, peer.guard)
            return found
        self.impl.resolve = resolve


def _guarded(fn, guard: _Guard):
    def call(*args, **kwargs):
        with _Submission(guard):
            return fn(*args, **kwargs)
    call.__wrapped__ = fn
    return call


def _setup(config: dict) -> _Capped:
    """Everything a worker does before it serves: folders, output, limits, threads."""
    os.chdir(config.get("cwd") or os.getcwd())
    if config.get("sys_path"):
        sys.path[:] = config["sys_path"]
    os.environ.update(config.get("env", {}))
    devnull = os.open(os.devnull, os.O_RDWR)
    diag = open(config["diag"], "w") if config.get("diag") else None
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    if diag is not None:
        faulthandler.enable(diag, all_threads=False)
    capture = _Capped()
    sys.stdout = sys.stderr = capture
    threads = config.get("threads")
    if threads:
        torch.set_num_threads(int(threads))
    if config.get("memory_gb"):
        import resource
        limit = int(float(config["memory_gb"]) * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return capture


def _set_pdeathsig() -> None:
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001
        pass


def serve(rfd: int, wfd: int, config: dict) -> None:
    code = 0
    try:
        capture = _setup(config)
        peer = WorkerPeer(rfd, wfd, config, capture)
        peer.serve_forever()
    except EOFError:
        code = 0
    except BaseException:  # noqa: BLE001  (a broken worker: say why in the diagnostics file)
        try:
            import traceback
            with open(config.get("diag") or os.devnull, "a") as f:
                traceback.print_exc(file=f)
        finally:
            code = 70
    os._exit(code)


def zygote(fd: int) -> None:
    """A spawned zygote: import what every worker needs once, then fork a worker per request."""
    _set_pdeathsig()
    sock = socket.socket(fileno=fd)
    import numpy  # noqa: F401
    from conformance import implementation  # noqa: F401
    zygote_loop(sock)


def zygote_loop(sock: socket.socket) -> None:
    """Fork a worker per request on ``sock``; report exit codes. Never returns."""
    _set_pdeathsig()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM):
        signal.signal(sig, signal.SIG_DFL)
    sock.send(json.dumps({"ready": True}).encode())
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(sock, 1 << 16, 4)
        except OSError:
            break
        if not msg:
            break
        req = json.loads(msg)
        if req.get("op") == "fork":
            pid = os.fork()
            if pid == 0:
                try:
                    sock.close()
                    os.setsid()
                    _set_pdeathsig()
                    serve(fds[0], fds[1], req["config"])
                finally:
                    os._exit(70)
            for f in fds:
                os.close(f)
            sock.send(json.dumps({"pid": pid}).encode())
        elif req.get("op") == "wait":
            sock.send(json.dumps({"code": _wait(req["pid"], float(req.get("timeout", 10)))}).encode())
    _reap(5.0)
    os._exit(0)


def _reap(grace: float) -> None:
    """The judge is done: wait for the workers (their pipes are closed, they are exiting), so their
    CPU time is accounted to the judge's process tree; kill what is left after ``grace`` seconds."""
    end = time.monotonic() + grace
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            if time.monotonic() > end:
                return  # the rest die with this process (PR_SET_PDEATHSIG)
            time.sleep(0.01)


def _wait(pid: int, timeout: float) -> int | None:
    end = time.monotonic() + timeout
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > end:
            try:
                os.killpg(pid, 9)
            except OSError:
                pass
            _, status = os.waitpid(pid, 0)
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.005)


def _interpreter_patches() -> None:
    """A spawned zygote or worker starts with nothing the judge installed: under the Triton
    interpreter (the judge exports TRITON_INTERPRET=1 when there is no GPU) it needs the same
    interpreter fixes (conformance/triton_interpreter.py: the fixed-order dot, bf16 widening), or
    a submission's kernels would compute differently in a spawned worker than in a forked one."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        from conformance import triton_interpreter
        triton_interpreter.apply()


def main(argv: list[str]) -> None:
    _interpreter_patches()
    if argv[:1] == ["zygote"]:
        zygote(int(argv[1]))
    elif argv[:1] == ["serve"]:
        _set_pdeathsig()
        config = json.loads(Path(argv[3]).read_text())
        serve(int(argv[1]), int(argv[2]), config)
    else:
        raise SystemExit("usage: python -m conformance.worker zygote FD | serve RFD WFD CONFIG.json")


if __name__ == "__main__":
    main(sys.argv[1:])
