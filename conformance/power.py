"""The suite's power, measured: every mutant run against its own concept.

One pytest process per concept (at most ``PLANTED_CHUNK`` mutants each, the processes run side by
side), each over that concept's tests with its mutants as ``--impl``s and
``--first-failure-per-concept`` (the verdict is known at the first failure); the JSON reports are
merged. Used by

* ``spec_tests/suite/test_suite_power.py`` with the derandomized ``mutants`` profile (CI gates on it);
* ``inferspec power --seeds 1,2,3,4,5`` — the issue's bar: every mutant caught by each of five
  ``dev`` runs with different seeds, not only by the derandomized profile. It prints one row per
  mutant (the first failing test per seed) and can write them as JSON.

**The control.** A mutant counts as caught for its bug only if (1) the test that failed it passes
for its control -- ``control:<concept>.<name>``, the same construction without the bug
(conformance/mutants.py), run the same way (in-process, like every mutant) with the same profile
and seed -- and (2) that failure is not a harness error: a worker's death or refusal (crashed,
exited, timed out, import failed, forbidden), an error of the harness's own machinery (the wire,
the proxies, pickling, loading). :func:`run` runs the controls after the mutants (one pytest run per group of
concepts, each naming exactly the tests that caught its mutants) and puts them in the report's
``"controls"``; :func:`control_verdict` reads them.
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
from conformance.verdict import Verdict


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


def _pytest_one(targets: list[str], args: list[str], profile: str, seed: int | None, out: Path,
                timeout: float, limit_as: int | None = None) -> subprocess.CompletedProcess:
    """One pytest process over ``targets`` writing its report JSON to ``out``; ``limit_as``: an
    address-space cap in bytes (an allocation past it raises in the process instead of taking the
    machine's memory)."""
    env = {**os.environ, "INFERSPEC_PROFILE": profile}
    env.pop("INFERSPEC_IMPL", None)
    cmd = [sys.executable, "-m", "pytest", *targets, "-q", "-p", "no:cacheprovider",
           f"--hypothesis-profile={profile}", "--no-report", "--report-json", str(out), *args]
    if seed is not None:
        cmd.append(f"--hypothesis-seed={seed}")

    def cap():
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))

    return subprocess.run(cmd, cwd=SPEC_DIR.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, env=env, timeout=timeout, preexec_fn=cap if limit_as else None)


def _report_of(out: Path, proc: subprocess.CompletedProcess, tag: str) -> dict:
    if not out.exists():
        raise RuntimeError(f"{tag} run wrote no report (exit {proc.returncode}):\n{proc.stdout[-6000:]}")
    return json.loads(out.read_text())


def _merge(reports: list[dict]) -> dict:
    merged: dict = {"concepts": {}}
    for report in reports:
        for cid, row in report["concepts"].items():
            merged["concepts"].setdefault(cid, {}).update(row)
    return merged


def _pytest_runs(runs: list[tuple[list[str], list[str]]], profile: str, seed: int | None, tmp: Path,
                 tag: str, timeout: float, parallel: int | None = None) -> dict:
    """One pytest process per ``(paths_or_nodeids, args)``, at most ``parallel`` at a time (default:
    all at once); the merged report JSON."""
    def one(i: int) -> dict:
        targets, args = runs[i]
        out = tmp / f"{tag}{i}-{seed}.json"
        return _report_of(out, _pytest_one(targets, args, profile, seed, out, timeout), tag)

    with ThreadPoolExecutor(max_workers=max(1, parallel or len(runs))) as pool:
        return _merge(list(pool.map(one, range(len(runs)))))


# A mechanical mutant can loop forever or allocate without bound (a ``break`` made ``continue``, a
# bound made larger). By default it runs in-process, as a planted mutant does (ten times faster than
# a submission's worker, whose every call crosses a pipe), under three guards: it is first loaded in
# a process of its own (a variant that cannot be imported is killed: "import failed"); each test
# has a deadline (``--test-deadline``: pytest-timeout's alarm is swallowed by Hypothesis'
# shrinking, which then replays the looping example for ever) and the process an address-space
# cap, so a hang in Python code or a runaway allocation fails that test, which its control then
# passes; and a chunk whose process dies or outlives its deadline (a hang inside C code, a crash)
# is run again isolated, each variant a submission file whose name is its report column, with a
# memory cap and a short call deadline, so it costs its own cell and never the run. ``isolate=True`` runs every variant that way.
ISOLATION_LIMITS = ["--memory", "4", "--call-timeout", "20"]
IN_PROCESS_TEST_TIMEOUT_S = 60
IN_PROCESS_CHUNK_S = 1800          # a chunk still running then is run again isolated
IN_PROCESS_MEMORY = 8 * 2**30      # bytes of address space per in-process pytest


def _isolated(m) -> bool:
    from conformance import mechanical
    return m.name.startswith(mechanical.PREFIX)


def _impl_arg(cid: str, m, tmp: Path, isolate: bool = True) -> str:
    """The ``--impl`` of mutant ``m``: its spec (planted, or mechanical unless ``isolate``:
    in-process), or for an isolated mechanical one a file ``<impl_id>.py`` holding the variant's
    text (run as a submission), declared token-exact as the module it varies is."""
    if not (_isolated(m) and isolate):
        return mutants.spec(cid, m.name)
    path = tmp / "variants" / f"{mutants.impl_id(cid, m.name)}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    if mutants.concept_module(cid, m.file) is not None:  # a file the concept's module imports
        path.write_text(_DEPENDENCY_VARIANT.format(cid=cid, name=m.name, file=m.file))
    else:
        path.write_text(mutants.patched_source(m) + "\n\nTOKEN_EXACT = True  # a variant of ours: our choices hold\n")
    return str(path)


_DEPENDENCY_VARIANT = '''"""Mechanical variant {name} of {file}, which {cid}'s module imports: that module imported
afresh over the changed file (conformance.mutants.import_with_patched), its names re-exported."""
from conformance import mutants as _mutants

globals().update((_k, _v) for _k, _v in vars(_mutants.load({cid!r}, {name!r})).items() if not _k.startswith("__"))
TOKEN_EXACT = True  # a variant of ours: our choices hold
'''


_LOAD_CHECK = """
import json, sys
from conformance import mutants
out = {}
for cid, name in json.loads(sys.stdin.read()):
    try:
        mutants.load(cid, name)
    except BaseException as e:
        out[mutants.impl_id(cid, name)] = (type(e).__name__ + ": " + str(e)).splitlines()[0][:300]
print(json.dumps(out))
"""


def load_failures(chunk: list, timeout: float = 600) -> dict[str, str]:
    """{impl_id: error} of the variants of ``chunk`` ([(concept, mutant)]) that cannot be loaded,
    checked in a process of their own (an in-process pytest run could not load its implementations
    at all). A check that dies or hangs names every variant of the chunk as unloadable, each of
    them then run isolated by the caller."""
    todo = [(cid, m.name) for cid, m in chunk]
    try:
        proc = subprocess.run([sys.executable, "-c", _LOAD_CHECK], input=json.dumps(todo), cwd=SPEC_DIR.parent,
                              capture_output=True, text=True, timeout=timeout)
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, json.JSONDecodeError, IndexError) as e:
        return {mutants.impl_id(cid, name): f"the load check died: {type(e).__name__}" for cid, name in todo}


def _import_failed_cell(error: str) -> dict:
    return {"status": Verdict.IMPORT_FAILED.value, "verdict": f"import failed: {error}",
            "verdict_kind": Verdict.IMPORT_FAILED.value, "verdict_test": "(loading the variant)",
            "passed": 0, "failed": 0, "first_failure": None}


def _chunk_args(chunk: list, tmp: Path, isolate: bool) -> list[str]:
    args = ["--first-failure-per-concept", "--concept", ",".join(sorted({c for c, _ in chunk}))]
    for cid, m in chunk:
        args += ["--impl", _impl_arg(cid, m, tmp, isolate)]
    if any(_isolated(m) for _, m in chunk):
        args += ISOLATION_LIMITS if isolate else ["--timeout", "0", "--test-deadline", str(IN_PROCESS_TEST_TIMEOUT_S)]
    return args


def _mechanical_chunk(chunk: list, profile: str, seed: int | None, tmp: Path, tag: str, timeout: float) -> dict:
    """The report of one chunk of mechanical variants run in-process under the guards above, the
    variants that fail to load marked killed, and the chunk run again isolated if its process died."""
    dead = load_failures(chunk)
    if any(v.startswith("the load check died") for v in dead.values()):  # could not tell which
        return _chunk_report(chunk, profile, seed, tmp, tag, timeout, isolate=True)
    report: dict = {"concepts": {}}
    live = []
    for cid, m in chunk:
        column = mutants.impl_id(cid, m.name)
        if column in dead:
            report["concepts"].setdefault(cid, {})[column] = _import_failed_cell(dead[column])
        else:
            live.append((cid, m))
    if not live:
        return report
    try:
        sub = _chunk_report(live, profile, seed, tmp, tag, min(timeout, IN_PROCESS_CHUNK_S), isolate=False,
                            limit_as=IN_PROCESS_MEMORY)
    except (subprocess.TimeoutExpired, RuntimeError):
        sub = _chunk_report(live, profile, seed, tmp, tag, timeout, isolate=True)
    return _merge([report, sub])


def _chunk_report(chunk: list, profile: str, seed: int | None, tmp: Path, tag: str, timeout: float,
                  isolate: bool, limit_as: int | None = None) -> dict:
    """One pytest process over the spec with every mutant of ``chunk`` as an ``--impl``."""
    cid, m = chunk[0]
    out = tmp / f"{tag}-{'isolated-' if isolate else ''}{mutants.impl_id(cid, m.name)}-{seed}.json"
    targets = [str(SPEC_DIR / c) for c in sorted({c for c, _ in chunk})]   # collect those concepts only
    proc = _pytest_one(targets, _chunk_args(chunk, tmp, isolate), profile, seed, out, timeout, limit_as)
    return _report_of(out, proc, tag)


def _chunks(members: list, size: int | None) -> list[list]:
    """``members`` in runs of at most ``size`` (None: one run): one pytest process checks at most
    that many implementations (hundreds of mechanical mutants in one process exhaust its memory)."""
    size = size or max(1, len(members))
    return [members[i:i + size] for i in range(0, len(members), size)]


PLANTED_CHUNK = 40       # planted mutants per pytest process (each loaded mutant holds its modules)
EXPLICIT_ONLY = "pins"   # the profile of run(explicit_first=True)'s first pass: explicit examples only


def run(selected=None, *, profile: str = "mutants", seed: int | None = None, tmp: Path | None = None,
        jobs: int | None = None, timeout: float = 4 * 3600, control: bool = True,
        max_impls: int | None = None, isolate: bool = False, explicit_first: bool = False) -> dict:
    """Run the mutants (``[(concept, mutant)]``, default all) and return the merged report JSON
    (``{"concepts": {cid: {impl_id: cell}}, "controls": {impl_id: cell}}``); with ``control``, then
    each caught mutant's failing test against its control (module doc). Mechanical variants run
    in-process under guards, or each isolated as a submission with ``isolate`` (see
    ``ISOLATION_LIMITS``). Raises RuntimeError when a group wrote no report.

    ``explicit_first``: first run every mutant with the explicit examples alone (profile ``pins``),
    then only those it did not catch under ``profile``. The verdicts are those of one run under
    ``profile`` (its explicit phase runs the same examples, so a mutant one of them fails is caught
    by every run of the spec), at a fraction of the cost; each catch's control runs under the
    profile that caught it, and ``report["caught_by_explicit"]`` lists the mutants caught first."""
    selected = mutants.all_mutants() if selected is None else list(selected)
    tmp = Path(tempfile.mkdtemp(prefix="inferspec-power-")) if tmp is None else tmp
    if explicit_first and profile != EXPLICIT_ONLY:
        kw = dict(seed=seed, tmp=tmp, jobs=jobs, timeout=timeout, control=control, max_impls=max_impls,
                  isolate=isolate)
        first = run(selected, profile=EXPLICIT_ONLY, **kw)
        caught = [(c, m) for c, m in selected if verdict(first, c, m.name)[0]]
        ids = {mutants.impl_id(c, m.name) for c, m in caught}
        rest = [(c, m) for c, m in selected if mutants.impl_id(c, m.name) not in ids]
        second = run(rest, profile=profile, **kw) if rest else {"concepts": {}, "controls": {}}
        keep = {"concepts": {cid: {k: v for k, v in row.items() if k in ids}
                             for cid, row in first["concepts"].items()}}
        merged = _merge([keep, second])
        merged["controls"] = {**{k: v for k, v in first.get("controls", {}).items() if k in ids},
                              **second.get("controls", {})}
        merged["caught_by_explicit"] = sorted(ids)
        return merged
    jobs = jobs or max(1, min(4, os.cpu_count() or 1))
    if max_impls is None:
        # one process per concept (at most PLANTED_CHUNK mutants each; it collects that concept's
        # tests only, and its memory stays bounded), the largest first, ``jobs`` at a time
        chunks = sorted((chunk for cid in dict.fromkeys(c for c, _ in selected)
                         for chunk in _chunks([x for x in selected if x[0] == cid], PLANTED_CHUNK)),
                        key=len, reverse=True)
    else:
        chunks = [chunk for group in groups(selected, jobs)
                  for chunk in _chunks([(cid, m) for cid, m in selected if cid in group], max_impls)]

    def one(chunk: list) -> dict:
        if not isolate and any(_isolated(m) for _, m in chunk):
            return _mechanical_chunk(chunk, profile, seed, tmp, "report", timeout)
        return _chunk_report(chunk, profile, seed, tmp, "report", timeout, isolate)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        merged = _merge(list(pool.map(one, chunks)))
    merged["controls"] = (_run_controls(merged, selected, profile, seed, tmp, jobs, timeout, max_impls)
                          if control else {})
    return merged


MECHANICAL_CHUNK = 40  # mechanical mutants per pytest process


def mechanical_selection(concepts, which: str, sample: int | None, seed: int) -> list:
    """[(concept, Patch)] of the mechanical mutants of ``concepts`` (``which``: reference, optimized
    or both), all or a fixed random sample of ``sample`` per concept."""
    import random
    from conformance import mechanical
    modules = mechanical.MODULES if which == "both" else (which,)
    out = []
    for c in concepts:
        # the names are drawn first and only those built: building a variant reparses its file
        # (minutes for a package of thousands of variants)
        names = mechanical.variant_names(c, modules)
        if sample is not None and sample < len(names):
            names = sorted(random.Random(f"{seed}:{c}").sample(names, sample))
        out += [(c, mechanical.patch(c, n)) for n in names]
    return out


def sweep_order(selected: list, seed: int) -> list:
    """``selected`` shuffled within each concept (seeded) and interleaved across concepts: a sweep
    cut short by its deadline has run a uniform random sample of every concept's variants."""
    import itertools
    import random
    by: dict[str, list] = {}
    for cid, m in selected:
        by.setdefault(cid, []).append((cid, m))
    for cid, rows in by.items():
        random.Random(f"{seed}:{cid}").shuffle(rows)
    return [r for group in itertools.zip_longest(*by.values()) for r in group if r is not None]


def deadline_catch(report: dict, cid: str, name: str) -> bool:
    """The variant was failed only by the per-test deadline (``--test-deadline``): on a loaded machine a
    slow but correct test can pass it, so such a catch is not counted until a re-run confirms it (the
    sweep counts it when the variant ran in a chunk of its own: ``--deadline S --chunk 1``, its control passing)."""
    cell = report["concepts"].get(cid, {}).get(mutants.impl_id(cid, name)) or {}
    return "Timeout" in str((cell.get("first_failure") or {}).get("error", ""))


def mechanical_sweep(selected: list, *, profile: str, jobs: int, chunk: int, deadline: float | None,
                     on_chunk, isolate: bool = False) -> None:
    """Run mechanical variants ``chunk`` at a time, ``jobs`` chunks side by side, each chunk with its
    controls (:func:`run`); ``on_chunk(chunk, report)`` is called as each finishes (the caller records
    it, so a sweep stopped early keeps what it finished). With ``deadline`` (seconds from now), no
    chunk starts after it; a chunk still running then is given until the deadline plus its own
    timeout of 30 minutes."""
    import threading
    stop = None if deadline is None else time.monotonic() + deadline
    lock = threading.Lock()
    chunks = [selected[i:i + chunk] for i in range(0, len(selected), chunk)]

    def one(c: list) -> None:
        if stop is not None and time.monotonic() > stop:
            return
        report = run(c, profile=profile, jobs=1, max_impls=len(c), timeout=1800, isolate=isolate)
        with lock:
            on_chunk(c, report)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(one, chunks))


def control_nodeid(nodeid: str, cid: str, name: str) -> str:
    """The mutant's failing test, parametrized with its control instead of the mutant."""
    path, sep, params = nodeid.partition("[")
    ids = (params[:-1] if params.endswith("]") else params).split("-")
    mutant, ctl = mutants.impl_id(cid, name), mutants.control_id(cid, name)
    if mutant not in ids:
        raise ValueError(f"{nodeid}: the mutant {mutant} is not one of its parameters")
    return f"{path}[{'-'.join(ctl if i == mutant else i for i in ids)}]"


def _run_controls(report: dict, selected, profile, seed, tmp, jobs, timeout, max_impls=None) -> dict:
    """Each caught mutant's first failing test, run for its control; {mutant impl_id: control cell}."""
    wanted = []
    for cid, m in selected:
        cell = report["concepts"].get(cid, {}).get(mutants.impl_id(cid, m.name))
        test = ((cell or {}).get("first_failure") or {}).get("test", "")
        if cell is not None and cell["status"] == Verdict.FAILED and "[" in test:
            wanted.append((cid, m, control_nodeid(test, cid, m.name)))
    if not wanted:
        return {}
    runs = []
    for group in groups([(c, m) for c, m, _ in wanted], jobs):
        for chunk in _chunks([w for w in wanted if w[0] in group], max_impls):
            args = ["--concept", ",".join(sorted({c for c, _, _ in chunk}))]
            for cid, m, _ in chunk:
                args += ["--impl", mutants.control_spec(cid, m.name)]
            runs.append(([nodeid for _, _, nodeid in chunk], args))
    merged = _pytest_runs(runs, profile, seed, tmp, "control", timeout, parallel=jobs)
    out = {}
    for cid, m, nodeid in wanted:
        cell = merged["concepts"].get(cid, {}).get(mutants.control_id(cid, m.name))
        out[mutants.impl_id(cid, m.name)] = dict(cell or {}, nodeid=nodeid)
    return out


# The harness's own machinery: a failure whose error starts with one of these is the harness's, not
# the planted bug's (a worker's death or refusal is recognised by its verdict).
_BOUNDARY = ("wire", "submission", "proxy", "bridge", "worker", "loader", "mutants")
HARNESS_ERRORS = (*(f"conformance.{m}." for m in _BOUNDARY), "_pickle.", "pickle.", "INTERNALERROR")
HARNESS_WORDS = (*(f"conformance/{m}.py" for m in _BOUNDARY), "the judge does not", "refused to load",
                 "<remote method")


def harness_error(cell: dict) -> str | None:
    """Why a failed cell's first failure is the harness's rather than the implementation's, or
    None: the worker died or refused (a verdict), or the error comes from the harness's machinery."""
    if cell.get("verdict_kind"):
        return f"{cell['verdict_kind']}: {cell.get('verdict', '')}"
    first = cell.get("first_failure") or {}
    errors = [f.get("error", "") for f in first.get("failures") or []] or [first.get("error", "")]
    for error in errors:
        if error.startswith(HARNESS_ERRORS) or any(w in error for w in HARNESS_WORDS):
            return error.splitlines()[0][:300]
    return None


def control_verdict(report: dict, cid: str, name: str) -> tuple[bool, str]:
    """(the mutant's catch is its bug's, why not): its failing test passed for its control and the
    failure is not a harness error."""
    cell = report["concepts"].get(cid, {}).get(mutants.impl_id(cid, name)) or {}
    if _killed_by_death(cell, name):
        return True, f"killed: {cell.get('verdict', cell['status'])}"
    why = harness_error(cell)
    if why:
        return False, f"harness error: {why}"
    ctl = report.get("controls", {}).get(mutants.impl_id(cid, name))
    if ctl is None:
        return False, "no control ran"
    if ctl.get("status") != Verdict.PASSED:
        first = ctl.get("first_failure") or {}
        return False, (f"the control (without the bug) {ctl.get('status', 'did not run')} "
                       f"{ctl.get('nodeid', '')}: {first.get('error', '')[:500]}")
    return True, ctl["nodeid"]


def verdict(report: dict, cid: str, name: str) -> tuple[bool, str]:
    """(caught, the first failing test or why not)."""
    cell = report["concepts"].get(cid, {}).get(mutants.impl_id(cid, name))
    if cell is None:
        return False, "no test ran"
    if cell["status"] == Verdict.FAILED:
        first = cell.get("first_failure") or {}
        return True, str(first.get("test", "")).split("::")[-1].split("[")[0]
    if _killed_by_death(cell, name):
        return True, f"{cell.get('verdict', cell['status'])} in {cell.get('verdict_test', '').split('::')[-1]}"
    return False, f"{cell['status']} ({cell['passed']} passed)"


def recorded_survivors(selected: list, path: Path) -> list:
    """The members of ``selected`` that the results file ``path`` records as not killed and that
    their concept's mechanical_triage.py does not explain."""
    from conformance import mechanical
    data = mechanical.recorded(path)
    out = []
    for c, m in selected:
        k = mechanical.key(c, m.name)
        if data.get(c, {}).get("variants", {}).get("\t".join(k)) is False and k not in mechanical.triage(c):
            out.append((c, m))
    return out


def _killed_by_death(cell: dict, name: str) -> bool:
    """A mechanical mutant whose isolated run hung, blew its memory cap or crashed was seen by the
    spec (the unchanged file does none of these): killed. A planted mutant runs in-process and
    must fail a test."""
    from conformance import mechanical
    from conformance.verdict import DEATHS
    return name.startswith(mechanical.PREFIX) and cell.get("status") in DEATHS


def main(argv: list[str]) -> int:
    import argparse
    p = argparse.ArgumentParser(prog="inferspec power", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", default="1,2,3,4,5", help="dev-profile seeds (default 1,2,3,4,5)")
    p.add_argument("--profile", default="dev",
                   help="Hypothesis profile (default dev, one run per seed); a derandomized one "
                        "(mutants: the CI gate's) runs once and ignores --seeds")
    p.add_argument("--concept", action="append", default=[], help="only these concepts")
    p.add_argument("--json", default=None, help="write the per-mutant results here")
    p.add_argument("--jobs", type=int, default=1, help="processes per seed (default 1; the seeds run side by side)")
    p.add_argument("--no-control", action="store_true",
                   help="skip the controls (each caught mutant's failing test run without the bug)")
    p.add_argument("--explicit-first", action="store_true",
                   help="with a derandomized --profile: run every mutant with its concept's explicit examples "
                        "alone first, then only those they did not catch (the CI gate's way: the same verdicts, "
                        "a fraction of the time)")
    p.add_argument("--mechanical", choices=["reference", "optimized", "both"], default=None,
                   help="run the mechanical mutants of the concepts' modules (conformance/mechanical.py) "
                        "instead of the planted ones")
    p.add_argument("--isolate", action="store_true",
                   help="with --mechanical: run every variant isolated as a submission file (slow; by "
                        "default in-process under a per-test deadline and a memory cap, a chunk "
                        "whose process dies run again isolated)")
    p.add_argument("--sample", type=int, default=None, metavar="N",
                   help="with --mechanical: a fixed random sample of N mutants per concept")
    p.add_argument("--sample-seed", type=int, default=0, help="the sample's seed (default 0)")
    p.add_argument("--chunk", type=int, default=8,
                   help="with --deadline: variants per pytest process (default 8; smaller chunks "
                        "lose less when the deadline comes)")
    p.add_argument("--skip-recorded", action="store_true",
                   help="with --mechanical and --record: run only the variants the results file has no "
                        "verdict for (a sweep continued where the last one stopped)")
    p.add_argument("--survivors", action="store_true",
                   help="with --mechanical and --record: run only the variants the results file records "
                        "as survivors that no mechanical_triage.py entry explains (the re-run after a "
                        "gap of the spec was closed)")
    p.add_argument("--deadline", type=float, default=None, metavar="S",
                   help="with --mechanical: start no chunk after S seconds; the variants run in a seeded "
                        "order, shuffled per concept and interleaved across concepts (--sample-seed), so a "
                        "sweep cut short is a uniform sample, and --record is written after every chunk")
    p.add_argument("--record", default=None, metavar="JSON",
                   help="with --mechanical: merge the verdicts into this results file "
                        "(docs/results/mechanical.json feeds docs/suite-power.md and the CI sample)")
    args = p.parse_args(argv)
    if args.explicit_first and args.profile == "dev":
        p.error("--explicit-first needs a derandomized --profile (mutants): under dev the seeds are the "
                "point, and the explicit examples are the same on every seed")
    wanted = {c for arg in args.concept for c in arg.split(",") if c}
    from conformance.registry import CONCEPTS
    concepts = sorted(wanted) if wanted else list(CONCEPTS)
    if args.mechanical:
        selected = mechanical_selection(concepts, args.mechanical, args.sample, args.sample_seed)
        if args.skip_recorded and args.record:
            from conformance import mechanical
            done = {c: set(v.get("variants", {})) for c, v in mechanical.recorded(Path(args.record)).items()}
            selected = [(c, m) for c, m in selected
                        if "\t".join(mechanical.key(c, m.name)) not in done.get(c, set())]
        if args.survivors:
            if not args.record:
                p.error("--survivors needs --record (the results file that names the survivors)")
            selected = recorded_survivors(selected, Path(args.record))
        if args.deadline is not None:
            return _sweep_main(args, argv, concepts, selected)
    else:
        selected = [(c, m) for c in concepts for m in mutants.table(c)]
    seeds = [int(s) for s in args.seeds.split(",") if s] if args.profile == "dev" else [None]
    control = not args.no_control
    rows = {(c, m.name): [] for c, m in selected}
    t0 = time.monotonic()

    def one(seed: int | None) -> dict:
        report = run(selected, profile=args.profile, seed=seed, jobs=args.jobs, control=control,
                     max_impls=MECHANICAL_CHUNK if args.mechanical else None, isolate=args.isolate,
                     explicit_first=args.explicit_first)
        caught = sum(verdict(report, c, m.name)[0] for c, m in selected)
        print(f"seed {seed}: {caught}/{len(rows)} caught, done after {time.monotonic() - t0:.0f} s", flush=True)
        return report

    # the seeds run side by side (each its own group processes): one slow concept group of one
    # seed then overlaps the others instead of leaving cores idle
    with ThreadPoolExecutor(max_workers=len(seeds) or 1) as pool:
        reports = list(pool.map(one, seeds))
    for report in reports:
        for c, m in selected:
            caught, first = verdict(report, c, m.name)
            sound, why = control_verdict(report, c, m.name) if caught and control else (True, "")
            rows[(c, m.name)].append((caught, sound, first, why))
    missed = [k for k, v in rows.items() if not all(ok for ok, _, _, _ in v)]
    unsound = [k for k, v in rows.items() if not all(sound for ok, sound, _, _ in v if ok)]
    for (c, name), v in rows.items():
        marks = " ".join(("F" if sound else "?") if ok else "-" for ok, sound, _, _ in v)
        print(f"{c}.{name:<40} {marks}   {v[0][2]}")
        for ok, sound, _, why in v:
            if ok and not sound:
                print(f"    NOT BY ITS BUG: {why}")
    scores = {}
    from conformance import mechanical
    if args.mechanical:
        for c in concepts:
            mine = {n: (c, n) not in missed for k, n in rows if k == c}
            if mine:
                scores[c] = mechanical.score(c, mine)
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"seeds": seeds, "profile": args.profile,
             "mechanical": args.mechanical, "sample": args.sample, "sample_seed": args.sample_seed,
             "scores": {c: {"total": s.total, "killed": s.killed, "counted": s.counted,
                            "percent": round(s.percent, 1), "triaged": s.triaged, "gaps": s.gaps,
                            "stale": s.stale} for c, s in scores.items()},
             "mutants": [{"concept": c, "mutant": n, "caught": [ok for ok, _, _, _ in v],
                          "key": list(mechanical.key(c, n)) if args.mechanical else None,
                          "first_failure": [w for _, _, w, _ in v],
                          "control_passed": [sound for _, sound, _, _ in v] if control else None,
                          "control": [why for _, _, _, why in v] if control else None}
                         for (c, n), v in rows.items()]}, indent=1))
    print(f"{len(rows) - len(missed)}/{len(rows)} mutants caught on every seed")
    if args.record and args.mechanical:
        mechanical.record(Path(args.record), {(c, n): (c, n) not in missed for c, n in rows},
                          command="inferspec power " + " ".join(argv))
    for c, s in scores.items():
        for name in s.gaps:
            print(f"  survivor {c}.{name}: {' | '.join(mechanical.key(c, name))}")
        for name in s.stale:
            print(f"  STALE triage entry (the variant was killed) {c}.{name}: {' | '.join(mechanical.key(c, name))}")
        print(s.line())
    if control:
        checked = sum(ok for v in rows.values() for ok, _, _, _ in v)
        passed = sum(ok and sound for v in rows.values() for ok, sound, _, _ in v)
        harness = sum(1 for v in rows.values() for ok, sound, _, why in v if ok and why.startswith("harness error"))
        print(f"controls: {passed}/{checked} catches confirmed (the failing test passes without the bug); "
              f"{harness} failures were harness errors; {len(unsound)} mutants caught for another reason")
    if args.mechanical:  # survivors are expected; untriaged ones and wrong triage entries are not
        return 1 if unsound or any(s.gaps or s.stale for s in scores.values()) else 0
    return 1 if missed or unsound else 0


def _sweep_main(args, argv: list[str], concepts: list[str], selected: list) -> int:
    """``power --mechanical --deadline S``: :func:`mechanical_sweep`, recording after every chunk."""
    from conformance import mechanical
    order = sweep_order(selected, args.sample_seed)
    rows: dict = {}
    t0 = time.monotonic()
    command = "inferspec power " + " ".join(argv)
    print(f"{len(order)} variants in a seeded interleaved order; no chunk starts after {args.deadline:.0f} s", flush=True)

    def on_chunk(chunk: list, report: dict) -> None:
        killed = {}
        for c, m in chunk:
            caught, first = verdict(report, c, m.name)
            sound, why = control_verdict(report, c, m.name) if caught else (True, "")
            if caught and deadline_catch(report, c, m.name) and len(chunk) > 1:
                print(f"  {c}.{m.name}: failed only by the per-test deadline; not counted (re-run it alone: "
                      f"--survivors --deadline S --chunk 1)", flush=True)
                caught = False
            elif caught and not sound:
                print(f"  {c}.{m.name}: caught, but NOT BY ITS BUG: {why}", flush=True)
            rows[(c, m.name)] = (caught and sound, first)
            killed[(c, m.name)] = caught and sound
        if args.record:
            mechanical.record(Path(args.record), killed, command=command)
        print(f"{len(rows)}/{len(order)} run, {sum(k for k, _ in rows.values())} killed, "
              f"{time.monotonic() - t0:.0f} s", flush=True)

    mechanical_sweep(order, profile=args.profile, jobs=args.jobs, chunk=args.chunk, deadline=args.deadline,
                     on_chunk=on_chunk, isolate=args.isolate)
    scores = []
    for c in concepts:
        mine = {n: rows[(k, n)][0] for k, n in rows if k == c}
        if mine:
            s = mechanical.score(c, mine)
            scores.append(s)
            for name in s.gaps:
                print(f"  survivor {c}.{name}: {' | '.join(mechanical.key(c, name))}")
            print(s.line() + "  (this sweep's variants only)")
    print(f"{len(rows)} of {len(order)} variants run before the deadline")
    return 0
