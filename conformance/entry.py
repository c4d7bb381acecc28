"""The pytest entry point of inferspec: its options, and the switch that turns the plugin on.

Installed inferspec registers this module with pytest (``[project.entry-points.pytest11]`` in
pyproject.toml), so ``pytest --impl my_impl.py`` works from any folder; the repository's root
``conftest.py`` registers it too, for a checkout run without installing. The module is light (no
torch, no Hypothesis): in an environment where inferspec is installed, an unrelated pytest run
pays nothing and sees nothing of it but the options.

The full plugin (``conformance/plugin.py``: the ``impl`` fixture, isolation, the report) is
switched on when the run is an inferspec run:

- an implementation is named (``--impl``, or ``$INFERSPEC_IMPL``) or ``--concept`` is given, or
- the run's root is the inferspec repository, or a test path given lies in its ``spec_tests/``.

Named from another folder with no test paths (``pytest --impl my_impl.py``), the run collects the
installed spec's concept folders.
"""
from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from conformance.options import HELP
from conformance.registry import ROOT, SPEC_DIR, concept_ids, split_ids

MARKERS = (
    "concept(id): the concept a spec test belongs to (set per module with pytestmark)",
    "gpu: needs a CUDA device; skipped with a reason on CPU",
    "slow: heavy case; runs with --run-slow or the thorough profile",
    "heavy: a long test of the suite itself or of the bundled internals; runs in CI (the ci "
    "profile), with --run-slow and under thorough; the default dev run skips it",
    "meta: the suite's own tests (mutant power, harness)",
    "bundled: tests internals of the bundled implementations",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("inferspec", "inferspec conformance")
    g.addoption("--impl", action="append", default=[], metavar="MODULE_OR_PATH",
                help="implementation to check: a module name, a .py file/package path or "
                     "mutant:<concept>.<name>; repeatable; default $INFERSPEC_IMPL "
                     "(comma-separated) or the bundled 'reference' and 'optimized'")
    g.addoption("--concept", action="append", default=[], metavar="ID", help=HELP["concept"])
    g.addoption("--report-json", default=None, metavar="PATH",
                help="write the per-concept report as JSON")
    g.addoption("--no-report", action="store_true", help="do not print the per-concept table")
    g.addoption("--run-slow", action="store_true", help="also run the cases marked slow")
    g.addoption("--forbid-reference", action="store_true", help=HELP["forbid_reference"])
    g.addoption("--memory", type=float, default=None, metavar="GB", help=HELP["memory"])
    g.addoption("--call-timeout", type=float, default=None, metavar="S", help=HELP["timeout"])
    g.addoption("--budget", type=float, default=None, metavar="S", help=HELP["budget"])
    g.addoption("--in-process", action="store_true",
                help="run submissions in pytest's own process (for a debugger; a crash of the "
                     "submission then ends the run)")
    g.addoption("--first-failure-per-concept", action="store_true",
                help="once a concept has failed for an implementation, skip its remaining tests "
                     "for that implementation (the verdict is already 'failed'; used by the "
                     "mutant power run)")
    g.addoption("--test-deadline", type=float, default=None, metavar="S",
                help="fail a test of an in-process implementation still running after S seconds, "
                     "and every replay Hypothesis then makes of it within a second (the mechanical "
                     "power run: a variant that loops forever costs one test, not its process)")


def under(path: Path, folder: Path) -> bool:
    """Whether ``path`` lies in ``folder`` (both resolved)."""
    try:
        path.resolve().relative_to(folder)
        return True
    except (ValueError, OSError):
        return False




def is_inferspec_run(config: pytest.Config) -> bool:
    """Whether this pytest run is an inferspec run (see the module's docstring)."""
    if config.getoption("impl") or os.environ.get("INFERSPEC_IMPL") or config.getoption("concept"):
        return True
    if under(Path(str(config.rootpath)), ROOT) and (ROOT / "conftest.py").exists():
        return True
    return any(under(Path(a.split("::", 1)[0]), SPEC_DIR) for a in config.args)


def cache_dir() -> Path:
    """Where a submission's check keeps Hypothesis' and pytest-benchmark's files
    (``$INFERSPEC_CACHE``, else ``$XDG_CACHE_HOME/inferspec``, else ``~/.cache/inferspec``): never
    the folder the user stands in."""
    explicit = os.environ.get("INFERSPEC_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "inferspec"


def _checks_a_submission(config: pytest.Config) -> bool:
    return bool(config.getoption("impl") or os.environ.get("INFERSPEC_IMPL"))


def _wanted_folders(config: pytest.Config) -> list[str]:
    """The concept folders to collect: the ``--concept`` ones when every id is known, else all
    (the plugin then names the unknown id)."""
    known, wanted = concept_ids(), set(split_ids(config.getoption("concept")))
    chosen = wanted if wanted and wanted <= set(known) else known
    return [str(SPEC_DIR / c) for c in known if c in chosen]


def run_seed(config: pytest.Config) -> int | None:
    """The Hypothesis seed of a submission's check: ``--hypothesis-seed`` if given, else one drawn
    now (and kept in ``$INFERSPEC_SEED`` for pytest-xdist's workers), so that every failure's
    reproduce line replays the same example anywhere. None for runs of the bundled code."""
    given = config.getoption("hypothesis_seed", None)
    if given is not None:
        return given
    if not _checks_a_submission(config):
        return None
    seed = os.environ.get("INFERSPEC_SEED")
    if seed is None or not seed.isdigit():
        seed = str(random.SystemRandom().randrange(2**31))
        os.environ["INFERSPEC_SEED"] = seed
    config.option.hypothesis_seed = int(seed)  # read by Hypothesis' own pytest_configure, after ours
    return int(seed)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if not is_inferspec_run(config):
        return
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    if config.args_source != pytest.Config.ArgsSource.ARGS and not under(Path(str(config.rootpath)), ROOT):
        # `pytest --impl my_impl.py` in the student's folder: the spec is the installed one
        config.args[:] = _wanted_folders(config)
    if _checks_a_submission(config):
        # nothing of a submission's check lands in the user's folder (.hypothesis/, .benchmarks/)
        cache = cache_dir()
        os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(cache / "hypothesis"))
        if str(getattr(config.option, "benchmark_storage", "")).startswith("file://./"):
            config.option.benchmark_storage = f"file://{cache / 'benchmarks'}"
        run_seed(config)
    if not config.pluginmanager.has_plugin("conformance.plugin"):
        config.pluginmanager.import_plugin("conformance.plugin")
