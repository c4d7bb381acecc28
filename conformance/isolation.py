"""Isolation: a submission's code runs in a worker process, never in the judge's.

The judge (pytest with the spec tests, the reference, the oracles and the report) loads a
submission given as a path or a module name as a :class:`Submission`: nothing of it is imported
here. Its contract names resolve to *proxies*; the first contract call of a concept starts one
worker process for that (submission, concept) pair, which imports the submission and runs every
call of that concept. So a segfault, ``os._exit``, an out-of-memory kill or a hang costs that one
cell, and nothing the submission does to global state (default dtype, seeds, threads,
monkeypatches of ``reference``, ``conformance`` or torch) reaches the reference or the verdict.

The wire (both directions, symmetric, re-entrant): a message is a pickle (protocol 5) framed by
its length. Plain data travels by value: numbers, strings, bytes, None, containers of them,
tensors (storage bytes, shape, strides, dtype, device, requires_grad; views of one storage stay
views of one storage), numpy arrays, torch dtypes/devices/sizes, paths, and dataclasses /
namedtuples / enums of modules both sides share (``reference``, ``spec_tests``, ``torch`` ...).
Everything else travels as a *handle*: the receiver gets a proxy whose method calls, attribute
reads and writes, ``__call__``, ``len``/``iter``/``[]``/``==``... are forwarded to the owner. That
is how a submission's classes (a ``StopChecker``, a ``KVCache``, an ``nn.Module``) work from the
judge, and how judge-side callables (a ``sample_fn``, the reference model given to ``generate``,
an ``attention=`` callable) work from the worker: the worker calls back into the judge, which may
call into the worker again.

Call semantics kept across the boundary:
- a tensor argument the callee modifies in place is written back into the caller's tensor (its
  ``_version`` changed), and a tensor returned unchanged is the caller's own object;
- a ``torch.Generator`` argument is mirrored: its state is synchronised at every message, so a
  seeded draw advances the caller's generator, and a generator handed back is the caller's own;
- the global torch RNG of the worker is synchronised with the judge's around each call (so a
  test can still observe that an implementation drew from the global RNG);
- the grad mode travels with each call, and a call whose tensor arguments require grad is an
  autograd node in the judge: ``backward`` runs the worker's graph (gradients w.r.t. those
  arguments);
- an exception is re-raised with its type (a submission's own exception class becomes a
  subclass of its nearest shared base, e.g. ``ValueError``) and the worker's traceback as a note.

The judge unpickles only what its find_class allows (shared modules' classes, a few builtins),
never a submission module, and serves callbacks without private (``_``) attribute access. This is
a process boundary for accidents and casual tampering, not a security sandbox.

Failures of the worker become a :class:`SubmissionDied` (a ``BaseException``: Hypothesis does not
catch it, so a hang inside a ``@given`` test ends the test): ``crashed (signal 11)``,
``exited (1)``, ``out of memory``, ``timed out after 5 s``, ``import failed: SyntaxError ...``,
``forbidden: imports reference.attention``. The cell is then dead: every later call raises the
same verdict at once, nothing is restarted.

Workers are forked from a *zygote* (a process that imported torch once), so a worker starts in
milliseconds; without ``os.fork``/``socket.send_fds`` they are spawned with
``python -m conformance.worker``.
"""
from __future__ import annotations

import dataclasses
import enum
import io
import itertools
import json
import operator
import os
import pickle
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import types
import weakref
from pathlib import PurePath
from typing import Any

import torch

try:
    import numpy as np
except ImportError:  # pragma: no cover
    np = None

# Top-level packages whose classes both processes share (the judge unpickles nothing else).
SHARED_ROOTS = frozenset({"builtins", "torch", "numpy", "collections", "pathlib", "reference",
                          "optimized", "spec_tests", "conformance", "fractions", "decimal",
                          "datetime", "enum"})
# What --forbid-reference guards (the submission may not use them).
GUARDED_ROOTS = ("reference", "optimized", "spec_tests")
# Where the functions the judge runs in a worker (Submission.call_in_process) may come from.
INSIDE_ROOTS = ("spec_tests", "conformance")

_SAFE_BUILTINS = frozenset({"set", "frozenset", "slice", "range", "complex", "bytearray", "bytes",
                            "int", "float", "str", "list", "tuple", "dict", "bool", "object",
                            "Ellipsis", "NotImplemented", "True", "False", "None"})
_ATOMIC = frozenset({int, float, bool, str, bytes, type(None), complex, bytearray})
_CONTAINERS = frozenset({list, tuple, dict, set, frozenset})
_VALUE_TYPES: tuple = (torch.dtype, torch.device, torch.Size, torch.layout, torch.memory_format,
                       PurePath, slice, range, type(Ellipsis), type(NotImplemented))
_MAX_TEXT = 8000            # characters of an exception message / traceback carried over
OUTPUT_LIMIT = 4000         # characters of a submission's printed output kept per test
ZYGOTE_START_LIMIT = 300.0  # seconds for the zygote to import torch (not counted against a test)


# ------------------------------------------------------------------------------- errors
class SubmissionDied(BaseException):
    """The (submission, concept) cell's worker is gone: crashed, exited, out of memory, timed out,
    failed to import, or tried a forbidden import. Derives from ``BaseException`` so that
    Hypothesis (which catches ``Exception``) does not retry, shrink or replay it: the test ends."""

    def __init__(self, kind: str, verdict: str, test: str = "", detail: str = "", call: str = ""):
        self.kind, self.verdict, self.test, self.detail, self.call = kind, verdict, test, detail, call
        super().__init__(self._text())

    def _text(self) -> str:
        where = f" in {self.test.split('::')[-1]}" if self.test else ""
        call = f"\n  during {self.call}" if self.call else ""
        detail = f"\n{self.detail.rstrip()}" if self.detail.strip() else ""
        return f"{self.verdict}{where}{call}{detail}"

    def again(self) -> "SubmissionDied":
        """The same verdict, raised by a later call of the dead cell."""
        return SubmissionDied(self.kind, self.verdict, self.test, self.detail, self.call)


class ForbiddenReference(ImportError):
    """Raised in the worker when a submission checked with --forbid-reference uses the bundled
    implementations (or the tests)."""

    def __init__(self, what: str):
        self.what = what
        super().__init__(f"forbidden: imports {what} (--forbid-reference)")


class ProtocolError(Exception):
    pass


class _JudgeBaseException(BaseException):
    """In the worker: a judge-side BaseException (a pytest outcome, Hypothesis' StopTest) raised by
    a callback; the judge re-raises its own original object when it comes back."""


# ------------------------------------------------------------------------------- the test clock
MAX_LOGGED_CALLS = 60  # calls kept per example (the first few and the last ones)


def _build_context():
    """Hypothesis' context of the example running now (one object per example), or None outside
    an example. ``is_final`` marks the replay of the failing example that Hypothesis reports."""
    try:
        from hypothesis import currently_in_test_context
        from hypothesis.control import current_build_context
        return current_build_context() if currently_in_test_context() else None
    except Exception:  # noqa: BLE001  (an older or newer Hypothesis without these)
        return None


class _Clock:
    """The current test (set by the plugin around each test): its name; the deadline of each call
    into a submission (``--call-timeout``); the test's budget of examples (``--budget``); and the
    calls made into the submission in the current example, written as a session one can replay.

    The budget never fails a test. Once it is spent, the first call of each new Hypothesis example
    rejects that example (``hypothesis.reject()``), so generation ends and shrinking stops, quickly;
    the replay of the failing example that Hypothesis reports (``is_final``) always runs."""

    def __init__(self):
        self.end()

    def begin(self, test: str, call_timeout: float | None, budget: float | None = None) -> None:
        self.end()
        self.test, self.timeout = test, call_timeout
        self.budget = budget
        self.budget_end = time.monotonic() + budget if budget else None

    def end(self) -> None:
        self.test, self.timeout, self.budget = "", None, None
        self.deadline: float | None = None
        self.budget_end: float | None = None
        self.example = None     # the Hypothesis context of the current example
        self.examples = 0       # examples that called the submission
        self.calls: list[str] = []
        self.dropped = 0
        self.failures = 0       # examples that failed (as far as the wrappers saw)
        self.best: tuple[list[str], int, str] | None = None  # calls, dropped, error of the smallest
        self.names: dict[int, tuple[str, object]] = {}
        self.counts: dict[str, int] = {}
        self.logging = False

    def extend(self, seconds: float) -> None:
        """Time the harness spent (starting a worker) is not the submission's."""
        if self.deadline is not None:
            self.deadline += seconds
        if self.budget_end is not None:
            self.budget_end += seconds

    # ---- one call
    def enter(self, example: bool = True) -> None:
        """A top-level call into the submission starts: its deadline is set; with ``example``, the
        first call of a new example starts that example's log and is rejected if the budget is
        spent."""
        ctx = _build_context() if example else self.example
        if ctx is not self.example:
            self.example = ctx
            self.calls, self.dropped, self.names, self.counts = [], 0, {}, {}
            if ctx is not None:
                self.examples += 1
                if (self.budget_end is not None and time.monotonic() > self.budget_end
                        and self.examples > 1 and not getattr(ctx, "is_final", True)):  # one example at least
                    raise BudgetSpent(self)
        self.deadline = time.monotonic() + self.timeout if self.timeout else None

    def example_failed(self, exc: BaseException) -> None:
        """The current example failed with ``exc`` (reported by the spec's wrappers: see
        conformance/stateful.py); the smallest failing example so far is kept."""
        self.failures += 1
        text = f"{type(exc).__name__}: {str(exc).strip()}"
        if self.best is None or len(self.calls) <= len(self.best[0]):
            self.best = (list(self.calls), self.dropped, text)

    def leave(self) -> None:
        self.deadline = None

    def log(self, line: str) -> None:
        if len(self.calls) >= MAX_LOGGED_CALLS:
            del self.calls[5]
            self.dropped += 1
        self.calls.append(line)

    def name(self, proxy) -> str | None:
        """The session name of a submission's object made in this example (``radix_cache_1``)."""
        got = self.names.get(id(proxy))
        return got[0] if got is not None and got[1] is proxy else None

    def new_name(self, proxy) -> str:
        cls = type(proxy).__qualname__
        snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in cls).lstrip("_") or "obj"
        self.counts[snake] = self.counts.get(snake, 0) + 1
        name = f"{snake}_{self.counts[snake]}"
        self.names[id(proxy)] = (name, proxy)
        return name

    def session(self, calls: list[str] | None = None, dropped: int | None = None) -> str:
        """The current example's calls (or the given ones), one per line: a Python session one
        can paste."""
        lines = list(self.calls if calls is None else calls)
        dropped = self.dropped if dropped is None else dropped
        if dropped:
            lines.insert(5, f"# ... {dropped} calls not shown ...")
        return "\n".join(lines)


class BudgetSpent(BaseException):
    """Raised at the first call of a new example once the test's time budget is spent: it ends the
    test (a ``BaseException``: Hypothesis neither catches, retries nor shrinks it). The plugin
    turns it into a pass when no example had failed, else into the failure of the smallest failing
    example seen (its calls and error), Hypothesis having been stopped while shrinking."""

    def __init__(self, clock: "_Clock"):
        self.budget, self.examples, self.failures = clock.budget, clock.examples - 1, clock.failures
        self.best = clock.best
        self.error = clock.best[2] if clock.best else ""
        self.calls = clock.session(clock.best[0], clock.best[1]) if clock.best else ""
        if self.failures:
            text = (f"the time budget ({self.budget:g} s) ran out while Hypothesis was shrinking a failing "
                    f"example; the smallest found failed with {self.error}")
        else:
            text = f"the time budget ({self.budget:g} s) ran out after {self.examples} examples, all passed"
        super().__init__(text)


CLOCK = _Clock()


# ------------------------------------------------------------------------------- helpers
def _shared(cls) -> bool:
    return getattr(cls, "__module__", "").partition(".")[0] in SHARED_ROOTS


def _is_data(obj) -> bool:
    """A value of a shared class that is plain data (copied, not referenced)."""
    if dataclasses.is_dataclass(obj) or isinstance(obj, enum.Enum):
        return True
    return isinstance(obj, (tuple, list, dict, set, frozenset))


def data_class(cls) -> bool:
    """A class whose instances are plain data (dataclasses, named tuples, enums): they cross the
    boundary by value, so the class itself may too."""
    return isinstance(cls, type) and (dataclasses.is_dataclass(cls) or issubclass(cls, (tuple, enum.Enum)))


def describe(value: Any, limit: int = 80) -> str:
    if isinstance(value, torch.Tensor):
        return f"tensor{tuple(value.shape)} {str(value.dtype).removeprefix('torch.')} on {value.device.type}"
    if isinstance(value, Proxy):
        return CLOCK.name(value) or f"<{type(value).__qualname__}>"
    if isinstance(value, torch.nn.Module) or callable(value) and not isinstance(value, type):
        return f"<{type(value).__name__}>" if not hasattr(value, "__qualname__") else f"<{value.__qualname__}>"
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def describe_call(label: str, args=(), kwargs=None) -> str:
    parts = [describe(a) for a in args] + [f"{k}={describe(v)}" for k, v in (kwargs or {}).items()]
    text = f"{label}({', '.join(parts)})"
    return text if len(text) <= 400 else text[:397] + "..."


def _dtype_name(dt: torch.dtype) -> str:
    return str(dt).removeprefix("torch.")


def _storage(buf, device: str):
    """Rebuild an untyped storage from its bytes (called by the unpickler)."""
    base = torch.frombuffer(buf, dtype=torch.uint8) if len(buf) else torch.empty(0, dtype=torch.uint8)
    if device != "cpu":
        base = base.to(device)
    return base.untyped_storage()


class _Blob:
    """One storage's bytes, pickled once per message however many tensors view it."""

    def __init__(self, storage):
        self.storage = storage

    def __reduce__(self):
        st = self.storage
        device = str(st.device)
        if st.device.type != "cpu":
            st = st.cpu()
        raw = torch.empty(0, dtype=torch.uint8).set_(st)
        data = pickle.PickleBuffer(raw.numpy()) if raw.numel() else bytearray()
        return (_storage, (data, device))


_ALLOWED_FUNCTIONS = {("conformance.isolation", "_storage"): _storage}


def _span(t: torch.Tensor) -> int:
    if t.numel() == 0:
        return 0
    last = sum((s - 1) * st for s, st in zip(t.shape, t.stride()))
    return (last + 1) * t.element_size()


# ------------------------------------------------------------------------------- proxies
class Proxy:
    """A reference to an object owned by the other process (see the module docstring)."""

    _rp_methods: frozenset = frozenset()

    def __getattribute__(self, name: str):
        if name.startswith("_rp_") or name in _LOCAL_NAMES:
            return object.__getattribute__(self, name)
        if name in type(self)._rp_methods:
            return _BoundRemote(self, name)
        peer = object.__getattribute__(self, "_rp_peer")
        try:
            return peer.request("getattr", (self, name))
        except AttributeError as exc:
            _LAST_ATTRIBUTE_ERROR.exc = exc  # Python calls __getattr__ next, which raises it
            raise

    def __getattr__(self, name: str):  # stops nn.Module.__getattr__ from being consulted
        exc = getattr(_LAST_ATTRIBUTE_ERROR, "exc", None)
        _LAST_ATTRIBUTE_ERROR.exc = None
        if exc is not None:
            raise exc
        raise AttributeError(name)

    def __setattr__(self, name: str, value) -> None:
        if name.startswith("_rp_"):
            object.__setattr__(self, name, value)
        else:
            object.__getattribute__(self, "_rp_peer").request("setattr", (self, name, value))

    def __delattr__(self, name: str) -> None:
        object.__getattribute__(self, "_rp_peer").request("delattr", (self, name))

    def __repr__(self) -> str:
        return _builtin(self, "repr")

    def __str__(self) -> str:
        return _builtin(self, "str")

    def __eq__(self, other):
        return _builtin(self, "eq", other)

    def __ne__(self, other):
        return _builtin(self, "ne", other)

    def __hash__(self):
        return _builtin(self, "hash")

    def __bool__(self):
        return _builtin(self, "bool")

    def __del__(self):
        try:
            peer = object.__getattribute__(self, "_rp_peer")
            peer._release(object.__getattribute__(self, "_rp_handle"))
        except Exception:  # noqa: BLE001  (interpreter shutdown)
            pass


_LAST_ATTRIBUTE_ERROR = threading.local()
_LOCAL_NAMES = frozenset({"__class__", "__dict__", "__weakref__", "__reduce_ex__", "__reduce__",
                          "__getstate__", "__setstate__", "__init_subclass__", "__subclasshook__"})


class ProxyModule(Proxy, torch.nn.Module):
    """A proxy of an ``nn.Module``: ``isinstance(x, nn.Module)`` holds, everything is forwarded."""


def _builtin(proxy: Proxy, fname: str, *args):
    peer = object.__getattribute__(proxy, "_rp_peer")
    return peer.request("builtin", (fname, proxy, args))


class _BoundRemote:
    """``proxy.method`` before it is called: one round trip for the call."""

    __slots__ = ("proxy", "name")

    def __init__(self, proxy, name):
        self.proxy, self.name = proxy, name

    def __call__(self, *args, **kwargs):
        peer = object.__getattribute__(self.proxy, "_rp_peer")
        return peer.call(self.proxy, self.name, args, kwargs)

    def __repr__(self) -> str:
        return f"<remote method {self.name} of {type(self.proxy).__qualname__}>"


def _call_dunder(self, *args, **kwargs):
    return object.__getattribute__(self, "_rp_peer").call(self, None, args, kwargs)


_DUNDERS = {
    "__call__": _call_dunder,
    "__len__": lambda self: _builtin(self, "len"),
    "__iter__": lambda self: _builtin(self, "iter"),
    "__next__": lambda self: _builtin(self, "next"),
    "__getitem__": lambda self, key: _builtin(self, "getitem", key),
    "__setitem__": lambda self, key, value: _builtin(self, "setitem", key, value),
    "__delitem__": lambda self, key: _builtin(self, "delitem", key),
    "__contains__": lambda self, item: _builtin(self, "contains", item),
    "__lt__": lambda self, other: _builtin(self, "lt", other),
    "__le__": lambda self, other: _builtin(self, "le", other),
    "__gt__": lambda self, other: _builtin(self, "gt", other),
    "__ge__": lambda self, other: _builtin(self, "ge", other),
    "__enter__": lambda self: _builtin(self, "enter"),
    "__exit__": lambda self, *exc: _builtin(self, "exit", *exc),
    "__float__": lambda self: _builtin(self, "float"),
    "__int__": lambda self: _builtin(self, "int"),
    "__index__": lambda self: _builtin(self, "index"),
}

_BUILTINS = {
    "repr": repr, "str": str, "eq": operator.eq, "ne": operator.ne, "hash": hash, "bool": bool,
    "len": len, "iter": iter, "next": next, "getitem": operator.getitem, "setitem": operator.setitem,
    "delitem": operator.delitem, "contains": operator.contains, "lt": operator.lt, "le": operator.le,
    "gt": operator.gt, "ge": operator.ge, "enter": lambda o: o.__enter__(),
    "exit": lambda o, *a: o.__exit__(*a), "float": float, "int": int, "index": operator.index,
}


def _class_info(cls) -> dict:
    methods = set()
    for klass in cls.__mro__:
        if klass is object:
            continue
        for name, value in vars(klass).items():
            if name in methods or (name.startswith("__") and name.endswith("__")):
                continue
            if isinstance(value, (types.FunctionType, staticmethod, classmethod,
                                  types.BuiltinFunctionType, types.MethodDescriptorType,
                                  types.WrapperDescriptorType)):
                methods.add(name)
    if isinstance(cls, type) and issubclass(cls, type):  # a class object: attributes are data
        methods = set()
    return dict(name=cls.__name__, qualname=cls.__qualname__, module=cls.__module__,
                module_like=isinstance(cls, type) and issubclass(cls, torch.nn.Module),
                methods=sorted(methods),
                dunders=sorted(d for d in _DUNDERS if any(d in vars(k) for k in cls.__mro__ if k is not object)))


def _proxy_class(info: dict):
    base = ProxyModule if info["module_like"] else Proxy
    ns = {d: _DUNDERS[d] for d in info["dunders"]}
    ns.update(_rp_methods=frozenset(info["methods"]), __module__=f"<{info['module']}>",
              __qualname__=info["qualname"])
    return type(info["name"], (base,), ns)


# ------------------------------------------------------------------------------- pickling
class _Encoder(pickle.Pickler):
    def __init__(self, peer: "Peer", file, received: dict | None = None):
        super().__init__(file, protocol=5)
        self.peer = peer
        self.tensors: list[torch.Tensor] = []
        self.blobs: dict = {}
        self.received = received or {}

    def persistent_id(self, obj):
        t = type(obj)
        if t in _ATOMIC or t in _CONTAINERS or t is _Blob or t is pickle.PickleBuffer or obj is _storage:
            return None
        return self.peer._encode(self, obj)


class _Decoder(pickle.Unpickler):
    def __init__(self, peer: "Peer", file):
        super().__init__(file)
        self.peer = peer
        self.tensors: list[torch.Tensor] = []

    def persistent_load(self, pid):
        return self.peer._decode(self, pid)

    def find_class(self, module: str, name: str):
        return self.peer._find_class(module, name)


def _judge_find_class(module: str, name: str):
    """What the judge accepts from a worker's pickle: classes of shared packages (never a
    submission's module), a few builtins, torch dtypes, and the tensor storage rebuild."""
    if (module, name) in _ALLOWED_FUNCTIONS:
        return _ALLOWED_FUNCTIONS[(module, name)]
    root = module.partition(".")[0]
    if root not in SHARED_ROOTS:
        raise pickle.UnpicklingError(f"refused to load {module}.{name} (not a shared module)")
    __import__(module)
    obj = sys.modules[module]
    for part in name.split("."):
        obj = getattr(obj, part)
    if root == "builtins":
        if name in _SAFE_BUILTINS or (isinstance(obj, type) and issubclass(obj, BaseException)):
            return obj
    elif isinstance(obj, type) or isinstance(obj, (torch.dtype, torch.layout, torch.memory_format)):
        return obj
    raise pickle.UnpicklingError(f"refused to load {module}.{name} (only classes of shared modules)")


def _plain_args(args) -> tuple:
    out = []
    for a in args:
        if type(a) in _ATOMIC:
            out.append(a)
        else:
            out.append(describe(a, 200))
    return tuple(out)


# ------------------------------------------------------------------------------- the peer
class Peer:
    """One end of the wire. ``side`` is "judge" or "worker"; ``handler`` serves side-specific
    operations (the worker's start/resolve/backward)."""

    def __init__(self, rfd: int, wfd: int, side: str, handler=None):
        self.rfd, self.wfd, self.side = rfd, wfd, side
        self._rbuf = bytearray()
        if side == "judge":
            os.set_blocking(wfd, False)
        self.handler = handler
        self.objects: dict[int, Any] = {}       # my handle -> my object
        self.handle_of: dict[int, int] = {}     # id(my object) -> my handle
        self.sent_count: dict[int, int] = {}    # my handle -> times sent (released by counts)
        self.got_count: dict[int, int] = {}     # peer handle -> times received
        self.proxies: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self.classes_sent: set[int] = set()
        self._class_keep: dict[int, type] = {}
        self.proxy_classes: dict[int, type] = {}
        self.released: list[tuple[int, int]] = []
        self._next = itertools.count(1)
        self.depth = 0
        self.serving = 0
        # generators crossing during the current exchange
        self.own_gens: dict[int, torch.Generator] = {}
        self.own_gen_key: dict[int, int] = {}
        self.mirrors: dict[int, torch.Generator] = {}
        self.mirror_key: dict[int, int] = {}
        self.tokens: dict[int, BaseException] = {}
        self.sent_stack: list[list[torch.Tensor]] = []
        self.grad_contexts: dict[int, tuple] = {}
        self.dead: SubmissionDied | None = None
        self.label = ""
        self.by_handle: dict[int, Any] = {}     # id -> object always sent as a handle (see send_by_handle)

    # ---- framing
    def _write(self, data: bytes) -> None:
        view = memoryview(struct.pack(">Q", len(data)) + data) if len(data) < 1 << 16 else None
        chunks = [view] if view is not None else [memoryview(struct.pack(">Q", len(data))), memoryview(data)]
        for chunk in chunks:
            while len(chunk):
                try:
                    n = os.write(self.wfd, chunk)  # the judge's end is non-blocking
                except BlockingIOError:
                    self._wait(self.wfd, write=True)
                    continue
                except OSError as exc:
                    if self.side == "judge":
                        raise self._died(f"{type(exc).__name__} writing to the worker") from None
                    raise
                chunk = chunk[n:]

    def _read_exact(self, n: int) -> bytes:
        buf = self._rbuf
        while len(buf) < n:
            if self.side == "judge":
                self._wait(self.rfd)
            try:
                chunk = os.read(self.rfd, max(n - len(buf), 1 << 16))
            except OSError:
                chunk = b""
            if not chunk:
                if self.side == "judge":
                    raise self._died("")
                raise EOFError("the judge closed the connection")
            buf += chunk
        out = bytes(buf[:n])
        del buf[:n]
        return out

    def _wait(self, fd: int, write: bool = False) -> None:
        """Block until ``fd`` is ready or the test's deadline passes (judge side only)."""
        while True:
            deadline = self.deadline()
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise self._timed_out()
            r, w, _ = select.select([] if write else [fd], [fd] if write else [], [],
                                    None if remaining is None else min(remaining, 3600))
            if r or w:
                return

    def deadline(self) -> float | None:  # overridden by the judge's worker connection
        return None

    def _died(self, why: str) -> SubmissionDied:  # overridden by the judge's worker connection
        return SubmissionDied("crashed", "crashed", detail=why)

    def _timed_out(self) -> SubmissionDied:  # overridden
        return SubmissionDied("timed out", "timed out")

    # ---- messages
    def _send(self, msg, received: dict | None = None) -> list[torch.Tensor]:
        buf = io.BytesIO()
        enc = _Encoder(self, buf, received)
        with self._codec():
            enc.dump((msg, self._meta()))
        self._write(buf.getvalue())
        return enc.tensors

    def _recv(self):
        (n,) = struct.unpack(">Q", self._read_exact(8))
        data = self._read_exact(n)
        dec = _Decoder(self, io.BytesIO(data))
        try:
            with self._codec():
                msg, meta = dec.load()
        except SubmissionDied:
            raise
        except Exception as exc:  # noqa: BLE001
            raise self._protocol_error(exc) from None
        self._apply_meta(meta)
        return msg, dec.tensors

    def _protocol_error(self, exc: BaseException):
        if self.side == "judge":
            return self.kill("crashed", "crashed (protocol error)",
                             f"the worker sent what the judge refuses to read: {type(exc).__name__}: {exc}")
        return ProtocolError(f"{type(exc).__name__}: {exc}")

    def _codec(self):
        return _NULL_CONTEXT

    def _meta(self) -> dict:
        meta = {}
        if self.released:
            meta["rel"], self.released = self.released, []
        gens = [("s", k, g.get_state()) for k, g in self.own_gens.items()]
        gens += [("r", k, g.get_state()) for k, g in self.mirrors.items()]
        if gens:
            meta["gens"] = gens
        return meta

    def _apply_meta(self, meta: dict) -> None:
        for handle, count in meta.get("rel", ()):
            left = self.sent_count.get(handle, 0) - count
            if left > 0:
                self.sent_count[handle] = left
            else:
                self.sent_count.pop(handle, None)
                obj = self.objects.pop(handle, None)
                if obj is not None:
                    self.handle_of.pop(id(obj), None)
        for owner, key, state in meta.get("gens", ()):
            g = self.mirrors.get(key) if owner == "s" else self.own_gens.get(key)
            if g is not None:
                g.set_state(state)

    # ---- encoding of non-plain objects
    def _encode(self, enc: _Encoder, obj):
        if isinstance(obj, Proxy):
            if object.__getattribute__(obj, "_rp_peer") is self:
                return ("R", object.__getattribute__(obj, "_rp_handle"))
            return self._handle(obj)
        if isinstance(obj, torch.Tensor):
            return self._encode_tensor(enc, obj)
        if isinstance(obj, torch.Generator):
            return self._encode_generator(obj)
        if np is not None:
            if isinstance(obj, np.ndarray) and obj.dtype != object:
                return ("N", obj.dtype.str, obj.shape, pickle.PickleBuffer(np.ascontiguousarray(obj)))
            if isinstance(obj, np.generic) and not isinstance(obj, np.object_):
                return ("NS", obj.dtype.str, obj.tobytes())
            if isinstance(obj, np.dtype) and obj != object:
                return ("ND", obj.str)
        if isinstance(obj, _VALUE_TYPES):
            return None
        if id(obj) in self.by_handle:
            return self._handle(obj)
        if isinstance(obj, type):
            return None if _shared(obj) and self._importable(obj) else self._handle(obj)
        if isinstance(obj, types.ModuleType):
            if self.side == "judge":
                raise TypeError(f"the judge does not hand modules to a submission ({obj.__name__})")
            return self._handle(obj)
        if _shared(type(obj)) and _is_data(obj):
            return None
        return self._handle(obj)

    def send_by_handle(self, obj) -> None:
        """Always send ``obj`` as a handle, even a class of a shared module (which otherwise travels
        by name): the worker does this for a contract class that the submission took from the
        reference, so that its objects are built, and live, in the submission's process."""
        self.by_handle[id(obj)] = obj

    @staticmethod
    def _importable(cls) -> bool:
        mod = sys.modules.get(cls.__module__)
        obj = mod
        for part in cls.__qualname__.split("."):
            obj = getattr(obj, part, None)
        return obj is cls

    def _handle(self, obj):
        h = self.handle_of.get(id(obj))
        if h is None or self.objects.get(h) is not obj:
            h = next(self._next)
            self.objects[h], self.handle_of[id(obj)] = obj, h
        self.sent_count[h] = self.sent_count.get(h, 0) + 1
        cls = type(obj)
        ckey = id(cls)
        info = None
        if ckey not in self.classes_sent:
            self.classes_sent.add(ckey)
            self._class_keep[ckey] = cls
            info = _class_info(cls)
        return ("H", h, ckey, info)

    def _encode_tensor(self, enc: _Encoder, t: torch.Tensor):
        idx = enc.received.get(id(t))
        if idx is not None:
            return ("TR", idx)
        enc.tensors.append(t)
        rg = bool(t.requires_grad)
        param = isinstance(t, torch.nn.Parameter)
        if t.device.type == "meta":
            return ("TM", tuple(t.shape), tuple(t.stride()), _dtype_name(t.dtype), rg)
        if t.layout != torch.strided or t.is_quantized or getattr(t, "is_nested", False):
            buf = io.BytesIO()
            torch.save(t.detach(), buf)
            return ("TS", buf.getvalue(), rg)
        t = t.detach()
        if t.is_conj():
            t = t.resolve_conj()
        if t.is_neg():
            t = t.resolve_neg()
        st = t.untyped_storage()
        if st.nbytes() > max(2 * _span(t), 1 << 16):   # a small view of a big storage: compact
            t = t.clone(memory_format=torch.contiguous_format)
            st = t.untyped_storage()
        key = (st.data_ptr(), st.nbytes(), str(st.device))
        blob = enc.blobs.get(key)
        if blob is None:
            blob = enc.blobs[key] = _Blob(st)
        return ("T", blob, t.storage_offset(), tuple(t.shape), tuple(t.stride()), _dtype_name(t.dtype),
                str(t.device), rg, param)

    def _encode_generator(self, g: torch.Generator):
        key = self.mirror_key.get(id(g))
        if key is not None and self.mirrors.get(key) is g:
            return ("G", "R", key, g.get_state(), None)
        key = self.own_gen_key.get(id(g))
        if key is None or self.own_gens.get(key) is not g:
            key = next(self._next)
            self.own_gens[key], self.own_gen_key[id(g)] = g, key
        return ("G", "H", key, g.get_state(), str(g.device))

    # ---- decoding
    def _find_class(self, module: str, name: str):
        if self.side == "judge":
            return _judge_find_class(module, name)
        return pickle.Unpickler.find_class(_PLAIN_UNPICKLER, module, name)

    def _decode(self, dec: _Decoder, pid):
        tag = pid[0]
        if tag == "R":
            try:
                return self.objects[pid[1]]
            except KeyError:
                raise ProtocolError(f"unknown handle {pid[1]}") from None
        if tag == "H":
            _, h, ckey, info = pid
            if info is not None:
                self.proxy_classes[ckey] = _proxy_class(info)
            self.got_count[h] = self.got_count.get(h, 0) + 1
            proxy = self.proxies.get(h)
            if proxy is None:
                cls = self.proxy_classes[ckey]
                proxy = cls.__new__(cls)
                object.__setattr__(proxy, "_rp_peer", self)
                object.__setattr__(proxy, "_rp_handle", h)
                self.proxies[h] = proxy
            return proxy
        if tag == "T":
            _, storage, offset, shape, stride, dtype, device, rg, param = pid
            dt = getattr(torch, dtype)
            t = torch.empty(0, dtype=dt, device=storage.device).set_(storage, offset, shape, stride)
            return self._finish_tensor(dec, t, rg, param)
        if tag == "TM":
            _, shape, stride, dtype, rg = pid
            t = torch.empty_strided(shape, stride, dtype=getattr(torch, dtype), device="meta")
            return self._finish_tensor(dec, t, rg, False)
        if tag == "TS":
            t = torch.load(io.BytesIO(pid[1]), weights_only=True)
            return self._finish_tensor(dec, t, pid[2], False)
        if tag == "TR":
            return self.sent_stack[-1][pid[1]]
        if tag == "G":
            _, owner, key, state, device = pid
            if owner == "R":  # my own generator, handed back
                g = self.own_gens[key]
            else:
                g = self.mirrors.get(key)
                if g is None:
                    g = self.mirrors[key] = torch.Generator(device=device)
                    self.mirror_key[id(g)] = key
            g.set_state(state)
            return g
        if tag == "N":
            _, dtype, shape, buf = pid
            return np.frombuffer(buf, dtype=np.dtype(dtype)).reshape(shape)
        if tag == "NS":
            return np.frombuffer(pid[2], dtype=np.dtype(pid[1]))[0]
        if tag == "ND":
            return np.dtype(pid[1])
        raise ProtocolError(f"unknown tag {tag!r}")

    def _finish_tensor(self, dec: _Decoder, t: torch.Tensor, rg: bool, param: bool) -> torch.Tensor:
        if param:
            t = torch.nn.Parameter(t, requires_grad=rg)
        elif rg and (t.is_floating_point() or t.is_complex()):
            t.requires_grad_(True)
        dec.tensors.append(t)
        return t

    def _release(self, handle: int) -> None:
        count = self.got_count.pop(handle, 0)
        if count and self.dead is None:
            self.released.append((handle, count))

    # ---- requests
    def call(self, target, name: str | None, args: tuple, kwargs: dict):
        """Call ``target`` (or its method ``name``) on the other side."""
        if self.side == "judge" and torch.is_grad_enabled():
            grads = _grad_inputs((args, kwargs))
            if grads:
                return _bridge_call(self, target, name, args, kwargs, grads)
        return self.request("call", (target, name, args, kwargs), {"grad": torch.is_grad_enabled()})

    def request(self, op: str, body, opts: dict | None = None, extra: bool = False):
        if self.dead is not None:
            raise self.dead.again()
        self.depth += 1
        try:
            self._before_request(op, body)
            sent = self._send(("req", op, body, opts or {}))
            self.sent_stack.append(sent)
            try:
                while True:
                    msg, received = self._recv()
                    kind = msg[0]
                    if kind == "req":
                        self._serve(msg, received)
                        continue
                    if kind == "ok":
                        _, value, writeback, more = msg
                        self._writeback(sent, writeback)
                        self._after_reply(more)
                        return (value, more) if extra else value
                    if kind == "err":
                        _, payload, writeback, more = msg
                        self._writeback(sent, writeback)
                        self._after_reply(more)
                        raise self._decode_exc(payload)
                    raise ProtocolError(f"unexpected message {kind!r}")
            finally:
                self.sent_stack.pop()
        finally:
            self.depth -= 1
            if self.depth == 0 and self.serving == 0:
                self._end_exchange()

    def _before_request(self, op: str, body) -> None:  # the judge syncs its global RNG here
        pass

    def _after_reply(self, more: dict) -> None:
        pass

    def _end_exchange(self) -> None:
        self.own_gens.clear()
        self.own_gen_key.clear()
        self.mirrors.clear()
        self.mirror_key.clear()
        self.tokens.clear()

    @staticmethod
    def _writeback(sent: list[torch.Tensor], writeback) -> None:
        for idx, new in writeback or ():
            orig = sent[idx]
            with torch.no_grad():
                if orig.shape == new.shape and orig.dtype == new.dtype:
                    orig.copy_(new)
                else:
                    orig.set_(new.detach().to(orig.device))

    # ---- serving
    def serve_forever(self) -> None:
        while True:
            msg, received = self._recv()
            if msg[0] != "req":
                raise ProtocolError(f"expected a request, got {msg[0]!r}")
            self._serve(msg, received)
            if self.depth == 0:
                self._end_exchange()

    def _serve(self, msg, received: list[torch.Tensor]) -> None:
        _, op, body, opts = msg
        self.serving += 1
        versions = [t._version for t in received]
        index = {id(t): i for i, t in enumerate(received)}
        try:
            more: dict = {}
            try:
                value = self._dispatch(op, body, opts, received, more)
            except BaseException as exc:  # noqa: BLE001  (everything goes back to the caller)
                self._fatal_check(exc)
                payload = self._encode_exc(exc)
                self._send(("err", payload, self._changed(received, versions), self._reply_extra(more)))
                return
            try:
                self._send(("ok", value, self._changed(received, versions), self._reply_extra(more)), index)
            except SubmissionDied:
                raise
            except Exception as exc:  # noqa: BLE001  (an unpicklable result)
                payload = self._encode_exc(exc)
                self._send(("err", payload, [], self._reply_extra(more)))
        finally:
            self.serving -= 1

    def _reply_extra(self, more: dict) -> dict:
        return more

    def _fatal_check(self, exc: BaseException) -> None:
        pass

    @staticmethod
    def _changed(received, versions) -> list:
        out = []
        for i, (t, v) in enumerate(zip(received, versions)):
            if t._version != v and not (t.requires_grad and t.is_leaf):
                out.append((i, t.detach()))
        return out

    def _dispatch(self, op: str, body, opts: dict, received, more: dict):
        guard = self.side == "judge"
        if op == "call":
            target, name, args, kwargs = body
            if name is not None:
                self._check_name(name, guard)
                fn = getattr(target, name)
            else:
                fn = target
            with torch.set_grad_enabled(opts.get("grad", torch.is_grad_enabled())):
                return self._invoke(fn, args, kwargs, opts, received, more)
        if op == "getattr":
            target, name = body
            self._check_name(name, guard)
            return self._run(getattr, target, name)
        if op == "setattr":
            target, name, value = body
            self._check_name(name, guard)
            return self._run(setattr, target, name, value)
        if op == "delattr":
            target, name = body
            self._check_name(name, guard)
            return self._run(delattr, target, name)
        if op == "builtin":
            fname, target, args = body
            return self._run(_BUILTINS[fname], target, *args)
        if self.handler is not None:
            return self.handler(op, body, opts, received, more)
        raise ProtocolError(f"unknown operation {op!r}")

    @staticmethod
    def _check_name(name: str, guard: bool) -> None:
        if guard and name.startswith("_"):
            raise AttributeError(f"the judge does not expose private attributes to a submission ({name!r})")

    def _run(self, fn, *args, **kwargs):
        return fn(*args, **kwargs)

    def _invoke(self, fn, args, kwargs, opts, received, more):
        return self._run(fn, *args, **kwargs)

    # ---- exceptions
    def _encode_exc(self, exc: BaseException) -> dict:
        token = getattr(exc, "_rp_token", None)
        if token is not None and getattr(exc, "_rp_peer_id", None) == id(self):
            return {"token": token}
        special = self._special_exc(exc)
        if special is not None:
            return special
        base = next(c for c in type(exc).__mro__ if _shared(c) and self._importable(c))
        if base is BaseException or not issubclass(base, Exception):
            base_name = ("builtins", "BaseException")
        else:
            base_name = (base.__module__, base.__qualname__)
        try:
            message = str(exc)
        except Exception:  # noqa: BLE001
            message = f"<unprintable {type(exc).__name__}>"
        payload = {"base": base_name, "name": type(exc).__qualname__, "module": type(exc).__module__,
                   "msg": message[:_MAX_TEXT], "args": _plain_args(exc.args),
                   "base_exception": not isinstance(exc, Exception)}
        if self.side == "judge":
            token = next(self._next)
            self.tokens[token] = exc
            payload["token_out"] = token
        else:
            payload["tb"] = _format_tb(exc)[-_MAX_TEXT:]
        return payload

    def _special_exc(self, exc: BaseException) -> dict | None:
        return None

    def _decode_exc(self, payload: dict) -> BaseException:
        if "token" in payload:
            original = self.tokens.get(payload["token"])
            if original is not None:
                return original
        return _rebuild_exc(payload, self)


def _format_tb(exc: BaseException) -> str:
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    keep = [l for l in lines if "conformance/isolation.py" not in l and "conformance/worker.py" not in l]
    return "".join(keep)


_EXC_CLASSES: dict[tuple, type] = {}


def _rebuild_exc(payload: dict, peer: Peer) -> BaseException:
    try:
        base = _judge_find_class(*payload["base"]) if peer.side == "judge" else \
            pickle.Unpickler.find_class(_PLAIN_UNPICKLER, *payload["base"])
        if not (isinstance(base, type) and issubclass(base, BaseException)):
            raise TypeError
    except Exception:  # noqa: BLE001
        base = Exception
    if payload.get("base_exception") and peer.side == "judge":
        base = Exception  # a submission's BaseException must not stop pytest
    elif payload.get("base_exception"):
        base = _JudgeBaseException
    cls = base
    own = (payload["module"], payload["name"])
    if own != (base.__module__, base.__qualname__):
        cls = _EXC_CLASSES.get((own, base))
        if cls is None:
            cls = _EXC_CLASSES[(own, base)] = type(payload["name"].rpartition(".")[2], (base,),
                                                   {"__module__": payload["module"], "__qualname__": payload["name"],
                                                    "__str__": lambda self: self._rp_msg})
    exc = None
    for args in (payload["args"], (payload["msg"],)):
        try:  # through __init__: C-level fields (StopIteration.value, OSError.errno) are set
            exc = cls(*args)
            break
        except Exception:  # noqa: BLE001
            continue
    if exc is None:
        exc = Exception(payload["msg"])
    try:
        exc._rp_msg = payload["msg"]
        if cls is base and tuple(str(a) for a in exc.args[:1]) != (payload["msg"],) and not isinstance(exc, KeyError):
            exc.args = (payload["msg"],)
    except Exception:  # noqa: BLE001
        pass
    if payload.get("tb"):
        try:
            exc.add_note("in the submission's process:\n" + payload["tb"].rstrip())
        except Exception:  # noqa: BLE001
            pass
    if "token_out" in payload:
        exc._rp_token = payload["token_out"]
        exc._rp_peer_id = id(peer)
    return exc


class _NullContext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_NULL_CONTEXT = _NullContext()
_PLAIN_UNPICKLER = pickle.Unpickler(io.BytesIO(b""))


# ------------------------------------------------------------------------------- autograd bridge
def _grad_inputs(tree) -> list[torch.Tensor]:
    out, seen = [], set()

    def walk(x, depth=0):
        if depth > 4:
            return
        if isinstance(x, torch.Tensor):
            if x.requires_grad and id(x) not in seen:
                seen.add(id(x))
                out.append(x)
        elif type(x) in (list, tuple, set, frozenset):
            for y in x:
                walk(y, depth + 1)
        elif type(x) is dict:
            for y in x.values():
                walk(y, depth + 1)
    walk(tree)
    return out


def _flat_tensors(tree) -> list[tuple[list, int]]:
    """Paths (container, index) of the tensors of a result (tuples become lists to be filled)."""
    out = []

    def walk(x):
        if isinstance(x, torch.Tensor):
            out.append(x)
        elif type(x) in (list, tuple):
            for y in x:
                walk(y)
        elif type(x) is dict:
            for y in x.values():
                walk(y)
    walk(tree)
    return out


def _replace_tensors(tree, new: dict):
    if isinstance(tree, torch.Tensor):
        return new.get(id(tree), tree)
    if type(tree) in (list, tuple):
        return type(tree)(_replace_tensors(y, new) for y in tree)
    if type(tree) is dict:
        return {k: _replace_tensors(v, new) for k, v in tree.items()}
    return tree


class _Bridge(torch.autograd.Function):
    @staticmethod
    def forward(ctx, state, *inputs):
        peer, target, name, args, kwargs = state["call"]
        value, more = peer.request("call", (target, name, args, kwargs), {"grad": True, "track": True}, extra=True)
        sent = state["sent_ref"].get("tensors", [])
        raw = [t for t in _flat_tensors(value) if not any(t is s for s in sent)]  # new tensors only
        outs = [o.detach() for o in raw]
        value = _replace_tensors(value, {id(o): n for o, n in zip(raw, outs)})
        mask = more.get("diff", [False] * len(outs))
        state["value"], state["outs"] = value, outs
        ctx.peer, ctx.key, ctx.mask = peer, more.get("key"), mask
        ctx.sent_ids = more.get("inputs", [])
        ctx.input_ids = [id(t) for t in inputs]
        ctx.sent = state["sent_ref"]
        ctx.mark_non_differentiable(*[o for o, m in zip(outs, mask) if not m])
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grads):
        if ctx.key is None:
            return (None,) + (None,) * len(ctx.input_ids)
        gin = ctx.peer.request("backward", (ctx.key, [g if m else None for g, m in zip(grads, ctx.mask)]))
        by_id = {}
        sent = ctx.sent.get("tensors", [])
        for idx, g in zip(ctx.sent_ids, gin):
            if idx < len(sent):
                by_id[id(sent[idx])] = g
        return (None,) + tuple(by_id.get(i) for i in ctx.input_ids)


def _bridge_call(peer: Peer, target, name, args, kwargs, inputs):
    sent_ref: dict = {}
    state = {"call": (peer, target, name, args, kwargs), "sent_ref": sent_ref}
    peer._capture_sent = sent_ref
    try:
        outs = _Bridge.apply(state, *inputs)
    finally:
        peer._capture_sent = None
    value = state["value"]
    if not state["outs"]:
        return value
    return _replace_tensors(value, {id(o): n for o, n in zip(state["outs"], outs)})


# ------------------------------------------------------------------------------- judge side
def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


class WorkerConnection(Peer):
    """The judge's end of one (submission, concept) worker."""

    def __init__(self, submission: "Submission", concept: str, process: "_Process", rfd: int, wfd: int):
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
        self.inflight = _describe_request(op, body)
        if CLOCK.logging or (op == "builtin" and body[0] in _UNLOGGED):  # the harness' own look
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
            _log_call(op, body, note=died.verdict)
            raise
        except BaseException as exc:
            _log_call(op, body, exc=exc)
            raise
        finally:
            CLOCK.leave()
        _log_call(op, body, value=out[0] if extra else out)
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
                kind, verdict = "timed out", f"timed out after {self.killed_for_timeout:g} s"
            elif code is None:
                kind, verdict = "crashed", "crashed (exit status unknown)"
            elif code < 0 and -code == signal.SIGKILL:
                kind, verdict = "out of memory", "out of memory (killed by SIGKILL)"
            elif code < 0:
                kind, verdict = "crashed", f"crashed (signal {-code})"
                detail = f"{_signal_name(-code)}. {why}".strip()
            else:
                kind, verdict = "exited", f"exited ({code})"
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

    def kill(self, kind: str, verdict: str, detail: str = "") -> SubmissionDied:
        if self.dead is None:
            self.process.kill()
            self._died(detail, kind=kind, verdict=verdict)
        return self.dead

    def _close(self) -> None:
        for fd in (self.rfd, self.wfd):
            try:
                os.close(fd)
            except OSError:
                pass
        self.rfd = self.wfd = -1

    def _decode_exc(self, payload: dict) -> BaseException:
        if "notimpl" in payload:
            from conformance.loader import NotImplementedInImpl
            return NotImplementedInImpl(self.submission.name, payload["notimpl"], stubbed=True)
        if "forbidden" in payload:
            return self.kill("forbidden", f"forbidden: imports {payload['forbidden']}",
                             "checked with --forbid-reference: the submission may not use reference/ "
                             "or optimized/ (only the data types the concepts declare as vocabulary)")
        if "import_failed" in payload:
            return self.kill("import failed", f"import failed: {payload['import_failed']}", payload.get("tb", ""))
        if "oom" in payload:
            return self.kill("out of memory", "out of memory", payload["oom"])
        if "exit" in payload:
            return self.kill("exited", f"exited ({payload['exit']})", "the submission raised SystemExit")
        return super()._decode_exc(payload)

    def _after_reply(self, more: dict) -> None:
        pass


def _describe_request(op: str, body) -> str:
    was, CLOCK.logging = CLOCK.logging, True  # a repr the description needs is not a logged call
    try:
        if op == "call":
            target, name, args, kwargs = body
            label = _label_of(target) + (f".{name}" if name else "")
            return describe_call(label, args, kwargs)
        if op in ("getattr", "setattr", "delattr"):
            return f"{op} {_label_of(body[0])}.{body[1]}"
        if op == "builtin":
            return f"{body[0]}({_label_of(body[1])})"
        if op == "resolve":
            return f"resolving {body}"
        if op == "start":
            return "importing the submission"
        if op == "inside":
            return describe_call(f"{body[0]}.{body[1]} in the submission's process", body[2], body[3])
    except Exception:  # noqa: BLE001
        pass
    finally:
        CLOCK.logging = was
    return op


_UNLOGGED = frozenset({"repr", "str", "hash"})  # what pytest and Hypothesis ask to print a value
_OPERATORS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def _session_label(obj) -> str:
    """How the call log names a submission's object: its name in this example's session
    (``radix_cache_1``), else the bare contract name it was resolved by (``RadixCache``)."""
    if isinstance(obj, Proxy):
        name = CLOCK.name(obj)
        if name is not None:
            return name
        return _label_of(obj).rpartition(".")[2]
    return describe(obj)


def _log_call(op: str, body, value=None, exc: BaseException | None = None, note: str = "") -> None:
    """Append one line to the current example's call log (:class:`_Clock`): the call as Python
    source, then what it returned or raised."""
    was, CLOCK.logging = CLOCK.logging, True  # a repr the description needs is not a logged call
    try:
        if op == "call":
            target, name, args, kwargs = body
            text = describe_call(_session_label(target) + (f".{name}" if name else ""), args, kwargs)
        elif op == "getattr":
            text = f"{_session_label(body[0])}.{body[1]}"
        elif op == "setattr":
            text = f"{_session_label(body[0])}.{body[1]} = {describe(body[2])}"
        elif op == "builtin":
            fname, target, args = body
            if fname in _OPERATORS and len(args) == 1:
                text = f"{_session_label(target)} {_OPERATORS[fname]} {describe(args[0])}"
            else:
                text = describe_call(fname, (target, *args), {})
        elif op == "inside":
            text = describe_call(f"{body[0]}.{body[1]}", body[2], body[3]) + "  # run in the submission's process"
        else:  # starting the worker, resolving names: not calls of the student's code
            return
        if note:
            line = f"{text}  # {note}"
        elif exc is not None:
            first = (str(exc).strip().splitlines() or [""])[0][:160]
            line = f"{text}  # raised {type(exc).__name__}" + (f": {first}" if first else "")
        elif isinstance(value, Proxy) and CLOCK.name(value) is None:
            line = f"{CLOCK.new_name(value)} = {text}"
        elif value is None or op == "setattr":
            line = text
        else:
            line = f"{text}  # -> {describe(value)}"
        CLOCK.log(line)
    except Exception:  # noqa: BLE001  (the log is a courtesy: never the cause of a failure)
        pass
    finally:
        CLOCK.logging = was


def _label_of(obj) -> str:
    if isinstance(obj, Proxy):
        try:
            return object.__getattribute__(obj, "_rp_label")
        except AttributeError:
            return type(obj).__qualname__
    return type(obj).__name__


class _Process:
    """A worker process: forked by the zygote or spawned."""

    def __init__(self, pid: int, zygote: "_Zygote | None", popen: subprocess.Popen | None, diag: str):
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


def _set_pdeathsig() -> None:
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001
        pass


class _Zygote:
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


class _Pool:
    """Worker processes of this judge: the zygote, temp files, cleanup at exit."""

    def __init__(self):
        self._tmpdir: str | None = None
        self.zygote: _Zygote | None = None
        self.processes: list[_Process] = []
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
                self.zygote = _Zygote(self.tmpdir, fork=fork)
            except Exception:  # noqa: BLE001
                self.zygote = None

    def start(self, config: dict) -> tuple[_Process, int, int]:
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
                proc = _Process(pid, self.zygote, None, config["diag"])
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
            proc = _Process(popen.pid, None, popen, config["diag"])
        os.close(j2w_r)
        os.close(w2j_w)
        self.processes.append(proc)
        return proc, w2j_r, j2w_w

    def shutdown(self) -> None:
        for conn in self.connections:
            if conn.dead is None:
                conn._close()
                conn.dead = SubmissionDied("exited", "closed by the judge")
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


_POOL: _Pool | None = None


def pool() -> _Pool:
    global _POOL
    if _POOL is None:
        import atexit
        _POOL = _Pool()
        atexit.register(_POOL.shutdown)
    return _POOL


@dataclasses.dataclass
class Options:
    """How submissions run: ``memory_gb`` caps each worker's address space (RLIMIT_AS);
    ``forbid_reference`` forbids importing reference/optimized except ``allowed``: module name ->
    the names a submission may import from it (the concepts' vocabulary; the loader fills it in
    from the registry, this layer only carries it to the worker, which imports those modules)."""
    memory_gb: float | None = None
    forbid_reference: bool = False
    allowed: dict[str, list[str]] | None = None


class Submission:
    """A submission checked in worker processes: one per concept, started on first use."""

    def __init__(self, name: str, spec: str, target: dict, options: Options, import_error: str | None = None):
        self.name, self.spec, self.target, self.options = name, spec, target, options
        self.connections: dict[str, WorkerConnection] = {}
        self.dead: dict[str, SubmissionDied] = {}
        self.import_failure: SubmissionDied | None = None
        if import_error:
            self.import_failure = SubmissionDied("import failed", f"import failed: {import_error}")
        self.output: dict[str, list] = {}

    # ---- cells
    def verdict(self, concept: str) -> SubmissionDied | None:
        return self.dead.get(concept)

    def _cell_died(self, concept: str, died: SubmissionDied) -> None:
        self.dead.setdefault(concept, died)
        if died.kind == "import failed":
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
        config = dict(self.target, name=self.name, concept=concept,
                      memory_gb=self.options.memory_gb, forbid=self.options.forbid_reference,
                      allowed=dict(self.options.allowed or {}) if self.options.forbid_reference else {})
        process, rfd, wfd = pool().start(config)
        conn = WorkerConnection(self, concept, process, rfd, wfd)
        self.connections[concept] = conn
        pool().connections.append(conn)
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
        submission's names directly (see :meth:`conformance.loader.Implementation.call_in_process`).
        ``fn`` travels by name: a module-level function of spec_tests/ or conformance/."""
        module, qualname = getattr(fn, "__module__", ""), getattr(fn, "__qualname__", "")
        if module.partition(".")[0] not in INSIDE_ROOTS or "<" in qualname:
            raise ValueError(f"call_in_process: {module}.{qualname} is not a module-level function of "
                             f"{' or '.join(INSIDE_ROOTS)} (it is sent to the worker by name)")
        return self.connection(concept).request("inside", (module, qualname, tuple(args), dict(kwargs)))

    def close(self) -> None:
        """End the workers: closing their pipes makes each exit."""
        for conn in self.connections.values():
            if conn.dead is None:
                conn._close()
                conn.dead = SubmissionDied("exited", "closed by the judge")

    def __repr__(self) -> str:
        return f"Submission({self.spec!r})"

