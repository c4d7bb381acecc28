"""A submission, isolated: its code runs in a worker process, never in the judge's.

A submission's code runs in a worker process, never in the judge's.

The judge (pytest with the spec tests, the reference, the oracles and the report) loads a
submission given as a path or a module name as a :class:`Submission`: nothing of it is imported
here. Its contract names resolve to *proxies*; the first contract call of a concept starts one
worker process for that (submission, concept) pair, which imports the submission and runs every
call of that concept. So a segfault, ``os._exit``, an out-of-memory kill or a hang costs that one
cell, and nothing the submission does to global state (default dtype, seeds, threads,
monkeypatches of ``reference``, ``conformance`` or torch) reaches the reference or the verdict.

The rooms of the boundary, each its own module: ``wire`` (framing, pickling by value or by handle,
requests and callbacks, exceptions), ``proxy`` (the stand-ins for the other side's objects),
``bridge`` (autograd across the boundary), ``processes`` (the zygote and the worker processes),
``worker`` (what runs in one), ``clock`` (the call deadline, the time budget and the call log),
``verdict`` (what a cell can come to). This module is the judge's end: a :class:`Submission` and
its :class:`WorkerConnection` per concept.

Failures of the worker become a :class:`SubmissionDied` (a ``BaseException``: Hypothesis does not
catch it, so a hang inside a ``@given`` test ends the test): ``crashed (signal 11)``,
``exited (1)``, ``out of memory``, ``timed out after 5 s``, ``import failed: SyntaxError ...``,
``forbidden: imports reference.attention``. The cell is then dead: every later call raises the
same verdict at once, nothing is restarted.
"""
from __future__ import annotations

import dataclasses
import os
import signal

import torch

from conformance import processes
from conformance.clock import CLOCK, UNLOGGED, describe_request, log_call
from conformance.proxy import Proxy
from conformance.implementation import NotImplementedInImpl
from conformance.verdict import SubmissionDied, Verdict
from conformance.wire import INSIDE_ROOTS, Peer

OUTPUT_LIMIT = 4000         # characters of a submission's printed output kept per test


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


class WorkerConnection(Peer):
    """The judge's end of one (submission, concept) worker."""

    def __init__(self, submission: "Submission", concept: str, process: "processes.WorkerProcess", rfd: int, wfd: int):
        super().__init__(rfd, wfd, "judge")
        self.submission, self.concept, self.process = submission, concept, process
        self.killed_for_timeout: float | None = None
        self.inflight = ""
        self._capture_sent = None
        self._rng_sent: torch.Tensor | None = None
        self.label = f"{submission.name}/{concept}"

    def deadline(self):
        return CLOCK.deadline

    def request(self, op, body, opts=None, extra=False):
        if self.depth != 0:  # a call made while serving the submission's callback
            return super().request(op, body, opts, extra)
        self.inflight = describe_request(op, body)
        if CLOCK.logging or (op == "builtin" and body[0] in UNLOGGED):  # the harness' own look
            CLOCK.enter(example=False)
            try:
                return super().request(op, body, opts, extra)
            finally:
                CLOCK.leave()
        # the call's deadline; a new example past the budget is rejected here (never while a
        # worker starts or a name is resolved: that must finish)
        CLOCK.enter(example=op not in ("start", "resolve"))
        try:
            out = super().request(op, body, opts, extra)
        except SubmissionDied as died:
            log_call(op, body, note=died.verdict)
            raise
        except BaseException as exc:
            log_call(op, body, exc=exc)
            raise
        finally:
            CLOCK.leave()
        log_call(op, body, value=out[0] if extra else out)
        return out

    def _send(self, msg, received=None):
        sent = super()._send(msg, received)
        if msg[0] == "req" and self._capture_sent is not None and "tensors" not in self._capture_sent:
            self._capture_sent["tensors"] = sent
        return sent

    def _meta(self) -> dict:
        meta = super()._meta()
        if self.depth == 1 and self.serving == 0:
            state = torch.random.get_rng_state()
            if self._rng_sent is None or not torch.equal(state, self._rng_sent):
                meta["rng"] = state
                self._rng_sent = state
        return meta

    def _apply_meta(self, meta: dict) -> None:
        super()._apply_meta(meta)
        if "rng" in meta:
            torch.random.set_rng_state(meta["rng"])
            self._rng_sent = meta["rng"]
        out = meta.get("out")
        if out:
            self.submission._add_output(self.concept, *out)

    def _died(self, why: str, kind: str | None = None, verdict: str | None = None) -> SubmissionDied:
        if self.dead is not None:
            return self.dead.again()
        self._close()
        code = self.process.wait(10.0)
        detail = why
        if kind is None:
            if self.killed_for_timeout is not None:
                kind, verdict = Verdict.TIMED_OUT, f"timed out after {self.killed_for_timeout:g} s"
            elif code is None:
                kind, verdict = Verdict.CRASHED, "crashed (exit status unknown)"
            elif code < 0 and -code == signal.SIGKILL:
                kind, verdict = Verdict.OUT_OF_MEMORY, "out of memory (killed by SIGKILL)"
            elif code < 0:
                kind, verdict = Verdict.CRASHED, f"crashed (signal {-code})"
                detail = f"{_signal_name(-code)}. {why}".strip()
            else:
                kind, verdict = Verdict.EXITED, f"exited ({code})"
        diag = self.process.diagnostics()
        if diag:
            detail = (detail + "\n" if detail else "") + diag
        self.dead = SubmissionDied(kind, verdict, CLOCK.test, detail.strip(), self.inflight)
        self.submission._cell_died(self.concept, self.dead)
        return self.dead

    def _timed_out(self) -> SubmissionDied:
        self.killed_for_timeout = CLOCK.timeout or 0
        self.process.kill()
        return self._died("")

    def kill(self, kind: Verdict, verdict: str, detail: str = "") -> SubmissionDied:
        if self.dead is None:
            self.process.kill()
            self._died(detail, kind=kind, verdict=verdict)
        return self.dead

    def close(self) -> None:
        """End the worker: closing its pipes makes it exit; later calls say so."""
        if self.dead is None:
            self._close()
            self.dead = SubmissionDied(Verdict.EXITED, "closed by the judge")

    def _close(self) -> None:
        for fd in (self.rfd, self.wfd):
            try:
                os.close(fd)
            except OSError:
                pass
        self.rfd = self.wfd = -1

    def _decode_exc(self, payload: dict) -> BaseException:
        if "notimpl" in payload:
            return NotImplementedInImpl(self.submission.name, payload["notimpl"], stubbed=True)
        if "died" not in payload:
            return super()._decode_exc(payload)
        kind, what = Verdict(payload["died"]), payload["what"]
        words = {  # the cell's verdict, and the detail the report prints under it
            Verdict.FORBIDDEN: (f"forbidden: imports {what}", "checked with --forbid-reference: the submission may "
                                "not use reference/ or optimized/ (only the data types the concepts declare as "
                                "vocabulary)"),
            Verdict.IMPORT_FAILED: (f"import failed: {what}", payload.get("tb", "")),
            Verdict.OUT_OF_MEMORY: ("out of memory", what),
            Verdict.EXITED: (f"exited ({what})", "the submission raised SystemExit"),
        }
        return self.kill(kind, *words[kind])


@dataclasses.dataclass
class Options:
    """How submissions run: ``memory_gb`` caps each worker's address space (RLIMIT_AS);
    ``forbid_reference`` forbids importing reference/optimized except ``allowed``: module name ->
    the names a submission may import from it (the concepts' vocabulary); ``contracts``: concept ->
    its qualified contract names (for the functions the judge runs in a worker). The loader fills
    both in from the registry; this layer only carries them to the worker, which imports none."""
    memory_gb: float | None = None
    forbid_reference: bool = False
    allowed: dict[str, list[str]] | None = None
    contracts: dict[str, tuple[str, ...]] | None = None  # concept -> qualified names, for call_in_process


class Submission:
    """A submission checked in worker processes: one per concept, started on first use."""

    def __init__(self, name: str, spec: str, target: dict, options: Options, import_error: str | None = None):
        self.name, self.spec, self.target, self.options = name, spec, target, options
        self.connections: dict[str, WorkerConnection] = {}
        self.dead: dict[str, SubmissionDied] = {}
        self.import_failure: SubmissionDied | None = None
        if import_error:
            self.import_failure = SubmissionDied(Verdict.IMPORT_FAILED, f"import failed: {import_error}")
        self.output: dict[str, list] = {}

    # ---- cells
    def verdict(self, concept: str) -> SubmissionDied | None:
        return self.dead.get(concept)

    def _cell_died(self, concept: str, died: SubmissionDied) -> None:
        self.dead.setdefault(concept, died)
        if died.kind is Verdict.IMPORT_FAILED:
            self.import_failure = self.import_failure or died

    def _add_output(self, concept: str, text: str, dropped: int) -> None:
        buf = self.output.setdefault(concept, ["", 0])
        room = OUTPUT_LIMIT - len(buf[0])
        buf[0] += text[:max(room, 0)]
        buf[1] += dropped + max(len(text) - max(room, 0), 0)

    def take_output(self, concept: str) -> tuple[str, int]:
        text, dropped = self.output.pop(concept, ["", 0])
        return text, dropped

    # ---- workers
    def connection(self, concept: str) -> WorkerConnection:
        died = self.dead.get(concept)
        if died is not None:
            raise died.again()
        if self.import_failure is not None:
            died = SubmissionDied(self.import_failure.kind, self.import_failure.verdict, CLOCK.test,
                                  self.import_failure.detail)
            self.dead[concept] = died
            raise died.again()
        conn = self.connections.get(concept)
        if conn is not None:
            return conn
        config = dict(self.target, name=self.name, concept=concept, contracts=dict(self.options.contracts or {}),
                      memory_gb=self.options.memory_gb, forbid=self.options.forbid_reference,
                      allowed=dict(self.options.allowed or {}) if self.options.forbid_reference else {})
        process, rfd, wfd = processes.pool().start(config)
        conn = WorkerConnection(self, concept, process, rfd, wfd)
        self.connections[concept] = conn
        processes.pool().connections.append(conn)
        conn.request("start", None)
        return conn

    def resolve(self, contract_name: str, concept: str):
        conn = self.connection(concept)
        found = conn.request("resolve", contract_name)
        if found is None:
            return None
        obj = found[0]
        if isinstance(obj, Proxy):
            object.__setattr__(obj, "_rp_label", contract_name)
        return obj

    def call_in_process(self, concept: str, fn, args: tuple, kwargs: dict):
        """``fn(impl, *args, **kwargs)`` run in the concept's worker, ``impl`` there resolving the
        submission's names directly (see :meth:`conformance.implementation.Implementation.call_in_process`).
        ``fn`` travels by name: a module-level function of spec_tests/ or conformance/."""
        module, qualname = getattr(fn, "__module__", ""), getattr(fn, "__qualname__", "")
        if module.partition(".")[0] not in INSIDE_ROOTS or "<" in qualname:
            raise ValueError(f"call_in_process: {module}.{qualname} is not a module-level function of "
                             f"{' or '.join(INSIDE_ROOTS)} (it is sent to the worker by name)")
        return self.connection(concept).request("inside", (module, qualname, tuple(args), dict(kwargs)))

    def close(self) -> None:
        """End the workers: closing their pipes makes each exit."""
        for conn in self.connections.values():
            conn.close()

    def __repr__(self) -> str:
        return f"Submission({self.spec!r})"
