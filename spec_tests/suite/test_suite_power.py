"""The suite's own power: every planted bug of every concept's ``spec_tests/X/mutants.py`` must be
caught by its own concept, in one pytest run over all mutants (derandomized, profile
``mutants``), and every concept must have at least three."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance import mutants
from conformance.registry import CONCEPTS, MIN_MUTANTS, SPEC_DIR

pytestmark = pytest.mark.meta
ALL = mutants.all_mutants()


@pytest.fixture(scope="module")
def mutant_report(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("mutants") / "report.json"
    targets = sorted({cid for cid, _ in ALL})
    cmd = [sys.executable, "-m", "pytest", str(SPEC_DIR), "-q", "-p", "no:cacheprovider",
           "--hypothesis-profile=mutants", "--no-report", "--first-failure-per-concept",
           "--report-json", str(out), "--concept", ",".join(targets)]
    for cid, m in ALL:
        cmd += ["--impl", mutants.spec(cid, m.name)]
    env = {**os.environ, "INFERSPEC_PROFILE": "mutants"}
    env.pop("INFERSPEC_IMPL", None)
    proc = subprocess.run(cmd, cwd=SPEC_DIR.parent, capture_output=True, text=True, env=env, timeout=1800)
    if not out.exists():
        pytest.fail(f"mutant run wrote no report (exit {proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return json.loads(out.read_text())


@pytest.mark.parametrize("cid,mutant", ALL, ids=[mutants.impl_id(c, m.name) for c, m in ALL])
def test_mutant_is_caught(mutant_report, cid, mutant):
    column = mutants.impl_id(cid, mutant.name)
    cell = mutant_report["concepts"].get(cid, {}).get(column)
    assert cell is not None, f"{column}: no test of concept {cid!r} ran against it"
    assert cell["status"] == "failed", (
        f"{column} (planted in {cid}: {mutant.doc}) was NOT caught: {cell['passed']} tests passed, "
        f"not implemented {cell['not_implemented']}")


@pytest.mark.parametrize("cid", list(CONCEPTS))
def test_every_concept_has_mutants(cid):
    assert len(mutants.table(cid)) >= MIN_MUTANTS


def test_patches_apply_exactly_once():
    """Every source patch still matches its file exactly once (else the mutant is stale)."""
    for cid, m in ALL:
        if isinstance(m, mutants.Patch):
            mutants.patched_source(m)
