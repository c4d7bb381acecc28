"""``inferspec grade``: check many submissions, one ``inferspec check`` each, and print one table
(submission x concept)."""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path


GRADE_STATUS = {"passed": "passed", "partial": "partial", "failed": "FAILED", "not implemented": "-",
                "skipped": "skipped"}


def _submissions(paths: list[str]) -> list[Path]:
    """Files and packages to grade: a .py file, a package folder, or a folder of them."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_file() and p.suffix == ".py":
            out.append(p)
        elif p.is_dir() and (p / "__init__.py").exists():
            out.append(p)
        elif p.is_dir():
            for child in sorted(p.iterdir()):
                if child.name.startswith((".", "_")):
                    continue
                if (child.is_file() and child.suffix == ".py") or (child.is_dir() and (child / "__init__.py").exists()):
                    out.append(child)
        else:
            raise ValueError(f"{raw}: not a .py file, a package or a folder")
    return out


def _grade_names(subs: list[Path]) -> list[str]:
    names = [s.stem if s.is_file() else s.name for s in subs]
    for i, n in enumerate(names):
        if names.count(n) > 1:
            names[i] = f"{subs[i].resolve().parent.name}/{n}"
    return names


def _grade_one(sub: Path, name: str, args, workdir: Path) -> dict:
    import subprocess
    import time as _time

    report = workdir / f"{name.replace('/', '__')}.json"
    log = workdir / f"{name.replace('/', '__')}.log"
    # one test process per check: grade's own --jobs runs the submissions side by side
    cmd = [sys.executable, "-m", "conformance", "check", str(sub.resolve()), "--report-json", str(report),
           "--no-table", "--jobs", "1", "--log", str(workdir / f"{name.replace('/', '__')}.pytest.log")]
    for c in args.concept:
        cmd += ["--concept", c]
    if args.profile:
        cmd += ["--profile", args.profile]
    if args.timeout is not None:
        cmd += ["--timeout", f"{args.timeout:g}"]
    if args.memory is not None:
        cmd += ["--memory", f"{args.memory:g}"]
    if args.forbid_reference:
        cmd.append("--forbid-reference")
    cmd += ["--"] + list(args.pytest_args)
    t0 = _time.monotonic()
    with open(log, "w") as f:
        try:
            code = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=args.limit,
                                  cwd=os.getcwd()).returncode
        except subprocess.TimeoutExpired:
            code = None
    row = {"name": name, "path": str(sub), "exit": code, "seconds": round(_time.monotonic() - t0, 1),
           "log": str(log), "concepts": {}}
    if report.exists():
        data = json.loads(report.read_text())
        for cid, cells in data["concepts"].items():
            cell = next(iter(cells.values()), None)
            if cell is not None:
                row["concepts"][cid] = {"status": cell["status"], "text": cell["text"],
                                        "verdict": cell.get("verdict"), "test": cell.get("verdict_test") or
                                        (cell.get("first_failure") or {}).get("test", ""),
                                        "error": ((cell.get("first_failure") or {}).get("error") or "").splitlines()[:1]}
        row["ok"] = bool(data["ok"])
    else:
        row["ok"] = False
        row["error"] = ("grading timed out" if code is None else f"inferspec check exited {code} without a report")
    return row


def _short(cell: dict | None) -> str:
    if cell is None:
        return ""
    status, text = cell["status"], cell["text"]
    if cell.get("verdict") and status != "failed":
        return cell["verdict"]  # crashed (signal 11), timed out after 5 s, import failed: ...
    if status in ("failed",):
        return text
    if status in ("passed", "partial"):
        return status + (" (bad input only)" if "only bad-input" in text else "")
    if status == "not implemented":
        return "-"
    return text


def _grade_output(rows: list[dict], concepts: list[str], fmt: str, out) -> None:
    import csv

    if fmt == "json":
        json.dump({"concepts": concepts, "submissions": rows,
                   "ok": all(r["ok"] for r in rows)}, out, indent=2)
        out.write("\n")
        return
    header = ["submission"] + concepts + ["result"]
    body = []
    for r in rows:
        cells = [_short(r["concepts"].get(c)) for c in concepts]
        if "error" in r:
            cells = [r["error"]] * len(concepts)
        body.append([r["name"]] + cells + ["ok" if r["ok"] else "FAIL"])
    if fmt == "csv":
        w = csv.writer(out)
        w.writerow(header)
        w.writerows(body)
        return
    if fmt == "markdown":
        esc = lambda t: t.replace("|", "\\|")  # noqa: E731
        out.write("| " + " | ".join(header) + " |\n|" + "---|" * len(header) + "\n")
        for b in body:
            out.write("| " + " | ".join(esc(x) for x in b) + " |\n")
        return
    from rich.console import Console
    from rich.table import Table
    from conformance.report import STYLE

    console = Console(file=out, highlight=False) if out is not sys.stdout else Console(highlight=False)
    table = Table(title=f"inferspec grade: {len(rows)} submissions", title_justify="left")
    table.add_column("submission", no_wrap=True)
    for c in concepts:
        table.add_column(c, overflow="fold")
    table.add_column("result", no_wrap=True)
    for r, b in zip(rows, body):
        styled = [b[0]]
        for c, text in zip(concepts, b[1:-1]):
            status = (r["concepts"].get(c) or {}).get("status", "-")
            styled.append(f"[{STYLE.get(status, 'bold red')}]{text.replace('[', chr(92) + '[')}[/]")
        styled.append("[green]ok[/]" if r["ok"] else "[bold red]FAIL[/]")
        table.add_row(*styled)
    console.print(table)


def cmd_grade(args) -> int:
    import time as _time
    from concurrent.futures import ThreadPoolExecutor

    from conformance.registry import CONCEPTS

    try:
        subs = _submissions(args.submissions)
    except ValueError as exc:
        print(f"inferspec grade: {exc}", file=sys.stderr)
        return 2
    if not subs:
        print("inferspec grade: no submissions found (.py files or packages)", file=sys.stderr)
        return 2
    unknown = [c for raw in args.concept for c in raw.split(",") if c.strip() and c.strip() not in CONCEPTS]
    if unknown:
        print(f"inferspec grade: unknown concept {unknown}; known: {', '.join(CONCEPTS)}", file=sys.stderr)
        return 2
    names = _grade_names(subs)
    workdir = Path(args.logs or tempfile.mkdtemp(prefix="inferspec-grade-"))
    workdir.mkdir(parents=True, exist_ok=True)
    t0 = _time.monotonic()
    print(f"inferspec grade: {len(subs)} submissions, {args.jobs} at a time (logs in {workdir})", file=sys.stderr)
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
        rows = list(ex.map(lambda sn: _grade_one(sn[0], sn[1], args, workdir), zip(subs, names)))
    seen = {c for r in rows for c in r["concepts"]}
    concepts = [c for c in CONCEPTS if c in seen] + sorted(seen - set(CONCEPTS))
    if args.output:
        with open(args.output, "w", newline="") as f:
            _grade_output(rows, concepts, args.format, f)
    else:
        _grade_output(rows, concepts, args.format, sys.stdout)
    print(f"inferspec grade: {len(subs)} submissions in {_time.monotonic() - t0:.0f} s", file=sys.stderr)
    if any("error" in r for r in rows):
        return 3
    return 0 if all(r["ok"] for r in rows) else 1


def add_parser(sub, common_options) -> None:
    g = sub.add_parser("grade", help="check many submissions and print one table (submission x concept)",
                       description="Exit codes: 0 no cell failed; 1 some cell failed, crashed, timed out, "
                                   "failed to import or was forbidden; 2 usage error; 3 a check could not run.")
    g.add_argument("submissions", nargs="+", help=".py files, package folders, or folders of them")
    g.add_argument("--jobs", "-j", type=int, default=max(1, (os.cpu_count() or 2)),
                   help="submissions checked at a time (default: the number of CPUs)")
    g.add_argument("--format", choices=["table", "csv", "json", "markdown"], default="table")
    g.add_argument("--output", "-o", default=None, help="write the table here (default: stdout)")
    g.add_argument("--logs", default=None, help="folder for each submission's log and JSON report")
    g.add_argument("--limit", type=float, default=3600,
                   help="wall-clock seconds one submission's check may take in all (default 3600)")
    common_options(g)
    g.epilog = "Arguments after `--` are passed to pytest unchanged."
    g.set_defaults(func=cmd_grade, in_process=False)
