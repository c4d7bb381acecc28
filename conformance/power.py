"""The suite's power, measured: every mutant run against its own concept.

One pytest process per group of concepts (groups of about equal mutant counts, run in parallel),
each with every mutant of its concepts as an ``--impl`` and ``--first-failure-per-concept`` (the
verdict is known at the first failure); the JSON reports are merged. Used by

* ``spec_tests/suite/test_suite_power.py`` with the derandomized ``mutants`` profile (CI gates on it);
* ``inferspec power --seeds 1,2,3,4,5`` — the issue's bar: every mutant caught by each of five
  ``dev`` runs with different seeds, not only by the derandomized profile. It prints one row per
  mutant (the first failing test per seed) and can write them as JSON.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from conformance import mutants
from conformance.registry import SPEC_DIR


def groups(selected: list[tuple[str, object]], n: int) -> list[list[str]]:
    """Concepts split into n groups of about equal mutant counts (one process per group)."""
    counts: dict[str, int] = {}
    for cid, _ in selected:
        counts[cid] = counts.get(cid, 0) + 1
    out: list[list[str]] = [[] for _ in range(n)]
    load = [0] * n
    for cid in sorted(counts, key=counts.get, reverse=True):
        i = load.index(min(load))
        out[i].append(cid)
        load[i] += counts[cid]
    return [g for g in out if g]


def run(selected=None, *, profile: str = "mutants", seed: int | None = None, tmp: Path | None = None,
        jobs: int | None = None, timeout: float = 4 * 3600) -> dict:
    """Run the mutants (``[(concept, mutant)]``, default all) and return the merged report JSON
    (``{"concepts": {cid: {impl_id: cell}}}``). Raises RuntimeError when a group wrote no report."""
    selected = mutants.all_mutants() if selected is None else list(selected)
    tmp = Path(tempfile.mkdtemp(prefix="inferspec-power-")) if tmp is None else tmp
    env = {**os.environ, "INFERSPEC_PROFILE": profile}
    env.pop("INFERSPEC_IMPL", None)
    jobs = jobs or max(1, min(4, os.cpu_count() or 1))
    procs = []
    for i, group in enumerate(groups(selected, jobs)):
        out = tmp / f"report{i}-{seed}.json"
        cmd = [sys.executable, "-m", "pytest", str(SPEC_DIR), "-q", "-p", "no:cacheprovider",
               f"--hypothesis-profile={profile}", "--no-report", "--first-failure-per-concept",
               "--report-json", str(out), "--concept", ",".join(group)]
        if seed is not None:
            cmd.append(f"--hypothesis-seed={seed}")
        for cid, m in selected:
            if cid in group:
                cmd += ["--impl", mutants.spec(cid, m.name)]
        procs.append((out, subprocess.Popen(cmd, cwd=SPEC_DIR.parent, stdout=subprocess.PIPE,
                                            stderr=subprocess.STDOUT, text=True, env=env)))
    merged: dict = {"concepts": {}}
    for out, proc in procs:
        log, _ = proc.communicate(timeout=timeout)
        if not out.exists():
            raise RuntimeError(f"mutant run wrote no report (exit {proc.returncode}):\n{log[-6000:]}")
        for cid, row in json.loads(out.read_text())["concepts"].items():
            merged["concepts"].setdefault(cid, {}).update(row)
    return merged


def verdict(report: dict, cid: str, name: str) -> tuple[bool, str]:
    """(caught, the first failing test or why not)."""
    cell = report["concepts"].get(cid, {}).get(mutants.impl_id(cid, name))
    if cell is None:
        return False, "no test ran"
    if cell["status"] == "failed":
        first = cell.get("first_failure") or {}
        return True, str(first.get("test", "")).split("::")[-1].split("[")[0]
    return False, f"{cell['status']} ({cell['passed']} passed)"


def main(argv: list[str]) -> int:
    import argparse
    p = argparse.ArgumentParser(prog="inferspec power", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", default="1,2,3,4,5", help="dev-profile seeds (default 1,2,3,4,5)")
    p.add_argument("--concept", action="append", default=[], help="only these concepts")
    p.add_argument("--json", default=None, help="write the per-mutant results here")
    p.add_argument("--jobs", type=int, default=1, help="processes per seed (default 1; the seeds run side by side)")
    args = p.parse_args(argv)
    wanted = {c for arg in args.concept for c in arg.split(",") if c}
    from conformance.registry import CONCEPTS
    selected = [(c, m) for c in (sorted(wanted) if wanted else CONCEPTS) for m in mutants.table(c)]
    seeds = [int(s) for s in args.seeds.split(",") if s]
    rows = {(c, m.name): [] for c, m in selected}
    t0 = time.monotonic()

    def one(seed: int) -> dict:
        report = run(selected, profile="dev", seed=seed, jobs=args.jobs)
        caught = sum(verdict(report, c, m.name)[0] for c, m in selected)
        print(f"seed {seed}: {caught}/{len(rows)} caught, done after {time.monotonic() - t0:.0f} s", flush=True)
        return report

    # the seeds run side by side (each its own group processes): one slow concept group of one
    # seed then overlaps the others instead of leaving cores idle
    with ThreadPoolExecutor(max_workers=len(seeds) or 1) as pool:
        reports = list(pool.map(one, seeds))
    for report in reports:
        for c, m in selected:
            rows[(c, m.name)].append(verdict(report, c, m.name))
    missed = [(k, v) for k, v in rows.items() if not all(ok for ok, _ in v)]
    for (c, name), v in rows.items():
        marks = " ".join("F" if ok else "-" for ok, _ in v)
        print(f"{c}.{name:<40} {marks}   {v[0][1]}")
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"seeds": seeds, "mutants": [{"concept": c, "mutant": n, "caught": [ok for ok, _ in v],
                                          "first_failure": [w for _, w in v]}
                                         for (c, n), v in rows.items()]}, indent=1))
    print(f"{len(rows) - len(missed)}/{len(rows)} mutants caught on every seed")
    return 1 if missed else 0
