"""Flake hunt: the whole specification (every concept, against the bundled reference and
optimized implementations) and the bundled implementations' own tests, under the random ``dev``
profile with one Hypothesis seed per run.

The derandomized ``ci`` profile sees one fixed sequence of examples; a user's ``dev`` run draws
new ones every time. A correct implementation must pass under every seed, so any failure here is a
defect of the suite (or of a bundled implementation), to be fixed at its root.

    inferspec flakes --runs 20 --jobs 8          # 20 fresh random seeds, 8 runs at a time
    inferspec flakes --seeds 17,42 --jobs 2      # these seeds (to replay a reported failure)

Each seed is printed before its run starts; each run has its own, empty example database
(``HYPOTHESIS_STORAGE_DIRECTORY`` in a temporary folder), so one seed's failure is never replayed
into another seed's run. A failing test is reported with the command that replays it:
``python3 -m pytest TEST --hypothesis-profile=dev --hypothesis-seed=S``. Exit 1 if any run failed.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from conformance.registry import SPEC_DIR

# what a flake hunt runs: the spec (every concept folder) and the bundled implementations' tests
SKIPPED_FOLDERS = ("suite",)


def _command(seed: int, junit: Path, concepts: list[str], bundled: bool = True) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", str(SPEC_DIR), "-q", "-p", "no:cacheprovider",
           "--hypothesis-profile=dev", f"--hypothesis-seed={seed}", "--no-report",
           f"--junitxml={junit}", "-W", "ignore::DeprecationWarning"]
    for folder in SKIPPED_FOLDERS + (() if bundled else ("bundled",)):
        cmd += ["--ignore", str(SPEC_DIR / folder)]
    if concepts:
        cmd += ["--concept", ",".join(concepts)]
    return cmd


def _failures(junit: Path) -> tuple[int, list[tuple[str, str]]]:
    """(tests run, [(test id, first line of the failure)]) from a JUnit XML report."""
    root = ET.parse(junit).getroot()
    ran, failed = 0, []
    for case in root.iter("testcase"):
        ran += 1
        for tag in ("failure", "error"):
            node = case.find(tag)
            if node is not None:
                path = case.get("file") or case.get("classname", "").replace(".", "/") + ".py"
                test_id = f"{path}::{case.get('name')}"
                message = (node.get("message") or "").strip().splitlines()
                failed.append((test_id, message[0][:200] if message else tag))
                break
    return ran, failed


def run_seed(seed: int, concepts: list[str], threads: int, bundled: bool = True) -> dict:
    """One full run under ``seed``; returns {seed, seconds, ran, failed: [(test, message)], exit}."""
    work = Path(tempfile.mkdtemp(prefix=f"inferspec-flakes-{seed}-"))
    junit = work / "junit.xml"
    env = {**os.environ, "HYPOTHESIS_STORAGE_DIRECTORY": str(work / "hypothesis"),
           "INFERSPEC_TORCH_THREADS": str(threads), "OMP_NUM_THREADS": str(threads)}
    env.pop("INFERSPEC_IMPL", None)
    env.pop("INFERSPEC_PROFILE", None)
    t0 = time.monotonic()
    proc = subprocess.run(_command(seed, junit, concepts, bundled), cwd=SPEC_DIR.parent, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seconds = time.monotonic() - t0
    (work / "log.txt").write_text(proc.stdout)
    row = {"seed": seed, "seconds": seconds, "exit": proc.returncode, "log": str(work / "log.txt")}
    if not junit.exists():
        return {**row, "ran": 0, "failed": [("(no report)", proc.stdout[-2000:])]}
    ran, failed = _failures(junit)
    return {**row, "ran": ran, "failed": failed}


def main(argv: list[str]) -> int:
    import argparse
    p = argparse.ArgumentParser(prog="inferspec flakes", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=20, help="random seeds to draw (default 20)")
    p.add_argument("--seeds", default=None, help="comma-separated seeds instead of random ones")
    from conformance.options import usable_cpus
    p.add_argument("--jobs", type=int, default=max(1, usable_cpus() // 2),
                   help="runs at a time (default: half the CPUs)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per run (default 1)")
    p.add_argument("--concept", action="append", default=[], help="only these concepts")
    p.add_argument("--spec-only", action="store_true",
                   help="the spec alone (every concept, reference and optimized), not the bundled tests")
    p.add_argument("--json", default=None, help="write the per-seed results here")
    args = p.parse_args(argv)
    if args.seeds:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    else:
        rng = random.SystemRandom()
        seeds = [rng.randrange(2**31) for _ in range(args.runs)]
    concepts = [c for raw in args.concept for c in raw.split(",") if c]
    print(f"inferspec flakes: {len(seeds)} dev-profile runs, seeds {','.join(map(str, seeds))}", flush=True)
    t0 = time.monotonic()

    def one(seed: int) -> dict:
        print(f"  seed {seed}: started", flush=True)
        row = run_seed(seed, concepts, args.threads, bundled=not args.spec_only)
        print(f"  seed {seed}: {row['ran']} tests, {len(row['failed'])} failed, {row['seconds']:.0f} s "
              f"(done after {time.monotonic() - t0:.0f} s)", flush=True)
        return row

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        rows = list(pool.map(one, seeds))
    bad = [r for r in rows if r["failed"] or r["exit"] not in (0,)]
    print(f"\n{'seed':>10}  {'tests':>6}  {'failed':>6}  {'seconds':>7}")
    for r in rows:
        print(f"{r['seed']:>10}  {r['ran']:>6}  {len(r['failed']):>6}  {r['seconds']:>7.0f}")
    for r in bad:
        for test, message in r["failed"]:
            print(f"\nseed {r['seed']}: {test}\n    {message}\n    replay: python3 -m pytest '{test}' "
                  f"--hypothesis-profile=dev --hypothesis-seed={r['seed']}")
        if not r["failed"]:
            print(f"\nseed {r['seed']}: pytest exited {r['exit']} (log {r['log']})")
    if args.json:
        Path(args.json).write_text(json.dumps({"seeds": seeds, "runs": rows}, indent=1))
    print(f"\n{len(rows) - len(bad)}/{len(rows)} seeds passed")
    return 1 if bad else 0
