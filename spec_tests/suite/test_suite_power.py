"""The suite's own power: every planted bug of every concept's ``spec_tests/X/mutants.py`` must be
caught by its own concept, in one pytest run over all mutants (derandomized, profile
``mutants``), and every concept must have at least three. Each catch must be the bug's: the test
that failed the mutant passes for its control (the same construction without the bug, run the
same way) and the failure is not a harness error (conformance/power.py). The full run happens in
CI (``ci`` profile), ``thorough`` and with ``--run-slow``; the default ``dev`` loop skips it and
runs one mutant's control end to end instead."""
from __future__ import annotations

import pytest

from conformance import mutants, power
from conformance.registry import CONCEPTS, MIN_MUTANTS

pytestmark = pytest.mark.meta
ALL = mutants.all_mutants()


@pytest.fixture(scope="module")
def mutant_report(tmp_path_factory, request) -> dict:
    """One derandomized pytest run per group of concepts, the groups in parallel (one per CPU,
    at most 4), each with every mutant of its concepts as an --impl; the JSON reports merged. The
    explicit examples run first, alone, and the mutants they miss then under the whole profile
    (power.run's ``explicit_first``: the same verdicts, a fraction of the time).

    It costs about 10 minutes of an idle 2-core machine for the 612 mutants (docs/suite-power.md),
    so it runs under the `ci`
    profile (CI gates every landing on it), under `thorough` and with --run-slow; the quick `dev`
    loop skips it (run one concept's mutants by hand: docs/suite-power.md)."""
    from hypothesis import settings
    if settings.get_current_profile_name() == "dev" and not request.config.getoption("run_slow"):
        pytest.skip("the mutant power run: under the ci and thorough profiles and with --run-slow")
    try:
        return power.run(ALL, profile="mutants", tmp=tmp_path_factory.mktemp("mutants"), explicit_first=True)
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.mark.timeout(3600)  # the fixture runs every mutant of every concept (minutes on 2 cores)
@pytest.mark.parametrize("cid,mutant", ALL, ids=[mutants.impl_id(c, m.name) for c, m in ALL])
def test_mutant_is_caught(mutant_report, cid, mutant):
    column = mutants.impl_id(cid, mutant.name)
    cell = mutant_report["concepts"].get(cid, {}).get(column)
    assert cell is not None, f"{column}: no test of concept {cid!r} ran against it"
    assert cell["status"] == "failed", (
        f"{column} (planted in {cid}: {mutant.doc}) was NOT caught: {cell['passed']} tests passed, "
        f"not implemented {cell['not_implemented']}")


@pytest.mark.timeout(3600)
@pytest.mark.parametrize("cid,mutant", ALL, ids=[mutants.impl_id(c, m.name) for c, m in ALL])
def test_mutant_is_caught_by_its_bug(mutant_report, cid, mutant):
    """The control: the test that caught the mutant passes for the same construction without the
    bug (``control:<concept>.<name>``), and the mutant's failure is not a harness error."""
    column = mutants.impl_id(cid, mutant.name)
    cell = mutant_report["concepts"].get(cid, {}).get(column)
    if cell is None or cell["status"] != "failed":
        pytest.skip("not caught (test_mutant_is_caught reports it)")
    ok, why = power.control_verdict(mutant_report, cid, mutant.name)
    assert ok, f"{column} (planted in {cid}: {mutant.doc}) was caught, but not by its bug: {why}"


@pytest.mark.heavy
def test_a_control_runs_end_to_end(tmp_path):
    """Two mutants through the real machinery (in every run), explicit examples first: one is caught
    by an explicit example, the other only by the generated ones; each one's failing test is run
    for its control, which passes; a failed control, a control that did not run and a harness
    error are each reported."""
    m = next(m for m in mutants.table("kv_bytes"))
    late = next(m for m in mutants.table("kv_bytes") if m.name == "append_returns_whole_buffer")
    report = power.run([("kv_bytes", m), ("kv_bytes", late)], profile="mutants", tmp=tmp_path, jobs=1,
                       explicit_first=True)
    # explicit_first: an explicit example catches the first; only the generated ones catch the other
    assert report["caught_by_explicit"] == [mutants.impl_id("kv_bytes", m.name)], report["caught_by_explicit"]
    for mm in (m, late):
        assert power.verdict(report, "kv_bytes", mm.name)[0], report
        ok, where = power.control_verdict(report, "kv_bytes", mm.name)
        assert ok and mutants.control_id("kv_bytes", mm.name) in where, where
    failed = {**report, "controls": {k: {**v, "status": "failed"} for k, v in report["controls"].items()}}
    ok, why = power.control_verdict(failed, "kv_bytes", m.name)
    assert not ok and why.startswith("the control (without the bug) failed"), why
    assert power.control_verdict({**report, "controls": {}}, "kv_bytes", m.name) == (False, "no control ran")
    column = mutants.impl_id("kv_bytes", m.name)
    died = {**report, "concepts": {"kv_bytes": {column: {**report["concepts"]["kv_bytes"][column],
                                                         "verdict_kind": "crashed", "verdict": "crashed (signal 11)"}}}}
    assert power.control_verdict(died, "kv_bytes", m.name)[1].startswith("harness error: crashed")
    proxy = {"first_failure": {"error": "conformance.wire.ProtocolError: unknown handle 7"}}
    assert power.harness_error(proxy).startswith("conformance.wire.ProtocolError")
    assert power.harness_error({"first_failure": {"error": "AssertionError: wrong tokens"}}) is None


def test_control_nodeid_swaps_only_the_mutant_parameter():
    nodeid = "spec_tests/x/test_x.py::test_y[attention__top_left_causal-p in (0-1]]"
    assert power.control_nodeid(nodeid, "attention", "top_left_causal") == \
        "spec_tests/x/test_x.py::test_y[attention__top_left_causal__unmutated-p in (0-1]]"


@pytest.mark.parametrize("cid", list(CONCEPTS))
def test_every_concept_has_mutants(cid):
    assert len(mutants.table(cid)) >= MIN_MUTANTS


def test_patches_apply_exactly_once():
    """Every source patch still matches its file exactly once (else the mutant is stale)."""
    for cid, m in ALL:
        if isinstance(m, mutants.Patch):
            mutants.patched_source(m)


def test_a_looping_hypothesis_test_is_stopped_by_the_test_deadline():
    """A mechanical variant that loops forever (a ``break`` made ``continue``) must cost one test of
    its in-process chunk. pytest-timeout cannot do it: the ``Failed`` it raises is caught by
    Hypothesis as a failing example, which it then replays to shrink, with no alarm left (the chunk
    hangs until the process deadline). ``--test-deadline`` raises a BaseException, which Hypothesis
    lets through, and again every second after."""
    import time

    from hypothesis import given, settings, strategies as st

    from conformance.plugin import TestDeadline, test_deadline

    @settings(deadline=None, max_examples=50, database=None, derandomize=True)
    @given(st.integers(0, 100))
    def loops(x):
        while x > 50:
            try:
                time.sleep(0.01)
            except Exception:   # noqa: BLE001 -- code under test that swallows errors
                pass

    start = time.monotonic()
    with pytest.raises(TestDeadline, match="Timeout >1s"):
        with test_deadline(1.0):
            loops()
    assert time.monotonic() - start < 20


def test_in_process_mechanical_chunks_run_under_the_test_deadline(tmp_path):
    from conformance import mechanical
    m = next(m for c, m in power.mechanical_selection(["cost"], "reference", None, 0) if m.name.startswith(mechanical.PREFIX))
    args = power._chunk_args([("cost", m)], tmp_path, isolate=False)
    assert args[args.index("--test-deadline") + 1] == str(power.IN_PROCESS_TEST_TIMEOUT_S)
    assert args[args.index("--timeout") + 1] == "0"   # pytest-timeout's SIGALRM would replace ours
