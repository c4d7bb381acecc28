"""`inferspec check`'s run: a live progress row per concept, pytest's output in a log, test
processes and profiles; a submission that does not import (its own file and line, nothing of the
harness); `inferspec flakes`' seeds and its reading of the JUnit report; the
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
    assert "kv_bytes / kv_bytes__missing_factor_two: FAILED" in r.stdout and "the rule: " in r.stdout, r.stdout[-2000:]
    assert "reproduce:" in r.stdout and re.search(r"\d+ failed", r.stdout)
    # a submission is checked with the dev profile (the bundled check alone uses quick)
    assert "profile dev" in r.stdout or "profile ci" in r.stdout


def test_check_unknown_concept_is_a_usage_error_found_before_pytest():
    """Exit 2 like grade's (not pytest's undocumented 4), the closest id, the known ids; pytest
    never starts (its first line, "against the spec", is not printed)."""
    r = _run(["-m", "conformance", "check", "--concept", "kv_bytes,radx"])
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-2000:]
    assert "inferspec check: unknown concept 'radx' (did you mean radix?)" in r.stderr
    assert "known concepts: " in r.stderr and "against the spec" not in r.stdout


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


# ---------------------------------------------------------------- a submission that does not import
IMPORT_FAILURES = {
    "syntax error": ("import math\n\n\ndef kv_cache_bytes(*, layers, kv_heads):\n    return layers * (kv_heads\n",
                     5, "return layers * (kv_heads", "SyntaxError: '(' was never closed"),
    "missing module": ("import math\nimport numpyy\n", 2, "import numpyy", "ModuleNotFoundError: No module named 'numpyy'"),
    "raised at import": ("import math\n\n\ndef _table():\n    raise RuntimeError('no table')\n\n\nTABLE = _table()\n",
                         5, "raise RuntimeError('no table')", "RuntimeError: no table"),
}


def _check_submission(folder: Path, source: str, *extra: str) -> subprocess.CompletedProcess:
    import os
    (folder / "my_impl.py").write_text(source)
    return subprocess.run([sys.executable, "-m", "conformance", "check", "my_impl.py", "--concept", "kv_bytes",
                           *extra], cwd=folder, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def _assert_shows_the_students_line(out: str, line: int, code: str, exc_line: str) -> None:
    assert f"my_impl.py:{line})" in out, out[-3000:]          # the verdict names file:line
    assert re.search(rf'File ".*my_impl\.py", line {line}', out), out[-3000:]
    assert code in out and exc_line in out, out[-3000:]
    assert not re.search(r'File "[^"]*conformance/', out), out[-3000:]   # nothing of the harness
    assert "<frozen importlib" not in out and "Traceback" not in out, out[-3000:]


@pytest.mark.parametrize("case", list(IMPORT_FAILURES))
def test_an_import_failure_shows_the_students_file_and_line_not_the_harness(tmp_path, case):
    source, line, code, exc_line = IMPORT_FAILURES[case]
    r = _check_submission(tmp_path, source)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out[-3000:]
    assert "import failed" in out
    _assert_shows_the_students_line(out, line, code, exc_line)
    if case == "syntax error":   # the offending line, then a caret under the error
        lines = out.splitlines()
        at = next(i for i, ln in enumerate(lines) if ln.strip() == code)
        assert lines[at + 1].strip().startswith("^"), lines[at:at + 3]


def test_an_import_failure_in_process_is_a_usage_error_that_shows_the_students_line(tmp_path):
    source, line, code, exc_line = IMPORT_FAILURES["raised at import"]
    r = _check_submission(tmp_path, source, "--in-process")
    out = r.stdout + r.stderr
    assert r.returncode == 2 and "INTERNALERROR" not in out, out[-3000:]
    _assert_shows_the_students_line(out, line, code, exc_line)


def test_import_failure_names_the_deepest_frame_in_the_submissions_own_files(tmp_path, monkeypatch):
    """A sibling module the submission imports is its own code; torch's frames below it are not."""
    from conformance import implementation
    monkeypatch.setattr(sys, "path", list(sys.path))   # import_path puts the file's folder first
    (tmp_path / "helper.py").write_text("import torch\n\n\ndef zeros():\n    return torch.zeros(-1)\n\n\nZ = zeros()\n")
    (tmp_path / "my_impl.py").write_text("import math\nfrom helper import Z\n")
    with pytest.raises(Exception) as info:
        implementation.import_path(tmp_path / "my_impl.py")
    sys.modules.pop("helper", None)
    summary, detail = implementation.describe_import_failure(info.value, (tmp_path / "my_impl.py").resolve())
    assert summary.startswith("RuntimeError:") and summary.endswith("(helper.py:5)"), summary
    assert detail.splitlines()[:2] == [f'  File "{tmp_path.resolve() / "helper.py"}", line 5, in zeros',
                                       "    return torch.zeros(-1)"], detail
    assert "torch/" not in detail and "conformance/" not in detail
