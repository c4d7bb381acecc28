"""The suite's own power: every planted bug in conformance/mutants/ must be caught by the concept
it targets, in one pytest run over all mutants (derandomized, profile ``mutants``)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.mutants import mutant_files, target_of

pytestmark = pytest.mark.meta
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def mutant_report(tmp_path_factory) -> dict:
    files = mutant_files()
    out = tmp_path_factory.mktemp("mutants") / "report.json"
    targets = sorted({target_of(f) for f in files})
    cmd = [sys.executable, "-m", "pytest", str(ROOT / "spec_tests"), "-q", "-p", "no:cacheprovider",
           "--hypothesis-profile=mutants", "--no-report", "--first-failure-per-concept", "--report-json", str(out),
           "--concept", ",".join(targets),
           "--ignore", str(ROOT / "spec_tests" / "test_suite_power.py"), "--ignore", str(ROOT / "spec_tests" / "bench")]
    for f in files:
        cmd += ["--impl", str(f)]
    env = {**os.environ, "INFERSPEC_PROFILE": "mutants"}
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env, timeout=1800)
    if not out.exists():
        pytest.fail(f"mutant run wrote no report (exit {proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return json.loads(out.read_text())


@pytest.mark.parametrize("mutant", mutant_files(), ids=lambda p: p.stem)
def test_mutant_is_caught(mutant_report, mutant):
    target = target_of(mutant)
    cell = mutant_report["concepts"].get(target, {}).get(mutant.stem)
    assert cell is not None, f"{mutant.stem}: no test of concept {target!r} ran against it"
    assert cell["status"] == "failed", (
        f"{mutant.stem} (planted in {target}) was NOT caught: {cell['passed']} tests passed, "
        f"not implemented {cell['not_implemented']}")


def test_every_concept_with_tests_has_a_mutant():
    targets = {target_of(f) for f in mutant_files()}
    tested = set()
    for path in (ROOT / "spec_tests").glob("test_*.py"):
        tested.update(re.findall(r'^pytestmark = pytest\.mark\.concept\("([a-z_]+)"\)', path.read_text(), re.M))
    assert tested - targets == set(), f"concepts without a mutant: {sorted(tested - targets)}"
