"""The student's loop: a failing check names the broken rule, its reproduce line replays
the same example from any folder, a slow but correct submission never times out, and
``pytest --impl`` works from the student's own folder.

Each test runs ``inferspec check`` (or pytest) on a small submission in a subprocess, as a student
would, from a folder of its own.
"""
from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance.clock import BudgetSpent, Clock

pytestmark = pytest.mark.meta
ROOT = Path(__file__).resolve().parents[2]


def _env(tmp_path: Path, **extra) -> dict:
    # a private cache (Hypothesis, pytest-benchmark), the dev profile whatever CI says
    return {**os.environ, "INFERSPEC_PROFILE": "dev", "INFERSPEC_CACHE": str(tmp_path / "cache"),
            "INFERSPEC_SEED": "", **extra}


def _check(args: list[str], cwd: Path, env: dict, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "conformance", "check", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _cell(report: Path, concept: str) -> dict:
    return next(iter(json.loads(report.read_text())["concepts"][concept].values()))


# A kv_bytes submission whose bug needs a drawn input (an odd seq_len over 1000), so only a
# generated example finds it.
KV_BUG = (ROOT / "reference" / "kv_bytes.py").read_text() + '''

_kv_cache_bytes = kv_cache_bytes


def kv_cache_bytes(*, layers, kv_heads, head_dim, seq_len, batch=1, dtype=None, **kw):
    import torch
    out = _kv_cache_bytes(layers=layers, kv_heads=kv_heads, head_dim=head_dim, seq_len=seq_len, batch=batch,
                          dtype=torch.float16 if dtype is None else dtype, **kw)
    return out - 1 if isinstance(seq_len, int) and seq_len > 1000 and seq_len % 2 else out
'''


def _falsifying(text: str) -> str:
    """The generated arguments of the failing example Hypothesis printed (pytest's "E " prefixes and
    the implementation's name removed)."""
    text = re.sub(r"^E {0,7}", "", text, flags=re.M)
    m = re.search(r"(?:Falsifying example|Failing test case): test_matches_course_formula\(.*?(cfg=\{.*?\}),"
                  r".*?(seq_len=\d+)", text, re.S)
    return re.sub(r"\s+", " ", " ".join(m.groups())) if m else ""


@pytest.mark.heavy
def test_the_reproduce_line_replays_the_same_example_from_another_folder(tmp_path):
    """The line carries the profile and the run's seed; pasted in another folder it fails on the very
    example the check printed. Neither folder gets .hypothesis/, .benchmarks/ or .pytest_cache/."""
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    (here / "my_kv.py").write_text(KV_BUG)
    report = here / "report.json"
    env = _env(tmp_path)
    r = _check(["my_kv.py", "--concept", "kv_bytes", "--report-json", str(report), "--",
                "-k", "matches_course_formula"], here, env)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    failure = _cell(report, "kv_bytes")["first_failure"]
    line = failure["reproduce"].splitlines()[0]
    assert "--hypothesis-seed=" in line and "--hypothesis-profile=dev" in line, line
    first = _falsifying(failure["example"])
    assert first, failure["example"]
    again = subprocess.run(shlex.split(line.replace("pytest ", f"{sys.executable} -m pytest ", 1)), cwd=there,
                           env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 1, again.stdout[-3000:]
    assert _falsifying(again.stdout) == first, (first, again.stdout[-3000:])
    for folder in (here, there):
        left = sorted(p.name for p in folder.iterdir() if p.name.startswith("."))
        assert not left, f"{folder.name} got {left}"


# The reference's radix cache, each call 20 ms slower: correct, and slow.
SLOW_RADIX = '''
import time
from reference import radix as _r
from reference.radix import *  # noqa: F401,F403

DELAY = 0.02


class RadixCache(_r.RadixCache):
    def insert(self, tokens, *a, **k):
        time.sleep(DELAY)
        return BUG(tokens, super().insert(tokens, *a, **k))

    def match_prefix(self, *a, **k):
        time.sleep(DELAY)
        return super().match_prefix(*a, **k)

    def evict(self, *a, **k):
        time.sleep(DELAY)
        return super().evict(*a, **k)


def BUG(tokens, cached):
    return cached
'''
# ... and a bug in what insert returns for keys of 3 tokens or more; once the bug has shown, every
# call takes 0.3 s more, so that Hypothesis' shrinking (which follows the first failure) outlasts any
# budget while the generation before it stays quick on any machine
SLOW_BUGGY_RADIX = SLOW_RADIX.replace("DELAY = 0.02", "DELAY = 0.0").replace(
    "def BUG(tokens, cached):\n    return cached",
    "def BUG(tokens, cached):\n    global DELAY\n    if len(tokens) >= 3:\n        DELAY = 0.3\n"
    "        return cached + 1\n    return cached")


@pytest.mark.heavy
def test_a_slow_correct_state_machine_passes_within_its_budget(tmp_path):
    """A correct submission too slow for the profile's examples is not 'timed out': the budget ends
    the state machine's generation and the test passes; the table says it was cut short."""
    (tmp_path / "slow_radix.py").write_text(SLOW_RADIX)
    report = tmp_path / "report.json"
    t0 = time.monotonic()
    r = _check(["slow_radix.py", "--concept", "radix", "--budget", "4", "--timeout", "5", "--report-json",
                str(report), "--", "-k", "state_machine and not token_exact"], tmp_path, _env(tmp_path))
    took = time.monotonic() - t0
    cell = _cell(report, "radix")
    assert r.returncode == 0 and cell["status"] == "passed", r.stdout[-3000:]
    assert cell["budget_stops"] == 1 and "cut short by the time budget" in cell["text"], cell
    assert took < 120, f"{took:.0f} s: the budget did not end the test"


@pytest.mark.heavy
def test_a_budget_that_ends_shrinking_still_shows_the_smallest_failing_example(tmp_path):
    """A buggy slow submission: Hypothesis finds the bug, the budget runs out while it shrinks, and the
    report still shows a failing example, as the calls made into the submission."""
    (tmp_path / "buggy_radix.py").write_text(SLOW_BUGGY_RADIX)
    report = tmp_path / "report.json"
    r = _check(["buggy_radix.py", "--concept", "radix", "--budget", "10", "--report-json", str(report), "--",
                "-k", "state_machine", "--hypothesis-seed=1"], tmp_path, _env(tmp_path))
    cell = _cell(report, "radix")
    assert r.returncode == 1 and cell["status"] == "failed", r.stdout[-3000:]
    f = cell["first_failure"]
    assert "ran out while Hypothesis was shrinking" in f["error"] and "insert(" in f["error"], f["error"]
    assert re.search(r"^radix_cache_1\.insert\(\[[^\n]*\)  # -> \d+$", f["calls"], re.M), f["calls"]
    assert "the calls into buggy_radix (the failing example), in order:" in r.stdout, r.stdout[-3000:]


@pytest.mark.heavy
def test_the_report_leads_with_the_rule_that_broke(tmp_path):
    """A radix whose parents never become eviction candidates (the optimized cache with the line
    that pushes them removed): the report leads with test_parents_join_the_candidates and its rule,
    the calls as a session, every other failing test in one line; no bad-input row fails."""
    src = (ROOT / "optimized" / "radix.py").read_text()
    line = "                    heappush(heap, (priority(parent), count, parent))\n"
    assert src.count(line) == 1
    (tmp_path / "parent_bug.py").write_text(src.replace(line, ""))
    report = tmp_path / "report.json"
    r = _check(["parent_bug.py", "--concept", "radix", "--report-json", str(report)], tmp_path, _env(tmp_path))
    cell = _cell(report, "radix")
    assert r.returncode == 1 and cell["status"] == "failed", r.stdout[-3000:]
    assert cell["first_failure"]["test"].endswith("test_parents_join_the_candidates[parent_bug]"), cell["first_failure"]
    assert "A parent left without children is a leaf" in cell["first_failure"]["rule"]
    assert "radix_cache_1.evict(4)  # -> [12, 22]" in cell["first_failure"]["calls"]
    assert not [x for x in cell["failing"] if "rejects_bad_input" in x["test"]], cell["failing"]
    out = r.stdout
    assert out.index("FAILED spec_tests/radix/test_radix.py::test_parents_join_the_candidates") < out.index(
        "more failing tests of radix"), out[-3000:]
    assert re.search(r"^    test_state_machine: ", out, re.M), out[-3000:]


def _entry_point_installed() -> bool:
    eps = importlib.metadata.entry_points(group="pytest11")
    return any(ep.value == "conformance.entry" for ep in eps)


@pytest.mark.heavy
@pytest.mark.skipif(not _entry_point_installed(), reason="inferspec is not installed (pip install -e .): "
                                                         "no pytest11 entry point to test")
def test_pytest_impl_works_from_the_students_folder(tmp_path):
    """`pytest --impl my_kv.py --concept kv_bytes` in a folder of the student's own: the installed
    entry point adds --impl and collects the installed spec; the folder stays clean."""
    (tmp_path / "my_kv.py").write_text((ROOT / "reference" / "kv_bytes.py").read_text())
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--impl", "my_kv.py",
                        "--concept", "kv_bytes"], cwd=tmp_path, env=_env(tmp_path), capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert re.search(r"\d+ passed", r.stdout) and "kv_bytes" in r.stdout and "my_kv" in r.stdout
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_an_unrelated_pytest_run_does_not_switch_the_plugin_on(tmp_path):
    """The entry point is inert outside inferspec runs: a test file elsewhere runs without the
    spec's plugin (no impl fixture, no report, no torch import by us)."""
    (tmp_path / "test_other.py").write_text("def test_x():\n    import sys\n    assert 'conformance.plugin' not in sys.modules\n")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "conformance.entry",
                        "test_other.py"], cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "per-concept verdict" not in r.stdout


def test_the_clock_rejects_nothing_before_one_example_ran():
    """The budget never ends a test before its first example ran to the end, and the smallest
    failing example is the one kept."""
    clock = Clock()
    clock.begin("t", call_timeout=1.0, budget=1e-9)
    clock.example, clock.examples = object(), 1  # the first example is running
    clock.calls = ["a = A()", "a.f(1)  # -> 2"]
    clock.example_failed(AssertionError("first"))
    clock.calls = ["a = A()"]
    clock.example_failed(AssertionError("smaller"))
    clock.calls = ["a = A()", "a.f(1)", "a.f(2)"]
    clock.example_failed(AssertionError("larger"))
    assert clock.best[0] == ["a = A()"] and clock.best[2] == "AssertionError: smaller"
    spent = BudgetSpent(clock)
    assert spent.failures == 3 and "smaller" in str(spent) and spent.calls == "a = A()"
