"""Running the spec's state machines: ``run_as_test(Machine, settings)`` is Hypothesis'
``run_state_machine_as_test`` with each example's failure reported to the isolation clock, which
keeps the smallest failing example's calls into the submission (conformance/isolation.py
``_Clock``): if the time budget ends Hypothesis' shrinking, that example is the one reported."""
from __future__ import annotations

import sys

from hypothesis.stateful import run_state_machine_as_test

from conformance.isolation import CLOCK, _is_hypothesis_control


def _teardown(self) -> None:
    exc = sys.exc_info()[1]  # teardown runs in Hypothesis' `finally`: the example's exception, if any
    if isinstance(exc, Exception) and not _is_hypothesis_control(exc):
        CLOCK.example_failed(exc)
    super(type(self), self).teardown()


def run_as_test(machine: type, settings=None) -> None:
    watched = type(machine.__name__, (machine,), {"teardown": _teardown, "__module__": machine.__module__})
    run_state_machine_as_test(watched, settings=settings)
