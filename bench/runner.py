"""The benchmark runner: ``python -m bench run --concept X [--out results.json]``.

A concept's benchmarks are DATA: ``bench/cases/<concept>.py`` holds ``CASES``, a list of
:class:`Case` (a name, the shape as plain ``params``, the providers to compare, the metric and the
work it is computed from, the devices it runs on, tags), and the few functions that turn data into
calls: ``setup(case, device)`` makes the inputs, ``BUILDERS[provider.build](problem, case, device,
**provider.options)`` returns the call to time (or ``(call, info)``), and an optional
``check(problem, case, device)`` compares outputs with an oracle BEFORE anything is timed (a case
whose check fails is not timed, and the run exits 1). The runner times every provider of a case
with ``bench.timing.compare`` (alternating rounds) and writes one JSON file:

    {"schema": "inferspec-bench/1", "command": "python -m bench run ...", "argv": [...],
     "concepts": [...], "device": "NVIDIA H200" | "cpu: <model>", "device_type": "cuda" | "cpu",
     "torch": ..., "triton": ..., "python": ..., "git_commit": ..., "started": ..., "wall_s": ...,
     "load_average": [before, after], "triton_interpret": bool, "torch_threads": n,
     "cases": [{"concept", "name", "params", "metric", "work", "tags", "timing",
                "check": {"ok": ..., ...} | null,
                "results": [{"provider", "options", "median_ms", "min_ms", "calls", "rounds",
                             "value" (in the metric's unit), "cpu_median_ms"?, "samples_ms"?,
                             ...builder info | "error" | "skipped"}],
                "speedups": {"<provider>": its median time / the first provider's},
                "seconds": ..., "error"? , "skipped"?}]}

Metrics: "TFLOP/s" and "TB/s" (work = FLOPs or bytes per call), "ms", "us", "us/op" (work =
operations per call), "value" (no timing: the call returns a dict of numbers, e.g. a simulation).

Selection: ``--tag T`` keeps the cases tagged T (repeatable: any of them). Without ``--tag``, every
case runs except those tagged "sweep" (tile sweeps), "long" or "smoke" (tiny shapes for the CPU
test): such a case carries a tag of its own (``tune``, ``tiles``, ...) and runs when a ``--tag``
names one of its tags. ``--case S`` keeps the cases whose name contains S. A case runs on the devices it lists;
``--device`` defaults to cuda when a GPU is present. On a machine without a GPU the Triton
kernels run under the interpreter (TRITON_INTERPRET=1, as in the test harness).
``--isolate`` runs every case in a child process (a compiler crash in a tile sweep then costs one
case, not the run). ``--timing key=value`` overrides the cases' timing options (bench/timing.py).
``python -m bench list`` prints the cases.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import platform
import shlex
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = "inferspec-bench/1"
EXPLICIT_TAGS = ("sweep", "long", "smoke")   # cases with one of these run only when --tag names one of their tags
METRICS = ("TFLOP/s", "TB/s", "ms", "us", "us/op", "value")


@dataclass(frozen=True)
class Provider:
    """One thing timed in a case: ``build`` names a builder of the concept module, ``options``
    are its keyword arguments (recorded in the JSON), ``graph`` times a CUDA-graph replay."""
    name: str
    build: str
    options: Mapping = field(default_factory=dict)
    graph: bool = False


def extra_rows(batch: int, extra: float) -> int:
    """The rows a builder's planted ``extra`` slowdown (bench/gate_proof.py) runs a second time:
    ``max(1, round(extra x batch))``."""
    return max(1, round(extra * batch))


def P(name: str, build: str | None = None, *, graph: bool = False, **options) -> Provider:
    """Provider shorthand: the builder defaults to the provider's name."""
    return Provider(name, build or name, dict(options), graph)


@dataclass(frozen=True)
class Case:
    name: str
    params: Mapping
    providers: tuple[Provider, ...]
    metric: str = "ms"
    work: float | None = None
    devices: tuple[str, ...] = ("cuda",)
    tags: tuple[str, ...] = ()
    timing: Mapping = field(default_factory=dict)

    def __post_init__(self):
        if self.metric not in METRICS:
            raise ValueError(f"case {self.name!r}: metric {self.metric!r} is not one of {METRICS}")
        if self.metric in ("TFLOP/s", "TB/s", "us/op") and not self.work:
            raise ValueError(f"case {self.name!r}: metric {self.metric} needs the work per call")


class Unavailable(Exception):
    """Raised by a builder when its provider cannot run here (no transformers, a backend that
    refuses the shape, a tile that does not fit): recorded as skipped, not as an error."""


def metric_value(metric: str, work: float | None, ms: float) -> float:
    if metric in ("TFLOP/s", "TB/s"):
        return work / ms / 1e9
    if metric == "us":
        return ms * 1e3
    if metric == "us/op":
        return ms * 1e3 / work
    return ms


# ----------------------------------------------------------------------------- concepts
def concepts() -> list[str]:
    import bench.cases
    return sorted(m.name for m in pkgutil.iter_modules(bench.cases.__path__) if not m.name.startswith("_"))


def load(concept: str):
    if concept not in concepts():
        raise SystemExit(f"bench: no benchmarks for concept {concept!r} (have: {', '.join(concepts())})")
    return importlib.import_module(f"bench.cases.{concept}")


def select(cases, tags=(), names=(), exact=None) -> list[Case]:
    out = []
    for c in cases:
        if exact is not None:
            if c.name == exact:
                out.append(c)
            continue
        if tags and not set(tags) & set(c.tags):
            continue
        if not tags and set(EXPLICIT_TAGS) & set(c.tags):
            continue
        if names and not any(n in c.name for n in names):
            continue
        out.append(c)
    return out


# ----------------------------------------------------------------------------- environment
def default_device() -> str:
    import torch
    return "cuda" if torch.cuda.is_available() else "cpu"


def prepare(device: str) -> None:
    """Without a GPU the Triton kernels run on CPU tensors under the interpreter (set before any
    kernel module is imported; the harness' fixes to the interpreter applied)."""
    import torch
    if device == "cpu" and not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")
    if os.environ.get("TRITON_INTERPRET") == "1":
        from conformance import triton_interpreter
        triton_interpreter.apply()


def _cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_commit() -> str | None:
    try:
        r = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10)
        if r.returncode:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return r.stdout.strip() + ("+changes" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def environment(device: str) -> dict:
    import torch
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:  # pragma: no cover
        triton_version = None
    if device.startswith("cuda"):
        name = torch.cuda.get_device_name()
        props = torch.cuda.get_device_properties(0)
        extra = dict(sms=props.multi_processor_count, cuda=torch.version.cuda)
    else:
        name, extra = f"cpu: {_cpu_name()}, {os.cpu_count()} CPUs", {}
    return dict(device=name, device_type="cuda" if device.startswith("cuda") else "cpu", **extra,
                torch=torch.__version__, triton=triton_version, python=platform.python_version(),
                platform=platform.platform(), git_commit=_git_commit(),
                triton_interpret=os.environ.get("TRITON_INTERPRET") == "1",
                torch_threads=torch.get_num_threads())


# ----------------------------------------------------------------------------- one case
def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]


def run_case(module, case: Case, device: str, *, timing: Mapping | None = None,
             providers: tuple[Provider, ...] | None = None, check: bool = True) -> dict:
    """Set up, check, build and time one case; the JSON record (module doc). ``timing``
    overrides the case's timing options; ``providers`` replaces its providers (the gate's plants);
    ``check=False`` skips the case's correctness check (the gate's repeated measurements)."""
    from bench import timing as T
    t0 = time.perf_counter()
    opts = {**getattr(module, "DEFAULT_TIMING", {}), **case.timing, **(timing or {})}
    rounds = int(opts.pop("rounds", 1))
    rec = dict(name=case.name, params=dict(case.params), metric=case.metric, work=case.work,
               tags=list(case.tags), timing=dict(opts, rounds=rounds), check=None, results=[])
    providers = case.providers if providers is None else providers
    try:
        problem = module.setup(case, device)
        if check and hasattr(module, "check"):
            rec["check"] = module.check(problem, case, device)
            if not rec["check"].get("ok", True):
                rec["error"] = "check failed: not timed"
                return rec
        fns, rows = {}, {}
        for p in providers:
            row = dict(provider=p.name)
            if p.options:
                row["options"] = dict(p.options)
            rows[p.name] = row
            rec["results"].append(row)
            try:
                built = module.BUILDERS[p.build](problem, case, device, **p.options)
                fn, info = built if isinstance(built, tuple) else (built, {})
                row.update(info)
                if p.graph:
                    if not device.startswith("cuda"):
                        raise Unavailable("a CUDA graph needs a GPU")
                    fn = T.cuda_graph(fn)
                    row["graph"] = True
                fns[p.name] = fn
            except Unavailable as exc:
                row["skipped"] = str(exc)
            except Exception as exc:  # noqa: BLE001 - recorded, the other providers go on
                row["error"] = _error(exc)
        if case.metric == "value":
            for name, fn in fns.items():
                s0 = time.perf_counter()
                try:
                    rows[name]["value"] = fn()
                except Exception as exc:  # noqa: BLE001
                    rows[name]["error"] = _error(exc)
                rows[name]["seconds"] = round(time.perf_counter() - s0, 3)
            return rec
        good = {}
        for name, fn in fns.items():   # a provider that fails its first call is recorded, not timed
            try:
                fn()
                good[name] = fn
            except Exception as exc:  # noqa: BLE001
                rows[name]["error"] = _error(exc)
        times = T.compare(good, rounds=rounds, device=device, **opts)
        for name, t in times.items():
            rows[name].update(t.to_json())
            rows[name]["value"] = metric_value(case.metric, case.work, t.median_ms)
        first = providers[0].name
        if first in times:
            rec["speedups"] = {n: t.median_ms / times[first].median_ms for n, t in times.items() if n != first}
    except Unavailable as exc:
        rec["skipped"] = str(exc)
    except Exception as exc:  # noqa: BLE001 - the run goes on with the next case
        rec["error"] = _error(exc)
        rec["traceback"] = traceback.format_exc()[-3000:]
    finally:
        rec["seconds"] = round(time.perf_counter() - t0, 3)
        if device.startswith("cuda"):
            import torch
            torch.cuda.empty_cache()
    return rec


def failed(rec: dict) -> bool:
    """A case that errored or failed its check (a skipped provider is not a failure)."""
    return "error" in rec or (rec.get("check") is not None and not rec["check"].get("ok", True))


def summary_line(rec: dict) -> str:
    head = f"{rec.get('concept', '')}: {rec['name']}"
    if "skipped" in rec:
        return f"{head}: skipped ({rec['skipped']})"
    parts = []
    for r in rec["results"]:
        if "value" in r and rec["metric"] != "value":
            parts.append(f"{r['provider']} {r['value']:.4g}")
        elif "value" in r:
            parts.append(f"{r['provider']} done ({r['seconds']} s)")
        else:
            parts.append(f"{r['provider']} {'skipped' if 'skipped' in r else 'ERROR'}: "
                         f"{r.get('skipped') or r.get('error')}"[:160])
    unit = rec["metric"] if rec["metric"] != "value" else ""
    line = f"{head} [{unit}] " + "; ".join(parts)
    if rec.get("speedups"):
        first = rec["results"][0]["provider"]
        line += f" | {first}: " + ", ".join(f"{v:.2f}x {k}" for k, v in rec["speedups"].items())
    if "error" in rec:
        line += f" | ERROR {rec['error']}"
    if rec.get("check") is not None and not rec["check"].get("ok", True):
        line += f" | CHECK FAILED {json.dumps(rec['check'], default=str)[:400]}"
    return line


# ----------------------------------------------------------------------------- the run
def _parse_timing(items) -> dict:
    out = {}
    for item in items or ():
        key, _, value = item.partition("=")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def _isolated(concept: str, case: Case, args) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "case.json")
        cmd = [sys.executable, "-m", "bench", "run", "--concept", concept, "--exact", case.name,
               "--device", args.device, "--out", out]
        for item in args.timing or ():
            cmd += ["--timing", item]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if os.path.exists(out):
            recs = json.load(open(out))["cases"]
            if recs:
                return recs[0]
        return dict(name=case.name, params=dict(case.params), metric=case.metric, work=case.work,
                    tags=list(case.tags), check=None, results=[],
                    error=f"child process exited {proc.returncode}", stderr=proc.stderr[-3000:])


def write(result: dict, path: str | None) -> None:
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as f:
            json.dump(result, f, indent=1, default=str)
            f.write("\n")


def cmd_run(args) -> int:
    args.device = args.device or default_device()
    prepare(args.device)
    load_before = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    result = dict(schema=SCHEMA, command="python -m bench " + " ".join(shlex.quote(a) for a in args.argv),
                  argv=list(args.argv), concepts=list(args.concept), **environment(args.device),
                  started=time.strftime("%Y-%m-%dT%H:%M:%S%z"), load_average=[load_before], cases=[])
    t0 = time.perf_counter()
    timing = _parse_timing(args.timing)
    status = 0
    for concept in args.concept:
        module = load(concept)
        for case in select(module.CASES, args.tag, args.case, args.exact):
            if args.device.split(":")[0] not in case.devices:
                rec = dict(name=case.name, params=dict(case.params), metric=case.metric, work=case.work,
                           tags=list(case.tags), check=None, results=[],
                           skipped=f"runs on {', '.join(case.devices)}, not {args.device}")
            elif args.isolate:
                rec = _isolated(concept, case, args)
            else:
                rec = run_case(module, case, args.device, timing=timing)
            rec = {"concept": concept, **rec}
            result["cases"].append(rec)
            status |= failed(rec)
            print(summary_line(rec), flush=True)
            result["wall_s"] = round(time.perf_counter() - t0, 1)
            write(result, args.out)
    result["load_average"].append(list(os.getloadavg()) if hasattr(os, "getloadavg") else None)
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    write(result, args.out)
    ran = [r for r in result["cases"] if "skipped" not in r]
    print(f"bench: {len(ran)} case(s) run, {len(result['cases']) - len(ran)} skipped, "
          f"{sum(map(failed, result['cases']))} failed, {result['wall_s']} s"
          + (f"; wrote {args.out}" if args.out else ""), flush=True)
    return 1 if status else 0


def cmd_list(args) -> int:
    for concept in args.concept or concepts():
        module = load(concept)
        cases = module.CASES if args.all else select(module.CASES, args.tag, args.case)
        print(f"{concept}: {len(cases)} case(s)")
        for c in cases:
            print(f"  {c.name}  [{c.metric}; {', '.join(c.devices)}; tags {', '.join(c.tags) or '-'}] "
                  + ", ".join(p.name for p in c.providers))
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m bench", description="inferspec's benchmarks (bench/runner.py)")
    sub = ap.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the cases of one or more concepts and write JSON")
    run.add_argument("--concept", action="append", required=True, help="repeatable")
    run.add_argument("--tag", action="append", default=[], help="only cases with this tag (repeatable)")
    run.add_argument("--case", action="append", default=[], help="only cases whose name contains this")
    run.add_argument("--exact", default=None, help=argparse.SUPPRESS)
    run.add_argument("--device", default=None, help="cuda or cpu (default: cuda when present)")
    run.add_argument("--out", default=None, help="write the JSON here (rewritten after every case)")
    run.add_argument("--isolate", action="store_true", help="each case in a child process")
    run.add_argument("--timing", action="append", default=[], metavar="KEY=VALUE",
                     help="override a timing option of every case (rounds, repeats, budget_ms, ...)")
    ls = sub.add_parser("list", help="list the cases")
    ls.add_argument("--concept", action="append", default=[])
    ls.add_argument("--tag", action="append", default=[])
    ls.add_argument("--case", action="append", default=[])
    ls.add_argument("--all", action="store_true", help="every case, the sweep and smoke ones too")
    return ap


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    args.argv = argv
    sys.path.insert(0, str(ROOT))
    return cmd_run(args) if args.command == "run" else cmd_list(args)
