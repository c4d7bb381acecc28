"""The third-party "must pass" check of `attention`: PyTorch's own
``torch.nn.functional.scaled_dot_product_attention``, wrapped in third_party.py, must pass this
concept's whole spec (a failure is a false alarm of the suite, or a bug in PyTorch). Runs the spec
in a subprocess under the current Hypothesis profile (natively on a GPU when there is one);
skipped when the run checks a submission (``--impl``), so that run (and the mutant power run)
never spends time on it, and it never recurses. Nothing is deselected. It costs about 5 s of CPU
(8-12 s wall) on the 2-core box, most of it the subprocess's start, so the default ``dev`` run
skips it; CI (the ``ci`` profile), ``thorough`` and ``--run-slow`` run it. On a GPU run the
isolated submission needs ``INFERSPEC_ZYGOTE=spawn`` (a forked worker cannot use CUDA)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

CONCEPT = "attention"
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def test_third_party_passes(request, tmp_path):
    if request.config.getoption("impl") or os.environ.get("INFERSPEC_IMPL"):
        pytest.skip("checks the bundled third-party submission only when no --impl is given")
    if settings.get_current_profile_name() == "dev" and not request.config.getoption("run_slow"):
        pytest.skip("torch SDPA runs the whole attention spec in a subprocess (~5 s of CPU): under "
                    "the ci and thorough profiles and with --run-slow, not in dev")
    out = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "pytest", str(HERE), "-q", "-p", "no:cacheprovider", "--no-report",
           "--impl", str(HERE / "third_party.py"), "--concept", CONCEPT, "--report-json", str(out),
           f"--hypothesis-profile={settings.get_current_profile_name()}"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert out.exists(), f"no report (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    cell = json.loads(out.read_text())["concepts"].get(CONCEPT, {}).get("third_party")
    assert cell is not None and cell["status"] == "passed" and proc.returncode == 0, (
        f"torch SDPA (spec_tests/{CONCEPT}/third_party.py) must pass the {CONCEPT} spec; "
        f"{json.dumps(cell, indent=1)}\n{proc.stdout[-3000:]}")
