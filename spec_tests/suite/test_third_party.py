"""The third-party "must pass" set: every ``spec_tests/<concept>/third_party.py`` wraps a correct
implementation from another library (torch SDPA, transformers' LlamaForCausalLM, StaticCache and
logits warpers, numpy) as a submission, and that concept's whole spec must pass against it. A
failure is a false alarm of the suite (or a bug in the library) and fails the build.

Each runs as a real submission (isolated, in a subprocess) under the current Hypothesis profile.
A ``third_party.py`` may declare ``SPEC_DESELECT = ("name fragment", ...)``: tests whose inputs the
library cannot express (each documented in that file), deselected with ``-k``. The set runs under
the ``ci`` profile (CI), ``thorough`` and ``--run-slow``; the default ``dev`` run skips it (about a
minute of the 2-core machine), and a run that checks a submission (``--impl``) never starts it.
"""
from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys

import pytest
from hypothesis import settings

from conformance.registry import CONCEPTS, ROOT, SPEC_DIR
from conformance.upstream import Unavailable, locate

pytestmark = pytest.mark.meta
# (concept, adapter file): third_party.py wraps a library; third_party_<engine>.py an engine whose
# code is fetched (UPSTREAM, conformance/upstream.py), never copied here
ADAPTERS = [(cid, path.name) for cid in CONCEPTS for path in sorted((SPEC_DIR / cid).glob("third_party*.py"))]
THIRD_PARTY = sorted({cid for cid, _ in ADAPTERS})


def _declared(path, name: str, default=()):
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    return default


def test_the_set_covers_the_concepts_the_issue_names():
    assert {"attention", "model", "sampling"} <= set(THIRD_PARTY), THIRD_PARTY


@pytest.mark.timeout(3600)   # a thorough subprocess run takes 10-20 min on a 2-core CPU
@pytest.mark.parametrize("cid,adapter", ADAPTERS, ids=[f"{c}-{a[:-3]}" for c, a in ADAPTERS])
def test_third_party_passes(request, tmp_path, cid, adapter):
    """The adapter passes the law of its concept (it declares no TOKEN_EXACT: the reference's
    choices are told, not enforced)."""
    if request.config.getoption("impl") or os.environ.get("INFERSPEC_IMPL"):
        pytest.skip("the third-party set runs only when no --impl is given")
    profile = settings.get_current_profile_name()
    if profile == "dev" and not request.config.getoption("run_slow"):
        pytest.skip("third-party set: under the ci and thorough profiles and with --run-slow")
    path = SPEC_DIR / cid / adapter
    upstream = _declared(path, "UPSTREAM", None)
    if upstream is not None:
        repo, commit, files = upstream
        try:
            locate(repo, commit, files)
        except Unavailable as exc:
            pytest.skip(f"{adapter}: {exc}")
    # REQUIRES = ("module", ...): a library adapter whose library is not installed is skipped
    absent = [m for m in _declared(path, "REQUIRES") if importlib.util.find_spec(m) is None]
    if absent:
        pytest.skip(f"{adapter}: {', '.join(absent)} not installed (the test extras)")
    out = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "pytest", str(SPEC_DIR / cid), "-q", "-p", "no:cacheprovider",
           "--no-report", "--impl", str(path), "--concept", cid, "--report-json", str(out),
           f"--hypothesis-profile={profile}"]
    deselect = _declared(path, "SPEC_DESELECT")
    if deselect:
        cmd += ["-k", " and ".join(f"not {d}" for d in deselect)]
    env = {k: v for k, v in os.environ.items() if k != "INFERSPEC_IMPL"}
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=3500, env=env)
    assert out.exists(), f"no report (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    cell = json.loads(out.read_text())["concepts"].get(cid, {}).get(path.stem)
    # "partial": the engine lacks some of the contract's names (each adapter's docstring says
    # which); what it has must pass the law
    assert cell is not None and cell["status"] in ("passed", "partial") and proc.returncode == 0, (
        f"spec_tests/{cid}/{adapter} must pass the law of the {cid} spec; "
        f"{json.dumps(cell, indent=1)}\n{proc.stdout[-3000:]}")
