"""The suite's own power: every planted bug of every concept's ``spec_tests/X/mutants.py`` must be
caught by its own concept, in one pytest run over all mutants (derandomized, profile
``mutants``), and every concept must have at least three. The full run happens in CI (``ci``
profile), ``thorough`` and with ``--run-slow``; the default ``dev`` loop skips it."""
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


def _groups(n: int) -> list[list[str]]:
    """Concepts split into n groups of about equal mutant counts (one process per group)."""
    counts: dict[str, int] = {}
    for cid, _ in ALL:
        counts[cid] = counts.get(cid, 0) + 1
    groups: list[list[str]] = [[] for _ in range(n)]
    load = [0] * n
    for cid in sorted(counts, key=counts.get, reverse=True):
        i = load.index(min(load))
        groups[i].append(cid)
        load[i] += counts[cid]
    return [g for g in groups if g]


@pytest.fixture(scope="module")
def mutant_report(tmp_path_factory, request) -> dict:
    """One derandomized pytest run per group of concepts, the groups in parallel (one per CPU,
    at most 4), each with every mutant of its concepts as an --impl; the JSON reports merged.

    It costs about 8 minutes of a 2-core machine for the ~200 mutants, so it runs under the `ci`
    profile (CI gates every landing on it), under `thorough` and with --run-slow; the quick `dev`
    loop skips it (run one concept's mutants by hand: docs/suite-power.md)."""
    from hypothesis import settings
    if settings.get_current_profile_name() == "dev" and not request.config.getoption("run_slow"):
        pytest.skip("the mutant power run: under the ci and thorough profiles and with --run-slow")
    tmp = tmp_path_factory.mktemp("mutants")
    env = {**os.environ, "INFERSPEC_PROFILE": "mutants"}
    env.pop("INFERSPEC_IMPL", None)
    procs = []
    for i, group in enumerate(_groups(max(1, min(4, os.cpu_count() or 1)))):
        out = tmp / f"report{i}.json"
        cmd = [sys.executable, "-m", "pytest", str(SPEC_DIR), "-q", "-p", "no:cacheprovider",
               "--hypothesis-profile=mutants", "--no-report", "--first-failure-per-concept",
               "--report-json", str(out), "--concept", ",".join(group)]
        for cid, m in ALL:
            if cid in group:
                cmd += ["--impl", mutants.spec(cid, m.name)]
        procs.append((out, subprocess.Popen(cmd, cwd=SPEC_DIR.parent, stdout=subprocess.PIPE,
                                            stderr=subprocess.STDOUT, text=True, env=env)))
    merged: dict = {"concepts": {}}
    for out, proc in procs:
        log, _ = proc.communicate(timeout=3000)
        if not out.exists():
            pytest.fail(f"mutant run wrote no report (exit {proc.returncode}):\n{log[-6000:]}")
        for cid, row in json.loads(out.read_text())["concepts"].items():
            merged["concepts"].setdefault(cid, {}).update(row)
    return merged


@pytest.mark.timeout(3600)  # the fixture runs every mutant of every concept (minutes on 2 cores)
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
