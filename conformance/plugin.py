"""The pytest plugin: ``--impl``, ``--concept``, ``--report-json``, the ``impl`` fixture and the
per-concept report. Registered by the repository's root ``conftest.py`` (and by ``inferspec
check`` with ``-p conformance.plugin`` when the package is installed without its repository)."""
from __future__ import annotations

import os
import shlex

import pytest

from conformance import profiles, report
from conformance.loader import BUNDLED, Implementation, impl_specs_from_env, load_implementation
from conformance.registry import CONCEPTS

IMPLS = pytest.StashKey[list]()
REFERENCE = pytest.StashKey[Implementation]()
RESULTS = pytest.StashKey[report.Results]()
CONCEPT_FILTER = pytest.StashKey[set]()


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("inferspec", "inferspec conformance")
    g.addoption("--impl", action="append", default=[], metavar="MODULE_OR_PATH",
                help="implementation to check: a module name or a .py file/package path; "
                     "repeatable; default $INFERSPEC_IMPL (comma-separated) or the bundled "
                     "'reference' and 'optimized'")
    g.addoption("--concept", action="append", default=[], metavar="ID",
                help="only these concepts (repeatable or comma-separated); see `inferspec list`")
    g.addoption("--report-json", default=None, metavar="PATH",
                help="write the per-concept report as JSON")
    g.addoption("--no-report", action="store_true", help="do not print the per-concept table")
    g.addoption("--run-slow", action="store_true", help="also run the cases marked slow")
    g.addoption("--first-failure-per-concept", action="store_true",
                help="once a concept has failed for an implementation, skip its remaining tests "
                     "for that implementation (the verdict is already 'failed'; used by the "
                     "mutant power run)")


def _cuda_available() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:  # pragma: no cover
        return False


def pytest_configure(config: pytest.Config) -> None:
    # Triton kernels run on the CPU under the interpreter when there is no GPU. It must be set
    # before any kernel module is imported (triton.jit reads it at decoration time).
    if not _cuda_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")
        # Spec tests use small tensors, for which intra-op threads cost far more than they save
        # (a tiny model forward measured 50x slower with 2 threads on a busy 2-core machine).
        # INFERSPEC_TORCH_THREADS overrides; timing scripts outside pytest keep torch's default.
        import torch
        torch.set_num_threads(int(os.environ.get("INFERSPEC_TORCH_THREADS", "1")))
    if config.getoption("hypothesis_profile", None) is None:
        profiles.load()
    specs = config.getoption("impl") or impl_specs_from_env() or list(BUNDLED)
    impls, seen = [], set()
    for spec in specs:
        try:
            impl = load_implementation(spec)
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from exc
        while impl.name in seen:  # two files with one stem: keep ids distinct
            impl.name += "'"
        seen.add(impl.name)
        impls.append(impl)
    config.stash[IMPLS] = impls
    config.stash[REFERENCE] = load_implementation("reference")
    concepts = []
    for raw in config.getoption("concept"):
        concepts += [c.strip() for c in raw.split(",") if c.strip()]
    unknown = [c for c in concepts if c not in CONCEPTS and c != "suite"]
    if unknown:
        raise pytest.UsageError(f"--concept: unknown {unknown}; known: {sorted(CONCEPTS)}")
    config.stash[CONCEPT_FILTER] = set(concepts)
    config.stash[RESULTS] = report.Results([i.name for i in impls])
    config.addinivalue_line("markers", "concept(id): concept of a spec test")


def pytest_report_header(config: pytest.Config) -> list[str]:
    impls = config.stash.get(IMPLS, [])
    from hypothesis import settings
    return [f"inferspec: checking {', '.join(f'{i.name} ({i.spec})' for i in impls)}; "
            f"hypothesis profile {settings._current_profile}; "
            f"triton interpreter {'on' if os.environ.get('TRITON_INTERPRET') == '1' else 'off'}"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "impl" in metafunc.fixturenames:
        impls = metafunc.config.stash[IMPLS]
        metafunc.parametrize("impl", impls, ids=[i.name for i in impls])


@pytest.fixture
def reference(request: pytest.FixtureRequest) -> Implementation:
    """The bundled reference implementation (the spec), for differential properties."""
    return request.config.stash[REFERENCE]


@pytest.fixture(scope="session")
def device() -> str:
    """``cuda`` when a GPU is present (tests then run natively), else ``cpu``."""
    return "cuda" if _cuda_available() else "cpu"


def concept_of(item: pytest.Item) -> str:
    m = item.get_closest_marker("concept")
    return m.args[0] if m else "suite"


def impl_of(item: pytest.Item) -> str | None:
    cs = getattr(item, "callspec", None)
    if cs is not None and "impl" in cs.params:
        return cs.params["impl"].name
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wanted = config.stash[CONCEPT_FILTER]
    if wanted:
        keep = [it for it in items if concept_of(it) in wanted]
        drop = [it for it in items if concept_of(it) not in wanted]
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
    cuda = _cuda_available()
    from hypothesis import settings
    slow_ok = config.getoption("run_slow") or settings._current_profile == "thorough"
    for it in items:
        if "gpu" in it.keywords and not cuda:
            it.add_marker(pytest.mark.skip(reason="needs a CUDA GPU (none here); runs natively on the H200"))
        if "slow" in it.keywords and not slow_ok:
            it.add_marker(pytest.mark.skip(reason="slow: use --run-slow or --hypothesis-profile=thorough"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    rep = yield
    rep.inferspec_concept = concept_of(item)
    rep.inferspec_impl = impl_of(item)
    if rep.failed and call.excinfo is not None:
        spec = next((i.spec for i in item.config.stash[IMPLS] if i.name == rep.inferspec_impl), None)
        cmd = ["pytest", item.nodeid] + (["--impl", spec] if spec else [])
        rep.sections.append(("inferspec: reproduce", "paste to reproduce:\n    " + shlex.join(cmd)))
    return rep


def pytest_runtest_logreport(report) -> None:
    config = _CONFIG[0] if _CONFIG else None
    if config is not None and hasattr(report, "inferspec_concept"):
        config.stash[RESULTS].record(report)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.config.getoption("first_failure_per_concept"):
        cell = item.config.stash[RESULTS].cells.get((concept_of(item), impl_of(item)))
        if cell is not None and cell.failed:
            pytest.skip("this concept already failed for this implementation")


_CONFIG: list[pytest.Config] = []


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    _CONFIG[:] = [session.config]


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    results = config.stash.get(RESULTS, None)
    if results is None:
        return
    path = config.getoption("report_json")
    if path:
        results.write_json(path)
    if not config.getoption("no_report") and results.any():
        report.print_table(results, terminalreporter)
