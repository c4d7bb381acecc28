"""The third-party "must pass" check of `sampling`: transformers' logits processors and warpers,
wrapped in third_party.py, must pass this concept's spec on every test whose inputs transformers
can express (a failure is a false alarm of the suite, or a bug in transformers). Runs the spec in
a subprocess under the current Hypothesis profile; skipped when the run checks a submission
(``--impl``), so that run (and the mutant power run) never spends time on it, and it never
recurses. Marked ``slow`` (about 11 s of CPU on the 2-core machine, as much as the rest of the
concept's default run): it runs with ``--run-slow`` and under the thorough profile.

Left out (``DESELECT``), each for a documented difference of transformers, not for a failure of
unknown cause:

- ``test_probs_match_brute_force_with_ties``, ``test_vocab_permutation_permutes_probs``,
  ``test_sample_with_uniforms_induces_probs_exactly``, ``test_structure_matches_brute_force``,
  ``test_inputs_not_mutated_and_fresh_results`` (its "fresh result" check compares supports with
  the reference's on tied logits),
  ``test_large_vocab_matches_brute_force[...integer...]``, the chi-square case "top-p over tie
  groups" and the pinned cases "... tie group ...": their inputs have exact ties at the top-p
  boundary (small-integer or float16/bfloat16 logits), where ``TopPLogitsWarper`` splits a tie
  group by sort order and the contract keeps or drops it whole (its documented tie rule).
  (``test_probs_match_brute_force`` is the tie-free half of the brute-force property and runs.)
- the pinned case "a temperature just above 0 does not overflow": ``TemperatureLogitsWarper``
  divides the raw logits, and 8 / 2e-38 overflows float32 (the contract's (x - max) / T cannot).
- ``test_matches_transformers_warpers``: it compares an implementation with transformers itself.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

CONCEPT = "sampling"
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
DESELECT = ("with_ties", "permutes_probs", "induces_probs", "structure_matches", "fresh_results",
            "transformers_warpers",
            "(large_vocab and integer)", "(chi_square and group)", "(pinned and group)", "(pinned and overflow)")
SELECT = " and ".join(f"not {d}" for d in DESELECT)


@pytest.mark.slow
def test_third_party_passes(request, tmp_path):
    if request.config.getoption("impl") or os.environ.get("INFERSPEC_IMPL"):
        pytest.skip("checks the bundled third-party submission only when no --impl is given")
    pytest.importorskip("transformers")
    out = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "pytest", str(HERE), "-q", "-p", "no:cacheprovider", "--no-report",
           "--impl", str(HERE / "third_party.py"), "--concept", CONCEPT, "--report-json", str(out),
           "-k", SELECT, f"--hypothesis-profile={settings.get_current_profile_name()}"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert out.exists(), f"no report (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    cell = json.loads(out.read_text())["concepts"].get(CONCEPT, {}).get("third_party")
    assert cell is not None and cell["status"] == "passed" and proc.returncode == 0, (
        f"transformers' warpers (spec_tests/{CONCEPT}/third_party.py) must pass the {CONCEPT} spec "
        f"(-k {SELECT!r}); {json.dumps(cell, indent=1)}\n{proc.stdout[-3000:]}")
