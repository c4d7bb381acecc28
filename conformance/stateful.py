"""Each example's failure, told to the test clock (conformance/clock.py), which keeps the smallest failing example's
calls into the submission (conformance/clock.py ``Clock``): if the time budget ends
Hypothesis' shrinking, that example is the one reported.

- ``run_as_test(Machine, settings)``: Hypothesis' ``run_state_machine_as_test`` for the spec's
  state machines, each example's failure seen by the machine's teardown;
- ``watch_examples(fn)``: wraps one example of a ``@given`` test (the plugin installs it through
  Hypothesis' documented ``.hypothesis.inner_test`` hook).
"""
from __future__ import annotations

import functools
import sys

from hypothesis.errors import UnsatisfiedAssumption
from hypothesis.stateful import run_state_machine_as_test

from conformance.clock import CLOCK


def note_failure(exc: BaseException | None) -> None:
    """Tell the clock that the current example failed with ``exc``: an ``Exception`` that is not
    Hypothesis' own signal of a rejected example (an ``assume``)."""
    if isinstance(exc, Exception) and not isinstance(exc, UnsatisfiedAssumption):
        CLOCK.example_failed(exc)


def watch_examples(fn):
    """``fn`` (one example of a test) with its failure told to the clock."""
    @functools.wraps(fn)
    def watched(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            note_failure(exc)
            raise
    return watched


def _teardown(self) -> None:
    note_failure(sys.exc_info()[1])  # teardown runs in Hypothesis' `finally`: the example's exception
    super(type(self), self).teardown()


def run_as_test(machine: type, settings=None) -> None:
    watched = type(machine.__name__, (machine,), {"teardown": _teardown, "__module__": machine.__module__})
    run_state_machine_as_test(watched, settings=settings)
