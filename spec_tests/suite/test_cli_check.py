"""`inferspec check`'s run: a live progress row per concept, pytest's output in a log, test
processes and profiles; `inferspec flakes`' seeds and its reading of the JUnit report; the
`heavy` marker (CI and --run-slow only)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from conformance import flakes

pytestmark = pytest.mark.meta
ROOT = Path(__file__).resolve().parents[2]


def _run(args, timeout=600, env=None):
    import os
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.heavy
def test_check_shows_progress_per_concept_then_the_table_and_a_log(jobs):
    r = _run(["-m", "conformance", "check", "--concept", "kv_bytes,eviction", "--jobs", jobs])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = r.stdout
    assert f"profile quick, {jobs} process" in out
    for concept in ("kv_bytes", "eviction"):       # a finished progress row: done == collected
        row = re.search(rf"^{concept}\s.*?(\d+)/(\d+)", out, re.M)
        assert row and row.group(1) == row.group(2) and int(row.group(1)) > 0, out
    assert "per-concept verdict" in out and "passed (" in out
    log = re.search(r"pytest's log: (\S+)\)", out)
    assert log and Path(log.group(1)).exists() and "passed" in Path(log.group(1)).read_text()
    assert re.search(r"^\d+ passed, \d+ skipped in [\d.]+ s", out, re.M), out


@pytest.mark.heavy
def test_check_of_a_bug_fails_and_names_it():
    r = _run(["-m", "conformance", "check", "mutant:kv_bytes.missing_factor_two", "--concept", "kv_bytes"])
    assert r.returncode == 1, r.stdout[-2000:]
    assert "first failure" in r.stdout and "reproduce:" in r.stdout and re.search(r"\d+ failed", r.stdout)
    # a submission is checked with the dev profile (the bundled check alone uses quick)
    assert "profile dev" in r.stdout or "profile ci" in r.stdout


def test_check_usage_error_shows_pytests_message():
    r = _run(["-m", "conformance", "check", "--concept", "no_such_concept"])
    assert r.returncode != 0
    assert "no_such_concept" in r.stdout + r.stderr


def test_flakes_reads_failures_from_junit(tmp_path):
    junit = tmp_path / "j.xml"
    junit.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="spec_tests.a.test_a" name="test_ok" file="spec_tests/a/test_a.py"/>'
        '<testcase classname="spec_tests.a.test_a" name="test_bad[reference]" file="spec_tests/a/test_a.py">'
        '<failure message="AssertionError: 1 != 2&#10;more">trace</failure></testcase>'
        '<testcase classname="spec_tests.a.test_a" name="test_skip"><skipped message="s"/></testcase>'
        '</testsuite></testsuites>')
    ran, failed = flakes._failures(junit)
    assert ran == 3
    assert failed == [("spec_tests/a/test_a.py::test_bad[reference]", "AssertionError: 1 != 2")]


@pytest.mark.heavy
def test_flakes_prints_its_seeds_and_passes_on_a_correct_concept():
    r = _run(["-m", "conformance", "flakes", "--seeds", "7,8", "--jobs", "2", "--concept", "kv_bytes"])
    assert r.returncode == 0, r.stdout[-3000:]
    assert "seeds 7,8" in r.stdout and "2/2 seeds passed" in r.stdout
    assert re.search(r"^\s+7\s+\d+\s+0\s", r.stdout, re.M), r.stdout


def test_heavy_tests_skip_in_the_dev_run_and_run_in_ci():
    """--setup-plan applies the skip marks without running the (20 s) test."""
    test = "spec_tests/suite/test_registry.py::test_adding_a_concept_touches_only_its_own_files"
    for extra, skipped in ((["--hypothesis-profile=dev"], True), (["--hypothesis-profile=ci"], False),
                           (["--hypothesis-profile=thorough"], False), (["--hypothesis-profile=dev", "--run-slow"], False)):
        r = _run(["-m", "pytest", test, "--setup-plan", "-q", "-rs", "-p", "no:cacheprovider", *extra])
        assert r.returncode == 0, r.stdout[-2000:]
        assert ("heavy: runs in CI" in r.stdout) == skipped, (extra, r.stdout[-2000:])
