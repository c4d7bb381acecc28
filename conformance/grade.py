"""``inferspec grade``: check many submissions (one ``inferspec check`` each) into one gradebook,
then render it: a table, CSV, JSON or Markdown, one row per student and one column per concept.

A grading run builds a single structure, the gradebook, and writes it to ``gradebook.json`` in
its logs folder (``--logs DIR``; without it the work folder is temporary and removed at the
end). Every format is rendered from that structure, so ``inferspec grade --from DIR`` renders any
format again without re-grading. The gradebook::

    {"format": "inferspec-gradebook/1",
     "concepts": [the concept ids: the columns],
     "options": {the grading options: concept, profile, timeout, memory, ...},
     "students": [{
        "student": name, "path": the submission, "seconds": s, "exit": its check's exit code (null:
        stopped at --limit), "log" / "pytest_log" / "report": file names in the gradebook's folder,
        "error": null, or why the check wrote no report,
        "ok": no cell failed (nor crashed, timed out, failed to import, was forbidden, ...),
        "passed" / "total": tests passed / tests counted, summed over the implemented concepts,
        "concepts_passed" / "concepts_graded" / "score": concepts passed / the gradebook's concepts,
        "concepts": {id: {"status", "passed", "total", "skipped", "verdict", "rule", "error",
                          "reproduce", "text"}}}],
     "ok": bool}

A concept's counts are those of ``inferspec check --report-json`` (conformance/report.py): passed
is its ``passed``; total is ``passed + failed + not_run`` (tests not run because the submission's
worker had died count as not passed); tests skipped, because a name is not implemented or for
want of a GPU, are not counted. A concept passes when its status is ``passed``.
"""
from __future__ import annotations

import csv
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

from conformance.verdict import Verdict

FORMAT = "inferspec-gradebook/1"
GRADEBOOK = "gradebook.json"
FORMATS = ("table", "csv", "json", "markdown")
SUFFIX_FORMAT = {".csv": "csv", ".json": "json", ".md": "markdown", ".markdown": "markdown"}
DETAILS_SUFFIXES = {".csv": "csv", ".md": "markdown", ".markdown": "markdown"}
NO_REPORT = "no report"


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def legend(concepts: int) -> str:
    return ("total: tests passed/counted over the implemented concepts; -: not implemented\n"
            f"score: concepts passed/graded (graded: the {_n(concepts, 'concept')} above)")


# ------------------------------------------------------------------------------- submissions
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


# ------------------------------------------------------------------------------- one check
def _rule(nodeid: str, impl: str | None) -> str:
    """``path::test_x[bob-case]`` -> ``test_x[case]``: the rule, without the submission's name."""
    from conformance.report import short_test
    return short_test(nodeid, impl or "")


def _first_line(text: str | None) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def _cell(c: dict, impl: str | None) -> dict:
    """One concept of one student, from its cell in the check's report JSON."""
    status = c["status"]
    failure = c.get("first_failure") or {}
    verdict = c.get("verdict")
    passed = int(c.get("passed", 0))
    total = passed + int(c.get("failed", 0)) + int(c.get("not_run", 0))
    rule = error = reproduce = ""
    if status == Verdict.FAILED:  # an ordinary failure came first (the worker may have died after it)
        rule, error = _rule(failure.get("test", ""), impl), _first_line(failure.get("error"))
        if verdict:
            error += f"; then {verdict} in {_rule(c.get('verdict_test', ''), impl)}"
    elif verdict:  # crashed, exited, timed out, out of memory, import failed, forbidden
        rule, error = _rule(c.get("verdict_test") or failure.get("test", ""), impl), _first_line(verdict)
    elif status in (Verdict.PARTIAL, Verdict.NOT_IMPLEMENTED, Verdict.PASSED):
        missing = [n for n in c.get("not_implemented", []) if n not in c.get("stubbed", [])]
        notes = ([f"missing {', '.join(missing)}"] if missing else []) + (
            [f"stubbed {', '.join(c['stubbed'])}"] if c.get("stubbed") else []) + (
            ["only bad-input tests passed"] if c.get("only_bad_input") else [])
        error = "; ".join(notes) if status != Verdict.PASSED else ""
    elif status == Verdict.SKIPPED:
        error = _first_line((c.get("skip_reasons") or [""])[0])
    if failure and (status == Verdict.FAILED or verdict):
        reproduce = _first_line(failure.get("reproduce"))
    return {"status": status, "passed": passed, "total": total, "skipped": int(c.get("skipped", 0)),
            "verdict": verdict, "rule": rule, "error": error, "reproduce": reproduce, "text": c.get("text", "")}


def _student(name: str, path: Path, code: int | None, seconds: float, files: dict, data: dict | None,
             limit: float) -> dict:
    row = {"student": name, "path": str(path.resolve()), "exit": code, "seconds": round(seconds, 1), **files,
           "error": None, "ok": False, "concepts": {}}
    if data is None:
        row["error"] = (f"the check ran past --limit {limit:g} s and was stopped" if code is None
                        else f"inferspec check exited {code} without a report")
        return row
    impl = (data.get("implementations") or [None])[0]
    for cid, cells in data["concepts"].items():
        cell = cells.get(impl) or next(iter(cells.values()), None)
        if cell is not None:
            row["concepts"][cid] = _cell(cell, impl)
    row["ok"] = bool(data["ok"])
    return row


def check_command(sub: Path, args, report: Path, pytest_log: Path) -> list[str]:
    """The ``inferspec check`` of one submission, with every grading option passed on."""
    # one test process per check: grade's own --jobs runs the submissions side by side
    cmd = [sys.executable, "-m", "conformance", "check", str(sub.resolve()), "--report-json", str(report),
           "--no-table", "--jobs", "1", "--log", str(pytest_log)]
    from conformance.options import common_argv
    return cmd + common_argv(args) + ["--"] + list(args.pytest_args)


def _grade_one(sub: Path, name: str, args, workdir: Path) -> dict:
    import subprocess

    safe = name.replace("/", "__")
    files = {"report": f"{safe}.json", "log": f"{safe}.log", "pytest_log": f"{safe}.pytest.log"}
    # the check's own temporary files (its workers', pytest's) go here and are removed after it
    tmp = (workdir / f".tmp-{safe}").resolve()
    tmp.mkdir(exist_ok=True)
    report = workdir / files["report"]
    report.unlink(missing_ok=True)  # a report left in --logs DIR by an earlier run is not this check's
    cmd = check_command(sub, args, report, workdir / files["pytest_log"])
    t0 = time.monotonic()
    with open(workdir / files["log"], "w") as f:
        try:
            code = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=args.limit, cwd=os.getcwd(),
                                  env={**os.environ, "TMPDIR": str(tmp)}).returncode
        except subprocess.TimeoutExpired:
            code = None
    seconds = time.monotonic() - t0
    shutil.rmtree(tmp, ignore_errors=True)
    data = json.loads(report.read_text()) if report.exists() else None
    return _student(name, sub, code, seconds, files, data, args.limit)


# ------------------------------------------------------------------------------- the gradebook
def build(students: list[dict], concepts: list[str], options: dict | None = None) -> dict:
    """The gradebook of graded students (each from ``_student``): totals and score per student."""
    for st in students:
        cells = [st["concepts"][c] for c in concepts if c in st["concepts"]]
        implemented = [c for c in cells if c["status"] != Verdict.NOT_IMPLEMENTED]
        st["passed"] = sum(c["passed"] for c in implemented)
        st["total"] = sum(c["total"] for c in implemented)
        st["concepts_passed"] = sum(c["status"] == Verdict.PASSED for c in cells)
        st["concepts_graded"] = len(concepts)
        st["score"] = (round(st["concepts_passed"] / len(concepts), 3)
                       if concepts and st.get("error") is None else None)
    return {"format": FORMAT, "concepts": list(concepts), "options": dict(options or {}),
            "students": students, "ok": all(st["ok"] for st in students)}


def exit_code(book: dict) -> int:
    """0: no cell failed; 1: some cell failed (or died); 3: some check could not run."""
    if any(st.get("error") for st in book["students"]):
        return 3
    return 0 if all(st["ok"] for st in book["students"]) else 1


def load(path: str | Path) -> tuple[dict, Path]:
    """A gradebook and its folder, from the gradebook file or the logs folder holding it."""
    p = Path(path)
    if p.is_dir():
        p = p / GRADEBOOK
    if not p.is_file():
        raise ValueError(f"{path}: no {GRADEBOOK} there (a grading run with --logs DIR writes one)")
    try:
        book = json.loads(p.read_text())
    except ValueError as exc:
        raise ValueError(f"{p}: not a gradebook ({exc})") from None
    if not isinstance(book, dict) or book.get("format") != FORMAT:
        raise ValueError(f"{p}: not a gradebook (no \"format\": \"{FORMAT}\")")
    return book, p.parent


# ------------------------------------------------------------------------------- rendering
def cell_text(st: dict, concept: str) -> str:
    """A summary cell: ``23/23``, ``18/23 failed``, ``crashed``, ``timed out``, ``-`` (not
    implemented), ``no report`` (the check could not run)."""
    if st.get("error"):
        return NO_REPORT
    c = st["concepts"].get(concept)
    if c is None:
        return ""
    status = c["status"]
    if status == Verdict.PASSED:
        return f"{c['passed']}/{c['total']}"
    if status in (Verdict.FAILED, Verdict.PARTIAL):
        return f"{c['passed']}/{c['total']} {status}"
    if status == Verdict.NOT_IMPLEMENTED:
        return "-"
    return status  # skipped, crashed, exited, timed out, out of memory, import failed, forbidden


def total_text(st: dict) -> str:
    return "-" if st.get("error") else f"{st['passed']}/{st['total']}"


def score_text(st: dict) -> str:
    return "-" if st.get("score") is None else f"{st['concepts_passed']}/{st['concepts_graded']}"


def csv_header(concepts: list[str]) -> list[str]:
    return (["student"] + [f"{c}_{k}" for c in concepts for k in ("passed", "total", "status")]
            + ["passed", "total", "concepts_passed", "concepts_graded", "score", "ok"])


def _csv_row(st: dict, concepts: list[str]) -> list:
    row: list = [st["student"]]
    for cid in concepts:
        c = st["concepts"].get(cid)
        if st.get("error"):
            row += ["", "", NO_REPORT]
        elif c is None:
            row += ["", "", ""]
        else:
            row += [c["passed"], c["total"], c["status"]]
    error = bool(st.get("error"))
    return row + ["" if error else st["passed"], "" if error else st["total"], st["concepts_passed"],
                  st["concepts_graded"], "" if st.get("score") is None else st["score"],
                  "true" if st["ok"] else "false"]


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def render(book: dict, fmt: str, out, *, width: int | None = None, details: str | None = None) -> None:
    """Write the summary (one row per student) in ``fmt``: table, csv, json or markdown."""
    concepts, students = book["concepts"], book["students"]
    if fmt == "json":
        json.dump(book, out, indent=2)
        out.write("\n")
    elif fmt == "csv":
        w = csv.writer(out)
        w.writerow(csv_header(concepts))
        w.writerows(_csv_row(st, concepts) for st in students)
    elif fmt == "markdown":
        header = ["student"] + concepts + ["total", "score"]
        out.write("| " + " | ".join(_md(h) for h in header) + " |\n")
        out.write("|---|" + "---:|" * (len(header) - 1) + "\n")
        for st in students:
            cells = [st["student"]] + [cell_text(st, c) for c in concepts] + [total_text(st), score_text(st)]
            out.write("| " + " | ".join(_md(x) for x in cells) + " |\n")
        out.write("\n" + legend(len(concepts)).replace("\n", "  \n") + "  \n")
        if details:
            out.write(f"details: {details}\n")
    elif fmt == "table":
        _table(book, out, width, details)
    else:
        raise ValueError(f"unknown format {fmt!r}")


def _words(text: str) -> int:
    return max((len(w) for w in text.split()), default=0)


def _name_lines(name: str, width: int) -> str:
    """A concept's name over lines of at most ``width``, broken only after an underscore."""
    if len(name) <= width:
        return name
    lines = [""]
    for part in re.findall(r"[^_]*_|[^_]+$", name):
        if lines[-1] and len(lines[-1]) + len(part) > width:
            lines.append("")
        lines[-1] += part
    return "\n".join(lines)


def table_widths(book: dict, width: int) -> list[int]:
    """Widths of the table's columns (student, each concept, total, score) so that it fits
    ``width``, narrowed in this order: long student names to 16 (they end in an ellipsis), concept
    columns to their longest word (their cells wrap between words), concept names after an
    underscore, student names to 8. Counts and words are never split."""
    concepts, students = book["concepts"], book["students"]
    natural = [max([len("student")] + [len(st["student"]) for st in students])]
    word, part = [natural[0]], [natural[0]]
    for c in concepts:
        cells = [cell_text(st, c) for st in students]
        natural.append(max([len(c)] + [len(x) for x in cells]))
        word.append(max([len(c)] + [_words(x) for x in cells]))
        part.append(max([len(p) for p in re.findall(r"[^_]*_|[^_]+$", c)] + [_words(x) for x in cells]))
    for texts, head in (([total_text(st) for st in students], "total"), ([score_text(st) for st in students], "score")):
        natural.append(max([len(head)] + [len(x) for x in texts]))
    widths = list(natural)
    overhead = 2 * (len(widths) - 1)  # two spaces between columns, none at the edges
    concept_cols = range(1, len(concepts) + 1)
    for cols, floor in (([0], lambda j: min(natural[0], 16)), (concept_cols, lambda j: word[j]),
                        (concept_cols, lambda j: part[j]), ([0], lambda j: min(natural[0], 8))):
        while sum(widths) + overhead > width:
            i = max(cols, key=lambda j: widths[j] - floor(j))
            if widths[i] <= floor(i):
                break
            widths[i] -= 1
    return widths


def _table(book: dict, out, width: int | None, details: str | None) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from conformance.report import STYLE

    console = Console(file=out, width=width, highlight=False) if (out is not sys.stdout or width) else \
        Console(highlight=False)
    concepts, students = book["concepts"], book["students"]
    widths = table_widths(book, console.width)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))
    table.add_column("student", no_wrap=True, overflow="ellipsis", width=widths[0])
    for c, w in zip(concepts, widths[1:]):
        table.add_column(_name_lines(c, w), overflow="ellipsis", width=w)
    table.add_column("total", no_wrap=True, justify="right", width=widths[-2])
    table.add_column("score", no_wrap=True, justify="right", width=widths[-1])
    for st in students:
        cells = [Text(st["student"])]
        for c in concepts:
            status = NO_REPORT if st.get("error") else (st["concepts"].get(c) or {}).get("status", "-")
            cells.append(Text(cell_text(st, c), style=STYLE.get(status, "bold red")))
        cells += [Text(total_text(st)), Text(score_text(st), style="green" if st["ok"] else "bold red")]
        table.add_row(*cells)
    console.print(f"inferspec grade: {_n(len(students), 'student')}, {_n(len(concepts), 'concept')}", markup=False)
    console.print(table)
    console.print(legend(len(concepts)), markup=False)
    if details:
        console.print(f"details: {details}", markup=False, soft_wrap=True)


# ------------------------------------------------------------------------------- details
DETAILS_HEADER = ["student", "concept", "status", "passed", "total", "rule", "error", "reproduce", "log"]


def detail_rows(book: dict, folder: Path | None) -> list[dict]:
    """One row per (student, concept) that is not a clean pass nor not implemented, and one per
    student whose check wrote no report; log paths in ``folder`` (none when it is gone)."""
    rows = []
    for st in book["students"]:
        def log(key: str) -> str:
            return str(folder.resolve() / st[key]) if folder is not None and st.get(key) else ""
        if st.get("error"):
            rows.append({"student": st["student"], "concept": "", "status": NO_REPORT, "passed": "", "total": "",
                         "rule": "", "error": st["error"], "reproduce": "", "log": log("log")})
            continue
        for cid in book["concepts"]:
            c = st["concepts"].get(cid)
            if c is None or c["status"] in (Verdict.PASSED, Verdict.NOT_IMPLEMENTED):
                continue
            rows.append({"student": st["student"], "concept": cid, "status": c["status"], "passed": c["passed"],
                         "total": c["total"], "rule": c["rule"],
                         "error": c["error"], "reproduce": c["reproduce"], "log": log("pytest_log")})
    return rows


def _code(text: str) -> str:
    fence = "``" if "`" in text else "`"
    return f"{fence} {text} {fence}" if fence == "``" else f"`{text}`"


def render_details(book: dict, fmt: str, out, folder: Path | None) -> None:
    """The details (``detail_rows``) as CSV (one row each) or Markdown (a section per student)."""
    rows = detail_rows(book, folder)
    if fmt == "csv":
        w = csv.DictWriter(out, fieldnames=DETAILS_HEADER)
        w.writeheader()
        w.writerows(rows)
        return
    out.write("# inferspec grade: details\n")
    if not rows:
        out.write("\nEvery implemented concept passed for every student.\n")
    student = None
    for r in rows:
        if r["student"] != student:
            student = r["student"]
            out.write(f"\n## {student}\n\n")
        if not r["concept"]:
            out.write(f"- **{NO_REPORT}**: {r['error']}\n")
        else:
            counts = f"{r['passed']}/{r['total']} " if r["status"] in (Verdict.FAILED, Verdict.PARTIAL) else ""
            rule = f" in {_code(r['rule'])}" if r["rule"] else ""
            out.write(f"- **{r['concept']}** {counts}{r['status']}{rule}" + (f": {_code(r['error'])}" if r["error"] else "")
                      + "\n")
            if r["reproduce"]:
                out.write(f"  - reproduce: {_code(r['reproduce'])}\n")
        if r["log"]:
            out.write(f"  - log: {_code(r['log'])}\n")


# ------------------------------------------------------------------------------- the command
def _write(path: str | Path, fn) -> None:
    with open(path, "w", newline="") as f:
        fn(f)


def _usage(message: str) -> int:
    print(f"inferspec grade: {message}", file=sys.stderr)
    return 2


def cmd_grade(args) -> int:
    fmt = args.format or (SUFFIX_FORMAT.get(Path(args.output).suffix.lower()) if args.output else None) or "table"
    details_fmt = DETAILS_SUFFIXES.get(Path(args.details).suffix.lower()) if args.details else None
    if args.details and details_fmt is None:
        return _usage(f"--details {args.details}: name a .csv or .md file")
    if args.from_ is not None:
        grading = [o for o, v in (("submissions", args.submissions), ("--logs", args.logs),
                                  ("--concept", args.concept), ("--profile", args.profile),
                                  ("--timeout", args.timeout), ("--budget", getattr(args, "budget", None)),
                                  ("--memory", args.memory),
                                  ("--forbid-reference", args.forbid_reference), ("-- PYTEST_ARGS", args.pytest_args))
                   if v]
        if grading:
            return _usage(f"--from renders a gradebook again: {', '.join(grading)} would need a new grading run")
        try:
            book, folder = load(args.from_)
        except ValueError as exc:
            return _usage(str(exc))
        _emit(book, fmt, args.output, args.details, details_fmt, folder)
        return exit_code(book)
    if not args.submissions:
        return _usage("name the submissions to grade (.py files, packages, folders of them), "
                      "or --from LOGS to render a gradebook again")
    return _grade(args, fmt, details_fmt)


def _emit(book: dict, fmt: str, output: str | None, details: str | None, details_fmt: str | None,
          folder: Path | None) -> None:
    if details:
        _write(details, lambda f: render_details(book, details_fmt, f, folder))
    shown = details or (str(folder / "details.md") if folder is not None and (folder / "details.md").exists() else None)
    if output:
        _write(output, lambda f: render(book, fmt, f, details=shown))
    else:
        render(book, fmt, sys.stdout, details=shown)


def _grade(args, fmt: str, details_fmt: str | None) -> int:
    from concurrent.futures import ThreadPoolExecutor

    try:
        subs = _submissions(args.submissions)
    except ValueError as exc:
        return _usage(str(exc))
    if not subs:
        return _usage("no submissions found (.py files or packages)")
    from conformance.registry import concept_ids, split_ids
    wanted = split_ids(args.concept)
    known = concept_ids()
    unknown = [c for c in wanted if c not in known]
    if unknown:
        return _usage(f"unknown concept {unknown}; known: {', '.join(known)}")
    names = _grade_names(subs)
    keep = args.logs is not None
    workdir = Path(args.logs) if keep else Path(tempfile.mkdtemp(prefix="inferspec-grade-"))
    try:
        workdir.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        where = f"logs and gradebook in {workdir}" if keep else "a temporary folder, removed at the end: --logs DIR keeps it"
        jobs = max(1, min(args.jobs, len(subs)))
        print(f"inferspec grade: {_n(len(subs), 'submission')}, {jobs} at a time ({where})", file=sys.stderr)
        done, lock = [0], threading.Lock()

        def one(sub_name):
            row = _grade_one(sub_name[0], sub_name[1], args, workdir)
            with lock:
                done[0] += 1
                print(f"inferspec grade: [{done[0]}/{len(subs)}] {row['student']} ({row['seconds']:.0f} s)",
                      file=sys.stderr, flush=True)
            return row

        with ThreadPoolExecutor(max_workers=jobs) as ex:
            rows = list(ex.map(one, zip(subs, names)))
        seen = set(wanted) | {c for r in rows for c in r["concepts"]}
        concepts = [c for c in known if c in seen] + sorted(seen - set(known))
        options = {"concept": wanted, "profile": args.profile, "timeout": args.timeout,
                   "budget": getattr(args, "budget", None), "memory": args.memory,
                   "forbid_reference": args.forbid_reference, "limit": args.limit, "jobs": args.jobs,
                   "pytest_args": list(args.pytest_args)}
        book = build(rows, concepts, options)
        folder = workdir if keep else None
        if keep:
            (workdir / GRADEBOOK).write_text(json.dumps(book, indent=2) + "\n")
            for name, f in (("details.md", "markdown"), ("details.csv", "csv")):
                _write(workdir / name, lambda out, f=f: render_details(book, f, out, workdir))
        _emit(book, fmt, args.output, args.details, details_fmt, folder)
        print(f"inferspec grade: {_n(len(subs), 'submission')} in {time.monotonic() - t0:.0f} s"
              + (f"; gradebook: {workdir / GRADEBOOK} (inferspec grade --from {workdir} renders it again)"
                 if keep else ""), file=sys.stderr)
        return exit_code(book)
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)


def add_parser(sub, common_options) -> None:
    g = sub.add_parser(
        "grade", help="check many submissions into one gradebook: one row per student, one column per concept",
        description="Check each submission (a .py file or package; a folder of them) with `inferspec check`, "
                    "--jobs at a time, into one gradebook, and print it: one row per student; per concept "
                    "tests passed/total and a status word where it is not a clean pass; the total over "
                    "implemented concepts and the score (concepts passed / concepts graded). "
                    "--logs DIR keeps each check's log and report, the gradebook (DIR/gradebook.json) and the "
                    "details (DIR/details.md, .csv); without it they go to a temporary folder removed at the "
                    "end. --from DIR renders a kept gradebook again in any format without re-grading. "
                    "Exit codes: 0 no cell failed; 1 some cell failed, crashed, timed out, failed to import or "
                    "was forbidden; 2 usage error; 3 a check could not run. With --from: the gradebook's.")
    g.add_argument("submissions", nargs="*", help=".py files, package folders, or folders of them")
    g.add_argument("--jobs", "-j", type=int, default=max(1, (os.cpu_count() or 2)),
                   help="submissions checked at a time (default: the number of CPUs)")
    g.add_argument("--format", choices=FORMATS, default=None,
                   help="table, csv, json or markdown (default: from --output's suffix, else table)")
    g.add_argument("--output", "-o", default=None, help="write the summary here (default: stdout)")
    g.add_argument("--details", default=None, metavar="PATH",
                   help="write each failing cell's rule, error, reproduce command and log here (.csv or .md)")
    g.add_argument("--logs", default=None, metavar="DIR",
                   help="keep each submission's log and report, gradebook.json and details.{md,csv} in DIR "
                        "(default: a temporary folder, removed at the end)")
    g.add_argument("--from", dest="from_", default=None, metavar="LOGS",
                   help="render the gradebook of an earlier run (its --logs DIR or its gradebook.json) "
                        "without grading again")
    g.add_argument("--limit", type=float, default=3600,
                   help="wall-clock seconds one submission's check may take in all (default 3600)")
    common_options(g)
    g.epilog = "Arguments after `--` are passed to pytest unchanged."
    g.set_defaults(func=cmd_grade, in_process=False)
