"""The test clock and the call log: what the judge knows of the test running now.

``CLOCK`` (one per judge process; the plugin sets it around each test) holds the deadline of each
call into a submission (``--call-timeout``), the test's budget of examples (``--budget``), and the
calls made into the submission in the current Hypothesis example, written as Python one can paste
(``radix_cache_1.evict(4)  # -> [12, 22]``). :class:`BudgetSpent` ends a test whose budget is
spent (see docs/design.md, "Two clocks").
"""
from __future__ import annotations

import time
from typing import Any

import torch

from conformance.proxy import Proxy

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


class Clock:
    """The current test (set by the plugin around each test): its name; the deadline of each call
    into a submission (``--call-timeout``); the test's budget of examples (``--budget``); and the
    calls made into the submission in the current example, written as a session one can replay.

    The budget never fails a test. Once it is spent, the first call of the next Hypothesis example
    raises :class:`BudgetSpent`, which ends the test (generation and shrinking stop at once); never
    before one example has run, and never in the replay of the failing example that Hypothesis
    reports (``is_final``)."""

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

    def __init__(self, clock: "Clock"):
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


CLOCK = Clock()


# ------------------------------------------------------------------------------- the call log
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


def describe_request(op: str, body) -> str:
    was, CLOCK.logging = CLOCK.logging, True  # a repr the description needs is not a logged call
    try:
        if op == "call":
            target, name, args, kwargs = body
            label = label_of(target) + (f".{name}" if name else "")
            return describe_call(label, args, kwargs)
        if op in ("getattr", "setattr", "delattr"):
            return f"{op} {label_of(body[0])}.{body[1]}"
        if op == "builtin":
            return f"{body[0]}({label_of(body[1])})"
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


UNLOGGED = frozenset({"repr", "str", "hash"})  # what pytest and Hypothesis ask to print a value
_OPERATORS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def _session_label(obj) -> str:
    """How the call log names a submission's object: its name in this example's session
    (``radix_cache_1``), else the bare contract name it was resolved by (``RadixCache``)."""
    if isinstance(obj, Proxy):
        name = CLOCK.name(obj)
        if name is not None:
            return name
        return label_of(obj).rpartition(".")[2]
    return describe(obj)


def log_call(op: str, body, value=None, exc: BaseException | None = None, note: str = "") -> None:
    """Append one line to the current example's call log (:class:`Clock`): the call as Python
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


def label_of(obj) -> str:
    if isinstance(obj, Proxy):
        try:
            return object.__getattribute__(obj, "_rp_label")
        except AttributeError:
            return type(obj).__qualname__
    return type(obj).__name__
