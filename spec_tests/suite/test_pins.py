"""Every pinned example pins a bug, and the bug is proven caught by it.

The first test runs in every run: it lists each ``@example`` of a concept's tests that names no
mutant (``.via("mutant:<name>")``, a mutant of the test's own folder's concept), names one that
does not exist, or qualifies it (``mutant:<concept>.<name>``); an example that pins a legal
boundary with no realistic bug says ``.via("boundary: ...")``. The second proves the labels: for each concept, one pytest run of its
pinned tests with explicit examples only (profile ``pins``: no generated example can be the one
that catches it) against every mutant the labels name, and each (test, mutant) pair must fail.
Like the power run, the proof runs under ``ci``/``thorough`` and with ``--run-slow``.
"""
from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conformance import mutants, pins
from conformance.registry import SPEC_DIR

pytestmark = pytest.mark.meta
PINS, STRAY = pins.scan()


def test_every_pinned_example_names_the_mutant_it_catches():
    bad = pins.problems(PINS, STRAY)
    assert not bad, (f"{len(bad)} of {len(PINS)} explicit examples pin no named bug "
                     "(conformance/pins.py says how to label them):\n  " + "\n  ".join(bad))


def test_the_scanner_sees_labels_and_their_absence(tmp_path):
    """The check itself can fail: an unlabelled example, a label naming a missing mutant, a
    qualified label (of the test's own concept or another's) and a stray example(...) call are
    each reported; a good label, the mutant's bare name, is not, and names its mutant."""
    f = tmp_path / "test_probe.py"
    first = mutants.table("kv_bytes")[0].name
    f.write_text(
        "from hypothesis import example, given\n"
        "@example(x=1)\n"
        "@example(x=2).via('mutant:no_such_mutant')\n"
        f"@example(x=3).via('mutant:{first}')\n"
        "@example(x=4).via('boundary: x 4 is the largest')\n"
        f"@example(x=6).via('mutant:kv_bytes.{first}')\n"
        f"@example(x=7).via('mutant:paged.{mutants.table('paged')[0].name}')\n"
        "@given()\n"
        "def test_probe(x):\n    pass\n"
        "CASES = [example(x=5)]\n")
    found, stray = pins.scan_file("kv_bytes", f)
    assert [p.label for p in found] == [None, "mutant:no_such_mutant", f"mutant:{first}",
                                         "boundary: x 4 is the largest", f"mutant:kv_bytes.{first}",
                                         f"mutant:paged.{mutants.table('paged')[0].name}"]
    assert found[2].mutants == (first,) and found[4].mutants == ()
    assert len(stray) == 1
    bad = pins.problems(found, [])
    assert len(bad) == 4, bad
    assert "without .via" in bad[0] and "no_such_mutant" in bad[1], bad
    assert f"write 'mutant:{first}'" in bad[2] and "of another concept" in bad[3], bad


def _prove(concept: str, tests: dict[tuple[str, str], set[str]], tmp: Path) -> list[str]:
    """Run the concept's pinned tests, explicit examples only, against the mutants they name;
    return the (test, mutant) pairs that did not fail."""
    xml = tmp / f"{concept}.xml"
    files = sorted({f for f, _ in tests})
    names = sorted({t for _, t in tests})
    wanted = sorted({m for ms in tests.values() for m in ms})
    cmd = [sys.executable, "-m", "pytest", *files, "-q", "-p", "no:cacheprovider", "--no-report",
           "--hypothesis-profile=pins", "--concept", concept, "-k", " or ".join(names),
           f"--junitxml={xml}"]
    for m in wanted:
        cmd += ["--impl", mutants.spec(concept, m)]
    env = {**os.environ, "INFERSPEC_PROFILE": "pins"}
    env.pop("INFERSPEC_IMPL", None)
    proc = subprocess.run(cmd, cwd=SPEC_DIR.parent, capture_output=True, text=True, env=env,
                          timeout=1800)
    if not xml.exists():
        return [f"{concept}: the pins run wrote no report (exit {proc.returncode}):\n"
                f"{proc.stdout[-3000:]}{proc.stderr[-2000:]}"]
    failed: set[tuple[str, str]] = set()
    for case in ET.parse(xml).getroot().iter("testcase"):
        name = case.get("name", "")
        if "[" not in name or (case.find("failure") is None and case.find("error") is None):
            continue
        test, params = name.split("[", 1)
        for m in wanted:
            if mutants.impl_id(concept, m) in params.rstrip("]").split("-"):
                failed.add((test, m))
    return [f"{Path(f).relative_to(SPEC_DIR.parent)}::{t} did not fail on mutant:{concept}.{m} "
            f"with its explicit examples alone"
            for (f, t), ms in sorted(tests.items()) for m in sorted(ms) if (t, m) not in failed]


@pytest.mark.timeout(3600)
def test_each_pinned_example_fails_on_the_mutant_it_names(request, tmp_path):
    from hypothesis import settings
    if settings.get_current_profile_name() == "dev" and not request.config.getoption("run_slow"):
        pytest.skip("the pins proof: under the ci and thorough profiles and with --run-slow")
    by_concept = pins.mutant_pins(PINS)
    assert by_concept, "no pinned example names a mutant"
    with ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1))) as pool:
        results = list(pool.map(lambda item: _prove(item[0], item[1], tmp_path), by_concept.items()))
    missed = [line for r in results for line in r]
    assert not missed, "\n".join(missed)
