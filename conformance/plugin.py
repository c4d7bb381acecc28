"""The pytest plugin: ``--impl``, ``--concept``, ``--report-json``, the ``impl`` fixture, the
consistency checks and the per-concept report. Its options, and the decision to switch it on, live in
``conformance/entry.py`` (the module pytest loads: the installed package's entry point, and the
repository's root ``conftest.py``).

A test's concept is the package it lives in (``spec_tests/attention/test_x.py`` -> ``attention``);
tests elsewhere may name one with ``@pytest.mark.concept("id")``. The ``impl`` and ``reference``
fixtures are bound to the test's concept (``impl.get("KVCache")`` in spec_tests/kv_bytes/ means
``kv_bytes.KVCache``; ``impl.of("attention")`` names another), unbound for a test with no concept
(conformance/implementation.py ``ConceptView``). Tests in ``spec_tests/suite``
(the suite's own tests) and ``spec_tests/bundled`` (internals of the bundled implementations) never
run against a submission given with ``--impl`` (nor do the benchmarks of ``bench/``).

A submission (a path, or a module other than the bundled ``reference``/``optimized``) runs in
worker processes (conformance/submission.py): its crash, exit, hang (``--timeout S``, per test,
Hypothesis tests included) or out-of-memory (``--memory GB``) gives its (submission, concept) cell
a verdict and skips the cell's remaining tests; every other cell and the report survive. Each
test's outcome is carried as a record in ``report.user_properties`` so that the table is also
built by the pytest-xdist controller.
"""
from __future__ import annotations

import contextlib
import os
import re
import signal
import shlex
from pathlib import Path

import pytest

from conformance import processes, profiles, report, signatures, stateful
from conformance.badinput import Bad
from conformance.clock import CLOCK, BudgetSpent
from conformance.consistency import problems
from conformance.entry import under
from conformance.implementation import ConceptView, Implementation, NotImplementedInImpl
from conformance.loader import BUNDLED, impl_specs_from_env, load_implementation, looks_like_path
from conformance.submission import OUTPUT_LIMIT, Options
from conformance.verdict import SubmissionDied, WrongSignature
from conformance.registry import CONCEPTS, NOT_CONCEPTS, ROOT, SPEC_DIR, split_ids

IMPLS = pytest.StashKey[list]()
REFERENCE = pytest.StashKey[Implementation]()
RESULTS = pytest.StashKey[report.Results]()
CONCEPT_FILTER = pytest.StashKey[set]()
EXPLICIT_IMPLS = pytest.StashKey[bool]()
SIGNATURES = pytest.StashKey[dict]()
SUITE = "suite"
DEFAULT_CALL_TIMEOUT_S = 60.0  # --call-timeout: one call into a submission


class NotRun(pytest.skip.Exception):
    """A test of a cell whose worker is gone (crashed, timed out, ...): skipped, counted apart."""


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
    if os.environ.get("TRITON_INTERPRET") == "1":
        from conformance import triton_interpreter
        triton_interpreter.apply()
    if config.getoption("hypothesis_profile", None) is None:
        profiles.load()
    config.addinivalue_line("markers", "concept(id): concept of a test outside spec_tests/<id>/")
    config.addinivalue_line("markers", "bundled: tests internals of the bundled implementations")
    config.addinivalue_line("markers", "choice(what): checks a choice the reference made where the law "
                            "leaves it open (a draw order, a tie rule, a precision); enforced only "
                            "for an implementation that declares TOKEN_EXACT")
    bad = problems()
    if bad:
        raise pytest.UsageError("inferspec: the concept registry is inconsistent:\n  " + "\n  ".join(bad))
    explicit = config.getoption("impl") or impl_specs_from_env()
    specs = explicit or list(BUNDLED)
    options = Options(memory_gb=config.getoption("memory"),
                                forbid_reference=config.getoption("forbid_reference"))
    impls, seen = [], set()
    for spec in specs:
        try:
            impl = load_implementation(spec, options=options, in_process=config.getoption("in_process"))
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from exc
        while impl.name in seen:  # two files with one stem: keep ids distinct
            impl.name += "'"
        seen.add(impl.name)
        impls.append(impl)
    config.stash[IMPLS] = impls
    config.stash[EXPLICIT_IMPLS] = bool(explicit)
    config.stash[REFERENCE] = load_implementation("reference")
    concepts = split_ids(config.getoption("concept"))
    unknown = [c for c in concepts if c not in CONCEPTS and c != SUITE]
    if unknown:
        raise pytest.UsageError(f"--concept: unknown {unknown}; known: {list(CONCEPTS)}")
    config.stash[CONCEPT_FILTER] = set(concepts)
    config.stash[RESULTS] = report.Results([i.name for i in impls])
    config.pluginmanager.register(_Session(config), "inferspec-session")
    xdist_controller = bool(getattr(config.option, "numprocesses", None)) and not hasattr(config, "workerinput")
    if any(i.isolated for i in impls) and not xdist_controller:
        # Workers are forked from a fork of this process taken now, before any test has run a
        # torch op: they start in milliseconds with torch and the reference already imported.
        processes.pool().prestart(fork=True)


def pytest_unconfigure(config: pytest.Config) -> None:
    for impl in config.stash.get(IMPLS, []):
        if impl.submission is not None:
            impl.submission.close()
    processes.shutdown()


class TestDeadline(BaseException):
    """Raised into a test that outlived ``--test-deadline``. A BaseException, not an Exception:
    Hypothesis catches Exceptions (and pytest's ``Failed``, which pytest-timeout raises) as a failing
    example and replays it while shrinking, with no alarm left to stop a replay that loops; this
    one it lets through, and pytest records it as the test's failure."""
    __test__ = False


@contextlib.contextmanager
def test_deadline(seconds: float):
    """Raise :class:`TestDeadline` in the main thread ``seconds`` from now, and again every second
    until the block ends (code that swallows one raise does not escape). Main thread only (signals);
    elsewhere the block runs without a deadline."""
    import threading
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def fire(signum, frame):
        raise TestDeadline(f"Timeout >{seconds:g}s: the test ran past --test-deadline (a loop that never ends?)")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds, 1.0)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


test_deadline.__test__ = False


def call_timeout_s(config: pytest.Config) -> float:
    """Seconds one call into a submission may take (``--call-timeout``; ``inferspec check
    --timeout``)."""
    return float(config.getoption("call_timeout", None) or DEFAULT_CALL_TIMEOUT_S)


def budget_s(config: pytest.Config) -> float:
    """Seconds of examples one test may spend on a submission (``--budget``, else the profile's)."""
    given = config.getoption("budget", None)
    if given:
        return float(given)
    from hypothesis import settings
    return profiles.budget(settings.get_current_profile_name())


def backstop_s(call_timeout: float, budget: float) -> float:
    """pytest-timeout's limit for a submission's test: past the budget the examples under way
    finish (each call within its deadline), and no new one starts."""
    return 2 * budget + 2 * call_timeout + 60


def pytest_report_header(config: pytest.Config) -> list[str]:
    from hypothesis import settings
    impls = config.stash.get(IMPLS, [])
    return [f"inferspec: checking {', '.join(f'{i.name} ({i.spec})' for i in impls)}; "
            f"hypothesis profile {settings.get_current_profile_name()}; "
            f"triton interpreter {'on' if os.environ.get('TRITON_INTERPRET') == '1' else 'off'}"]


def _folder_of(path: Path) -> str | None:
    """The spec_tests/ subfolder a test file lives in, or None outside spec_tests/."""
    try:
        rel = path.resolve().relative_to(SPEC_DIR)
    except ValueError:
        return None
    return rel.parts[0] if len(rel.parts) > 1 else None


def _declared_concept(node) -> str | None:
    m = node.get_closest_marker("concept")
    return m.args[0] if m else None


def concept_of(item) -> str:
    """The concept of a test: its package under spec_tests/, else its ``concept`` marker, else
    ``suite``."""
    folder = _folder_of(Path(str(item.path)))
    if folder is not None and folder not in NOT_CONCEPTS:
        return folder
    return _declared_concept(item) or SUITE


def bound(impl: Implementation, concept: str) -> Implementation | ConceptView:
    """``impl`` as a test of ``concept`` sees it: bound to the concept (``impl.get("KVCache")``
    means ``kv_bytes.KVCache`` in spec_tests/kv_bytes/), or unbound outside any concept (the
    suite's own tests), where ``impl.of("<concept>")`` names it."""
    return impl.of(concept) if concept in CONCEPTS else impl


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "impl" in metafunc.fixturenames:
        impls = metafunc.config.stash[IMPLS]
        concept = concept_of(metafunc.definition)
        metafunc.parametrize("impl", [bound(i, concept) for i in impls], ids=[i.name for i in impls])


@pytest.fixture
def reference(request: pytest.FixtureRequest) -> Implementation | ConceptView:
    """The bundled reference implementation (the spec), for differential properties; bound to the
    test's concept like ``impl``."""
    return bound(request.config.stash[REFERENCE], concept_of(request.node))


@pytest.fixture(scope="session")
def device() -> str:
    """``cuda`` when a GPU is present (tests then run natively), else ``cpu``."""
    return "cuda" if _cuda_available() else "cpu"


def impl_obj(item: pytest.Item) -> Implementation | None:
    cs = getattr(item, "callspec", None)
    if cs is not None and "impl" in cs.params:
        return cs.params["impl"]
    return None


def impl_of(item: pytest.Item) -> str | None:
    impl = impl_obj(item)
    return impl.name if impl is not None else None


def _is_bad_input(item: pytest.Item) -> bool:
    cs = getattr(item, "callspec", None)
    return cs is not None and isinstance(cs.params.get("bad"), Bad)


def _found_in(exc: BaseException | None, kind: type, depth: int = 0):
    """The ``kind`` exception in an exception, its cause/context chain or its group's leaves
    (Hypothesis may raise its own error while one of ours propagates, e.g. a state machine's
    ``FlakyStrategyDefinition`` when an example ends early)."""
    if exc is None or depth > 8:
        return None
    if isinstance(exc, kind):
        return exc
    for sub in getattr(exc, "exceptions", None) or ():
        found = _found_in(sub, kind, depth + 1)
        if found is not None:
            return found
    return _found_in(exc.__cause__ or exc.__context__, kind, depth + 1)


def _died_in(exc: BaseException | None):
    """The SubmissionDied in an exception (see :func:`_found_in`)."""
    return _found_in(exc, SubmissionDied)


def test_kind(item: pytest.Item) -> str:
    """What a test is, for choosing which failure a cell shows first (report.KIND_RANK): a bad-input
    case, a state machine (its body runs conformance.stateful.run_as_test), a Hypothesis property,
    or a fixed example."""
    if _is_bad_input(item):
        return "bad input"
    fn = getattr(item, "function", None)
    if "run_as_test" in getattr(getattr(fn, "__code__", None), "co_names", ()):
        return "state machine"
    from hypothesis import is_hypothesis_test
    return "property" if is_hypothesis_test(getattr(item, "obj", None)) else "example"


def raised_by_the_implementation(exc: BaseException | None) -> bool:
    """Whether a test failed because the implementation raised (a crash inside it, e.g. a KeyError
    three calls into a state the real bug broke) rather than because the spec judged an answer
    wrong: an exception rebuilt from a submission's worker, or one whose innermost frame is outside
    spec_tests/ and conformance/."""
    if exc is None or isinstance(exc, AssertionError):
        return False
    if hasattr(exc, "_rp_msg"):  # rebuilt from the submission's process (conformance/wire.py)
        return True
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return False
    where = Path(tb.tb_frame.f_code.co_filename)
    return not any(under(where, d) for d in (SPEC_DIR, ROOT / "conformance"))


def choice_of(item: pytest.Item) -> str:
    """The choice a test checks (its ``choice`` marker's words), or "" for a test of the law."""
    m = item.get_closest_marker("choice")
    return str(m.args[0]) if m is not None and m.args else ("a choice of the reference" if m else "")


def rule_of(item: pytest.Item) -> str:
    """The rule a test checks: its docstring's first paragraph, without the suite's own notes
    ("Mutant: ..." names the planted bug it catches)."""
    import inspect
    doc = inspect.getdoc(getattr(item, "function", None)) or ""
    para = " ".join(doc.split("\n\n", 1)[0].split())
    sentences = [x for x in re.split(r"(?<=[.!?])\s+", para) if x and not x.startswith(("Mutant", "Pins", "Pinned"))]
    text = " ".join(sentences)
    return text if len(text) <= 400 else text[:397] + "..."


def _skip_reason(rep) -> str:
    lr = rep.longrepr
    if isinstance(lr, tuple) and len(lr) == 3:
        return str(lr[2]).removeprefix("Skipped: ")
    return str(lr or "")


def _consistency_errors(items: list[pytest.Item]) -> list[str]:
    """Tests whose concept marker names an unknown concept, or another concept than their folder's.
    (The names a test asks for are checked when it runs: ``impl.get`` of a name outside the bound
    concept's contract is a LookupError, conformance/implementation.py ``ConceptView``.)"""
    errors = []
    for it in items:
        declared = _declared_concept(it)
        if declared is not None and declared not in CONCEPTS:
            errors.append(f"{it.nodeid}: marked with unknown concept {declared!r} (known: {', '.join(CONCEPTS)})")
        folder = _folder_of(Path(str(it.path)))
        if folder is not None and declared is not None and folder not in NOT_CONCEPTS and declared != folder:
            errors.append(f"{it.nodeid}: lives in spec_tests/{folder}/ but is marked concept {declared!r}")
    return errors


class _Session:
    """Per-run hooks that need the config (kept on the instance: no module-global state)."""

    def __init__(self, config: pytest.Config):
        self.config = config

    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        errors = _consistency_errors(items)
        if errors:
            raise pytest.UsageError("inferspec: tests disagree with the registry:\n  " + "\n  ".join(errors))
        wanted = config.stash[CONCEPT_FILTER]
        submission = config.stash[EXPLICIT_IMPLS]
        keep, drop = [], []
        for it in items:
            folder = _folder_of(Path(str(it.path)))
            internal = folder in NOT_CONCEPTS
            if (wanted and concept_of(it) not in wanted) or (submission and internal):
                drop.append(it)
            else:
                keep.append(it)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
        cuda = _cuda_available()
        from hypothesis import settings
        profile = settings.get_current_profile_name()
        slow_ok = config.getoption("run_slow") or profile == "thorough"
        heavy_ok = slow_ok or profile == "ci"
        call_timeout, budget = call_timeout_s(config), budget_s(config)
        asked = config.getoption("timeout", None)  # pytest-timeout's --timeout, when given
        for it in items:
            impl = impl_obj(it)
            if impl is not None and impl.isolated:
                # a submission's test ends by its own clock (the call deadline, then the budget);
                # pytest-timeout is only the backstop for the harness itself
                it.add_marker(pytest.mark.timeout(float(asked) if asked else backstop_s(call_timeout, budget)))
            if "gpu" in it.keywords and not cuda:
                it.add_marker(pytest.mark.skip(reason="needs a CUDA GPU (none here); runs natively on the H200"))
            if "slow" in it.keywords and not slow_ok:
                it.add_marker(pytest.mark.skip(reason="slow: use --run-slow or --hypothesis-profile=thorough"))
            elif "heavy" in it.keywords and not heavy_ok:
                it.add_marker(pytest.mark.skip(reason="heavy: runs in CI (CI=true), with --run-slow or "
                                                      "--hypothesis-profile=thorough"))

    def _reproduce(self, item: pytest.Item, impl: Implementation | None) -> str:
        """A command that replays this failure from any folder: absolute paths, the Hypothesis
        profile and seed of this run (a submission's check always has one: conformance/entry.py),
        and every option that changes the outcome."""
        from hypothesis import settings
        test = item.nodeid.split("::", 1)[1] if "::" in item.nodeid else ""
        target = str(Path(str(item.path)).resolve()) + (f"::{test}" if test else "")
        cmd = ["pytest", target, "--rootdir", str(ROOT), "-p", "no:cacheprovider"]
        profile = settings.get_current_profile_name()
        for base in profiles.PROFILES:  # Hypothesis derives e.g. "dev-with-verbose-verbosity"
            if profile.startswith(base + "-"):
                profile = base
        cmd.append(f"--hypothesis-profile={profile}")
        seed = self.config.getoption("hypothesis_seed", None)
        if seed is not None:
            cmd.append(f"--hypothesis-seed={seed}")
        if impl is not None:
            spec = impl.spec
            cmd += ["--impl", str(Path(spec).resolve()) if looks_like_path(spec) else spec]
            if impl.isolated:
                opt = self.config.getoption
                if opt("forbid_reference"):
                    cmd.append("--forbid-reference")
                for name in ("memory", "call_timeout", "budget"):
                    if opt(name, None):
                        cmd += [f"--{name.replace('_', '-')}", f"{float(opt(name)):g}"]
            elif self.config.getoption("in_process") and looks_like_path(impl.spec):
                cmd.append("--in-process")
        return shlex.join(cmd)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call):
        rep = yield
        concept, impl = concept_of(item), impl_obj(item)
        exc = call.excinfo.value if call.excinfo is not None else None
        budget = _found_in(exc, BudgetSpent)
        if budget is not None and not budget.failures:  # every example passed: the test passes
            rep.outcome, rep.longrepr = "passed", None
            rep.sections.append(("inferspec: time budget", str(budget)))
            exc = None
        rep.inferspec_concept = concept
        rep.inferspec_impl = impl.name if impl is not None else None
        choice = choice_of(item)
        if choice and rep.failed and rep.when == "call" and impl is not None and not impl.token_exact \
                and _died_in(exc) is None and _found_in(exc, WrongSignature) is None:
            # a choice the law leaves open, not enforced for this implementation: told, not failed
            rep.outcome = "skipped"
            said = report.first_line(str(exc)) if exc is not None else ""
            what = f"{type(exc).__name__}: {said}" if exc is not None else report.first_line(rep.longreprtext or "")
            rep.wasxfail = f"token-exact ✗ ({choice}): {what}"
            rep.longrepr = None
        rec = {"concept": concept, "impl": rep.inferspec_impl, "nodeid": rep.nodeid, "when": rep.when,
               "outcome": rep.outcome, "bad_input": _is_bad_input(item), "kind": test_kind(item)}
        if choice:
            rec["choice"] = choice
            if rep.when == "call" and hasattr(rep, "wasxfail") and rep.wasxfail.startswith("token-exact"):
                rec["choice_failed"] = rep.wasxfail
        if rep.skipped:
            if isinstance(exc, NotImplementedInImpl):
                rec["not_implemented"], rec["stubbed"] = list(exc.names), bool(exc.stubbed)
            elif isinstance(exc, NotRun):
                rec["not_run"] = True
            else:
                rec["skip_reason"] = _skip_reason(rep)
        if rep.failed and exc is not None:
            reproduce = self._reproduce(item, impl)
            rep.sections.append(("inferspec: reproduce", "paste to reproduce:\n    " + reproduce))
            died = _died_in(exc) or _found_in(exc, WrongSignature)
            if died is None and impl is not None and impl.isolated:
                # the cell's worker died in this test, whatever exception the test ended with
                # (Hypothesis may wrap it, e.g. a stateful test's FlakyStrategyDefinition)
                cell_died = impl.submission.verdict(concept)
                if cell_died is not None and cell_died.test == item.nodeid:
                    died = cell_died
            rec["failure"] = report.failure_record(died or budget or exc, rep.nodeid, reproduce,
                                                   rep.longreprtext or "")
            if died is not None:
                rec["verdict"], rec["verdict_kind"] = died.verdict, died.kind.value
            if budget is not None:  # stopped while shrinking: the smallest failing example seen
                rec["failure"]["calls"] = budget.calls
            elif impl is not None and impl.isolated and CLOCK.calls:
                # the calls of the example that failed (Hypothesis' replay of it runs last)
                rec["failure"]["calls"] = CLOCK.session()
            rec["failure"]["rule"] = signatures.RULE if isinstance(died, WrongSignature) else rule_of(item)
            if choice and died is None:
                why = ("it declares TOKEN_EXACT = True" if impl.submission is not None or impl.spec.endswith(".py")
                       else "it is one of ours")
                rec["failure"]["rule"] = (f"token-exact, a choice the law leaves open ({choice}), enforced "
                                          f"because {why}. " + rec["failure"]["rule"])
            rec["failure"]["crash"] = raised_by_the_implementation(exc if budget is None and died is None else None)
            calls = rec["failure"].get("calls") or ""
            rec["failure"]["ncalls"] = len(calls.splitlines())
            if calls:
                rep.sections.append(("inferspec: the calls into the submission (the failing example)",
                                     rec["failure"]["calls"]))
        if budget is not None:
            rec["budget"] = {"seconds": budget.budget, "examples": budget.examples, "failed": bool(budget.failures)}
        if impl is not None and impl.isolated and rep.when == "call":
            text, dropped = impl.submission.take_output(concept)
            if rep.failed and (text or dropped):
                more = f"\n... ({dropped} more characters not kept)" if dropped else ""
                rec["output"] = (text + more)[-OUTPUT_LIMIT - 200:]
                rep.sections.append(("inferspec: the submission printed", rec["output"]))
        rep.user_properties.append((report.KEY, rec))
        return rep

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        """A submission's Hypothesis test runs each example through :func:`stateful.watch_examples`
        (Hypothesis' documented ``.hypothesis.inner_test`` hook), so the clock knows which examples
        failed; the spec's state machines do the same through ``stateful.run_as_test``. Under
        ``--test-deadline S`` the call runs under :func:`test_deadline`."""
        seconds = self.config.getoption("test_deadline", None)
        with test_deadline(seconds) if seconds else contextlib.nullcontext():
            impl = impl_obj(item)
            handle = getattr(getattr(item, "obj", None), "hypothesis", None)
            if impl is None or not impl.isolated or not hasattr(handle, "inner_test"):
                return (yield)
            inner = handle.inner_test
            handle.inner_test = stateful.watch_examples(inner)
            try:
                return (yield)
            finally:
                handle.inner_test = inner

    def pytest_runtest_logreport(self, report) -> None:
        self.config.stash[RESULTS].record(report)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        concept, impl = concept_of(item), impl_obj(item)
        if self.config.getoption("first_failure_per_concept"):
            cell = self.config.stash[RESULTS].cells.get((concept, impl_of(item)))
            if cell is not None and (cell.failed or cell.verdict):
                pytest.skip("this concept already failed for this implementation")
        if impl is not None and impl.isolated:
            died = impl.submission.verdict(concept)
            if died is not None:
                raise NotRun(f"not run: {died.verdict} in {died.test.split('::')[-1]}")
            CLOCK.begin(item.nodeid, call_timeout_s(self.config), budget_s(self.config))
        if impl is not None and concept in CONCEPTS:
            self._check_signatures(getattr(impl, "implementation", impl), concept)

    def _check_signatures(self, impl: Implementation, concept: str) -> None:
        """Before a cell's first test: every contract name the implementation provides accepts
        every call the contract allows (``conformance/signatures.py``). If not, that test fails with
        the one-line verdict and the cell's other tests are not run."""
        key = (impl.name, concept)
        seen = self.config.stash.setdefault(SIGNATURES, {})
        if key not in seen:
            seen[key] = None
            if impl.name != "reference":
                contract, wanted = signatures.contract_shapes(CONCEPTS[concept])
                if impl.submission is not None:
                    impl.submission.name = impl.name
                    was, CLOCK.logging = CLOCK.logging, True  # the harness' own look: not in the call log
                    try:
                        got = impl.submission.call_in_process(concept, signatures.shapes, (wanted,), {})
                    finally:
                        CLOCK.logging = was
                else:
                    got = signatures.shapes(impl, wanted)
                found = signatures.problems(contract, got)
                if found:
                    seen[key] = "reported"
                    raise WrongSignature(found)
        elif seen[key] is not None:
            raise NotRun(f"not run: wrong signature ({concept})")

    def pytest_runtest_logfinish(self, nodeid, location) -> None:
        CLOCK.end()

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config: pytest.Config) -> None:
        results = config.stash.get(RESULTS, None)
        if results is None or hasattr(config, "workerinput"):  # an xdist worker: the controller reports
            return
        path = config.getoption("report_json")
        if path:
            results.write_json(path)
        if not config.getoption("no_report") and results.any():
            report.print_table(results, terminalreporter)
