"""Hypothesis profiles, registered in one place.

dev       the default: random, for the edit-run loop (25 examples per property).
quick     ``inferspec check`` of the bundled implementations: dev with 10 examples per property
          (the main command stays quick on a 2-core machine; ``--profile dev`` asks for more).
ci        chosen automatically when CI=true: derandomized (a fixed sequence of examples, so a red
          CI is reproducible), more examples.
thorough  nightly scale; also enables the cases marked ``slow``.
mutants   used by the suite's power meta-test: derandomized, no shrinking (we only need to know
          that a mutant fails, not its smallest counterexample).
pins      explicit examples only (no generation, no database): proves that a pinned ``@example``
          fails on the mutant its ``.via("mutant:...")`` names (spec_tests/suite/test_pins.py).
Deadlines are off: tensor tests (and the Triton interpreter) have long, variable first calls.
"""
from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

_common = dict(
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.function_scoped_fixture],
)

settings.register_profile("dev", max_examples=25, **_common)
settings.register_profile("quick", max_examples=10, **_common)
settings.register_profile("ci", max_examples=40, derandomize=True, **_common)
settings.register_profile("thorough", max_examples=500, **_common)
settings.register_profile("mutants", max_examples=25, derandomize=True, report_multiple_bugs=False,
                          phases=(Phase.explicit, Phase.reuse, Phase.generate), database=None,
                          **_common)

settings.register_profile("pins", max_examples=1, report_multiple_bugs=False, phases=(Phase.explicit,),
                          database=None, **_common)

PROFILES = ("dev", "quick", "ci", "thorough", "mutants", "pins")

# Seconds of examples one test may spend on a submission under each profile (``--budget``
# overrides): past it the test starts no new example and stops shrinking (conformance/clock.py
# _Clock). A correct submission then passes with the examples it ran; a failing one shows the best
# counterexample found. Generous: the bundled reference's slowest test under `thorough` (the radix
# state machine, in isolation) takes about a quarter of its budget.
BUDGET_S = {"quick": 60.0, "dev": 120.0, "ci": 300.0, "thorough": 1800.0, "mutants": 120.0, "pins": 60.0}


def budget(profile: str) -> float:
    """The time budget of one test on a submission under ``profile`` (a profile of ours or one
    derived from it by Hypothesis' options, e.g. ``dev-with-verbose-verbosity``)."""
    for name, seconds in BUDGET_S.items():
        if profile == name or profile.startswith(name + "-"):
            return seconds
    return BUDGET_S["dev"]


def default_profile() -> str:
    """``INFERSPEC_PROFILE`` if set, else ``ci`` when CI=true, else ``dev``."""
    explicit = os.environ.get("INFERSPEC_PROFILE")
    if explicit:
        return explicit
    return "ci" if os.environ.get("CI", "").lower() in ("1", "true", "yes") else "dev"


def load(name: str | None = None) -> str:
    name = name or default_profile()
    settings.load_profile(name)
    return name
