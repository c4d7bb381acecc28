"""``inferspec grade`` reads like a gradebook: one grading run, one gradebook
(``gradebook.json``), every format rendered from it, ``--from`` renders it again without grading,
one row per student with passed/total per concept, a total and a score, details in their own
file, a table that fits 80 columns without splitting a word, and no temporary folder left behind.

The rendering tests build a gradebook from hand-written check reports (the shape ``inferspec check
--report-json`` writes) and are fast; the end-to-end run grades a good, a crashing and a hanging
submission (heavy: about a minute).
"""
from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conformance import cli, grade

pytestmark = pytest.mark.meta

LONG = "a_student_with_a_very_long_name"
CONCEPTS = ["kv_bytes", "metrics", "stopping", "sampling", "paged_attention"]


def _cell(status, passed=0, failed=0, not_run=0, skipped=0, test="", error="", verdict=None, kind=None,
          not_implemented=(), stubbed=(), only_bad_input=False):
    """A cell of a check's report JSON (conformance/report.py's Results.to_dict)."""
    failure = ({"test": test, "error": error, "example": "", "reproduce": f"pytest '{test}' --impl x.py\n(or ...)",
                "failures": [], "output": ""} if test else None)
    return {"required": [], "passed": passed, "failed": failed, "skipped": skipped, "not_run": not_run,
            "not_implemented": list(not_implemented), "stubbed": list(stubbed), "skip_reasons": [],
            "first_failure": failure, "passed_bad_input": 0, "verdict": verdict, "verdict_kind": kind,
            "verdict_test": test if verdict else "", "first_is_death": bool(verdict), "status": status,
            "text": f"{status} (...)", "only_bad_input": only_bad_input}


def _report(impl, cells):
    return {"implementations": [impl], "concepts": {c: {impl: cell} for c, cell in cells.items()},
            "suite_failures": [],
            "ok": not any(c["failed"] or c["verdict"] for c in cells.values())}


def _t(name, impl):
    return f"spec_tests/x/test_x.py::{name}[{impl}]"


def _book():
    """Four students over five concepts: a clean pass, ordinary failures and a stub, deaths, and
    one whose check wrote no report."""
    passed = {c: _cell("passed", passed=n) for c, n in zip(CONCEPTS, (23, 40, 31, 55, 12))}
    alice = _report("alice", passed)
    bob = _report("bob", {
        "kv_bytes": _cell("failed", passed=18, failed=5, test=_t("test_course_7b_example", "bob"),
                          error="AssertionError: 8 != 16\nassert 8 == 16"),
        "metrics": _cell("passed", passed=40, skipped=3, not_implemented=["metrics.optional"]),
        "stopping": _cell("partial", passed=2, stubbed=["stopping.StopChecker"],
                          not_implemented=["stopping.StopChecker"], only_bad_input=True),
        "sampling": _cell("not implemented", not_implemented=["sampling.sample"]),
        "paged_attention": _cell("failed", passed=10, failed=1, not_run=1, error="ValueError: page 3",
                                 test="spec_tests/x/test_x.py::test_pages[bob-case3]"),
    })
    bob["concepts"]["paged_attention"]["bob"].update(
        verdict="crashed (signal 11)", verdict_kind="crashed", verdict_test=_t("test_later", "bob"),
        first_is_death=False)
    bob["ok"] = False
    long = _report(LONG, {
        "kv_bytes": _cell("passed", passed=23),
        "metrics": _cell("exited", failed=1, not_run=39, test=_t("test_ttft", LONG), error="exited (4) in test_ttft",
                         verdict="exited (4)", kind="exited"),
        "stopping": _cell("timed out", passed=7, failed=1, not_run=23, test=_t("test_state_machine", LONG),
                          error="timed out", verdict="timed out after 5 s", kind="timed out"),
        "sampling": _cell("import failed", failed=1, not_run=54, test=_t("test_top_p", LONG), error="import failed",
                          verdict="import failed: SyntaxError: invalid syntax (x.py:3)", kind="import failed"),
        "paged_attention": _cell("passed", passed=12),
    })
    students = [grade._student(name, Path(f"/class/{name}.py"), code, 3.0,
                               {"report": f"{name}.json", "log": f"{name}.log", "pytest_log": f"{name}.pytest.log"},
                               data, 3600)
                for name, code, data in (("alice", 0, alice), ("bob", 1, bob), (LONG, 1, long), ("dora", 2, None))]
    return grade.build(students, CONCEPTS, {"concept": CONCEPTS})


def _render(book, fmt, **kw):
    out = io.StringIO()
    grade.render(book, fmt, out, **kw)
    return out.getvalue()


# --- the gradebook --------------------------------------------------------------------------------
def test_counts_and_score_come_from_the_check_report():
    """passed/total are the report's counts (passed; passed + failed + not run; skipped tests not
    counted), the rule loses the submission's name, the error is one line, and the score is concepts
    passed / concepts graded. Catches: counting skipped tests, re-deriving counts, a rule still
    carrying ``[bob]``, a multi-line error, a score over implemented concepts only."""
    book = _book()
    alice, bob, long, dora = book["students"]
    kv = bob["concepts"]["kv_bytes"]
    assert (kv["passed"], kv["total"], kv["status"]) == (18, 23, "failed")
    assert kv["rule"] == "test_course_7b_example" and kv["error"] == "AssertionError: 8 != 16"
    assert kv["reproduce"] == "pytest 'spec_tests/x/test_x.py::test_course_7b_example[bob]' --impl x.py"
    assert (bob["concepts"]["metrics"]["passed"], bob["concepts"]["metrics"]["total"]) == (40, 40)  # 3 skipped
    pa = bob["concepts"]["paged_attention"]
    assert (pa["passed"], pa["total"]) == (10, 12) and pa["rule"] == "test_pages[case3]"
    assert pa["error"] == "ValueError: page 3; then crashed (signal 11) in test_later"
    assert "missing" not in bob["concepts"]["stopping"]["error"]
    assert bob["concepts"]["stopping"]["error"] == "stubbed stopping.StopChecker; only bad-input tests passed"
    # total over implemented concepts: sampling (not implemented) adds nothing
    assert (bob["passed"], bob["total"]) == (18 + 40 + 2 + 10, 23 + 40 + 2 + 12)
    assert (bob["concepts_passed"], bob["concepts_graded"], bob["score"]) == (1, 5, 0.2)
    assert (alice["passed"], alice["total"], alice["score"], alice["ok"]) == (161, 161, 1.0, True)
    hang = long["concepts"]["stopping"]
    assert (hang["status"], hang["passed"], hang["total"]) == ("timed out", 7, 31)
    assert hang["verdict"] == hang["error"] == "timed out after 5 s" and hang["rule"] == "test_state_machine"
    assert long["concepts"]["sampling"]["total"] == 55 and long["score"] == 0.4
    assert dora["error"] == "inferspec check exited 2 without a report" and dora["score"] is None
    assert [grade.exit_code(b) for b in (book, grade.build([alice], CONCEPTS), grade.build([alice, bob], CONCEPTS))] \
        == [3, 0, 1]


# --- the four formats -----------------------------------------------------------------------------
def test_csv_has_one_row_per_student_with_counts_and_status_in_their_own_columns():
    """Catches: a row per cell instead of per student, counts missing or as '18/23' text (a
    spreadsheet reads that as a date), status and details in one cell, no total or score."""
    rows = list(csv.DictReader(io.StringIO(_render(_book(), "csv"))))
    assert [r["student"] for r in rows] == ["alice", "bob", LONG, "dora"]
    by = {r["student"]: r for r in rows}
    bob = by["bob"]
    assert (bob["kv_bytes_passed"], bob["kv_bytes_total"], bob["kv_bytes_status"]) == ("18", "23", "failed")
    assert (bob["sampling_passed"], bob["sampling_total"], bob["sampling_status"]) == ("0", "0", "not implemented")
    assert (bob["passed"], bob["total"], bob["concepts_passed"], bob["concepts_graded"]) == ("70", "77", "1", "5")
    assert float(bob["score"]) == 0.2 and bob["ok"] == "false" and by["alice"]["ok"] == "true"
    assert by[LONG]["stopping_status"] == "timed out" and by[LONG]["metrics_status"] == "exited"
    assert by["dora"]["kv_bytes_status"] == "no report" and by["dora"]["score"] == "" and by["dora"]["total"] == ""
    statuses = {r[f"{c}_status"] for r in rows for c in CONCEPTS}
    assert statuses <= {"passed", "failed", "partial", "not implemented", "exited", "timed out", "import failed",
                        "no report"}, statuses   # a word, never a rule name or an error
    assert list(rows[0]) == grade.csv_header(CONCEPTS)


def test_markdown_has_a_column_per_concept_a_total_and_a_score():
    """Catches: a missing column, a status cell without counts, an unescaped '|' breaking a row."""
    text = _render(_book(), "markdown", details="logs/details.md")
    lines = text.splitlines()
    assert lines[0] == "| student | " + " | ".join(CONCEPTS) + " | total | score |"
    rows = {ln.split(" | ")[0].lstrip("| "): ln for ln in lines[2:6]}
    assert rows["alice"] == "| alice | 23/23 | 40/40 | 31/31 | 55/55 | 12/12 | 161/161 | 5/5 |"
    assert rows["bob"] == "| bob | 18/23 failed | 40/40 | 2/2 partial | - | 10/12 failed | 70/77 | 1/5 |"
    assert rows[LONG] == f"| {LONG} | 23/23 | exited | timed out | import failed | 12/12 | 42/161 | 2/5 |"
    assert rows["dora"].count("no report") == 5 and rows["dora"].endswith("| - | - |")
    assert all(ln.count(" | ") == len(CONCEPTS) + 2 for ln in lines[:1] + lines[2:6])
    assert "score: concepts passed/graded" in text and "details: logs/details.md" in text
    odd = _book()
    odd["students"][0]["student"] = "a|b"
    assert "| a\\|b | 23/23 |" in _render(odd, "markdown")


def test_json_is_the_gradebook_and_loads_back(tmp_path):
    """Catches: a JSON format that is not the gradebook (so --from could not read it), or a loader
    that accepts any JSON."""
    book = _book()
    (tmp_path / "gradebook.json").write_text(_render(book, "json"))
    for where in (tmp_path, tmp_path / "gradebook.json"):
        again, folder = grade.load(where)
        assert again == json.loads(json.dumps(book)) and folder == tmp_path
    (tmp_path / "other.json").write_text('{"concepts": {}}')
    with pytest.raises(ValueError, match="not a gradebook"):
        grade.load(tmp_path / "other.json")
    with pytest.raises(ValueError, match="no gradebook.json"):
        grade.load(tmp_path / "nowhere")


def _tokens(text):
    return text.split()


@pytest.mark.parametrize("width", [80, 100])
def test_the_table_fits_80_columns_and_splits_no_word(width):
    """Five concepts, one a long name, and a long student name at width 80: every line fits, every
    word of every cell and every count appears whole, a concept's name breaks only after an
    underscore, and only the student's name may end in an ellipsis. Catches the reporter's
    'FAILED test_ma / tches_...' (overflow="fold") and counts cut to '12…'."""
    book = _book()
    text = _render(book, "table", width=width)
    lines = text.splitlines()
    assert max(len(ln) for ln in lines) <= width, text
    words = {w for st in book["students"] for c in CONCEPTS for w in grade.cell_text(st, c).split()}
    words |= {grade.total_text(st) for st in book["students"]} | {grade.score_text(st) for st in book["students"]}
    words |= {p for c in CONCEPTS for p in [c] + re.findall(r"[^_]*_|[^_]+$", c)}
    words |= {"student", "total", "score"} | set(grade.legend(len(CONCEPTS)).split())
    words |= {"inferspec", "grade:", "4", "students,", "5", "concepts"} | {st["student"] for st in book["students"]}
    for st in book["students"]:
        assert re.search(rf"^{re.escape(st['student'][:7])}", text, re.M), text
    tokens = _tokens(text.replace("─", " "))
    odd = [t for t in tokens if t not in words and not (t.endswith("…") and LONG.startswith(t[:-1]))]
    assert not odd, f"split or unknown words {odd}:\n{text}"
    for st in book["students"]:        # counts never cut
        assert grade.total_text(st) in tokens and grade.score_text(st) in tokens


def test_the_table_on_a_wide_terminal_has_one_line_per_student():
    """Catches a layout that wraps even when there is room."""
    book = _book()
    text = _render(book, "table", width=200)
    for st in book["students"]:
        line = next(ln for ln in text.splitlines() if ln.startswith(st["student"]))
        for c in CONCEPTS:
            assert grade.cell_text(st, c) in line
    assert "paged_attention" in text


def test_details_name_the_rule_the_error_the_reproduce_command_and_the_log(tmp_path):
    """One row per cell that is not a clean pass (nor not implemented) and one per check that
    wrote no report. Catches: details missing from their file, passes listed as details, a
    log path that does not point into the logs folder."""
    book = _book()
    out = io.StringIO()
    grade.render_details(book, "csv", out, tmp_path)
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert [(r["student"], r["concept"], r["status"]) for r in rows] == [
        ("bob", "kv_bytes", "failed"), ("bob", "stopping", "partial"), ("bob", "paged_attention", "failed"),
        (LONG, "metrics", "exited"), (LONG, "stopping", "timed out"), (LONG, "sampling", "import failed"),
        ("dora", "", "no report")]
    kv = rows[0]
    assert kv["rule"] == "test_course_7b_example" and kv["error"] == "AssertionError: 8 != 16"
    assert kv["reproduce"].startswith("pytest ") and kv["log"] == str(tmp_path / "bob.pytest.log")
    assert rows[-1]["log"] == str(tmp_path / "dora.log") and "without a report" in rows[-1]["error"]
    assert all("\n" not in v for r in rows for v in r.values())
    out = io.StringIO()
    grade.render_details(book, "markdown", out, None)
    md = out.getvalue()
    assert "## bob" in md and "## alice" not in md and "log:" not in md   # no folder: no log paths
    assert "- **stopping** timed out in `test_state_machine`: `timed out after 5 s`" in md


def test_from_renders_a_kept_gradebook_in_every_format_and_refuses_grading_options(tmp_path, capsys):
    """`inferspec grade --from LOGS` through the command line: the format follows -o's suffix,
    --details writes its file, the exit code is the gradebook's; grading options, a missing
    gradebook, a details file that is neither .csv nor .md and no submissions are usage errors."""
    book = _book()
    (tmp_path / "gradebook.json").write_text(json.dumps(book))
    assert cli.main(["grade", "--from", str(tmp_path), "-o", str(tmp_path / "g.csv"),
                     "--details", str(tmp_path / "d.md")]) == 3
    assert next(csv.reader(open(tmp_path / "g.csv"))) == grade.csv_header(CONCEPTS)
    assert "## dora" in (tmp_path / "d.md").read_text()
    assert cli.main(["grade", "--from", str(tmp_path / "gradebook.json"), "-o", str(tmp_path / "g.md")]) == 3
    assert (tmp_path / "g.md").read_text().startswith("| student | kv_bytes |")
    book["students"] = book["students"][:1]
    (tmp_path / "gradebook.json").write_text(json.dumps(book))
    assert cli.main(["grade", "--from", str(tmp_path), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["students"][0]["student"] == "alice"
    for argv, message in ((["--from", str(tmp_path), "--concept", "kv_bytes"], "--concept"),
                          (["--from", str(tmp_path), "x.py"], "submissions"),
                          (["--from", str(tmp_path), "--", "-k", "x"], "PYTEST_ARGS"),
                          (["--from", str(tmp_path / "nowhere")], "no gradebook.json"),
                          (["--from", str(tmp_path), "--details", "d.txt"], ".csv or .md"),
                          ([], "name the submissions")):
        assert cli.main(["grade", *argv]) == 2, argv
        assert message in capsys.readouterr().err, argv


def test_every_grading_option_reaches_each_check(tmp_path):
    """Every option grade shares with check (--concept, --profile, --timeout, --memory,
    --forbid-reference, and any added to both later) arrives in each submission's check with its
    value, and the arguments after `--` too. Catches an option grade accepts and drops."""
    parser = cli.build_parser()
    argv = ["grade", "x.py", "--concept", "kv_bytes,metrics", "--profile", "ci", "--timeout", "7", "--memory", "2",
            "--forbid-reference"]
    if "budget" in vars(parser.parse_args(["check"])):
        argv += ["--budget", "30"]
    g = parser.parse_args(argv)
    g.pytest_args = ["-k", "course_7b"]
    cmd = grade.check_command(Path("x.py"), g, tmp_path / "r.json", tmp_path / "p.log")
    at = cmd.index("--")
    assert cmd[1:4] == ["-m", "conformance", "check"] and cmd[at + 1:] == ["-k", "course_7b"]
    c = parser.parse_args(cmd[3:at])
    shared = (set(vars(g)) & set(vars(c))) - {"command", "func", "jobs"}
    assert {"concept", "profile", "timeout", "memory", "forbid_reference"} <= shared
    assert {k: getattr(c, k) for k in shared} == {k: getattr(g, k) for k in shared}
    assert (c.jobs, c.report_json, c.impl) == (1, str(tmp_path / "r.json"), [str(Path("x.py").resolve())])


# --- end to end -----------------------------------------------------------------------------------
# A correct kv_cache_bytes importing nothing of the reference: the one test_isolation.py uses.
from spec_tests.suite.test_isolation import KV  # noqa: E402


def _grade(args, tmpdir, cwd):
    env = {**os.environ, "INFERSPEC_PROFILE": "dev", "TMPDIR": str(tmpdir)}
    return subprocess.run([sys.executable, "-m", "conformance", "grade", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600, env=env)


@pytest.mark.heavy
def test_grade_a_folder_of_good_crashing_and_hanging_submissions(tmp_path):
    """A good, a crashing (os._exit(4)) and a hanging submission, two at a time, --timeout 5: one
    row each with its verdict; the CSV, JSON and Markdown are then rendered from the logs folder with
    the submissions gone (so nothing is re-graded), and no temporary folder is left behind."""
    folder, tmpdir, logs = tmp_path / "class", tmp_path / "tmp", tmp_path / "logs"
    folder.mkdir()
    tmpdir.mkdir()
    (folder / "good.py").write_text(KV)
    (folder / "crash.py").write_text(KV.replace("    size = ", "    import os; os._exit(4)\n    size = "))
    (folder / "hang.py").write_text(KV.replace("    size = ", "    while True: pass\n    size = "))
    out = tmp_path / "grade.csv"
    r = _grade([str(folder), "--jobs", "2", "--concept", "kv_bytes", "--timeout", "5", "-o", str(out),
                "--logs", str(logs), "--details", str(tmp_path / "details.csv"), "--", "-k", "course_7b"],
               tmpdir, tmp_path)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    rows = {row["student"]: row for row in csv.DictReader(out.open())}
    assert list(rows) == ["crash", "good", "hang"], rows
    assert (rows["good"]["kv_bytes_passed"], rows["good"]["kv_bytes_total"], rows["good"]["kv_bytes_status"],
            rows["good"]["score"], rows["good"]["ok"]) == ("1", "1", "passed", "1.0", "true"), rows
    assert rows["crash"]["kv_bytes_status"] == "exited" and rows["crash"]["ok"] == "false", rows
    assert rows["hang"]["kv_bytes_status"] == "timed out" and rows["hang"]["score"] == "0.0", rows
    book = json.loads((logs / "gradebook.json").read_text())
    cells = {st["student"]: st["concepts"]["kv_bytes"] for st in book["students"]}
    assert cells["crash"]["verdict"].startswith("exited (4)"), cells
    assert cells["hang"]["verdict"].startswith("timed out"), cells
    details = {d["student"]: d for d in csv.DictReader((tmp_path / "details.csv").open())}
    assert set(details) == {"crash", "hang"} and details["hang"]["error"].startswith("timed out")
    assert Path(details["crash"]["log"]).is_file() and details["crash"]["rule"] == "test_course_7b_example"
    assert (logs / "details.md").is_file() and (logs / "details.csv").is_file()
    assert not [p.name for p in logs.iterdir() if p.name.startswith(".tmp")]    # the checks' temp files
    assert not [p.name for p in tmpdir.iterdir() if p.name.startswith("inferspec")], list(tmpdir.iterdir())

    shutil.rmtree(folder)  # nothing left to grade: --from must only render
    stamp = {p.name: p.stat().st_mtime_ns for p in logs.iterdir()}
    again = tmp_path / "again.csv"
    r = _grade(["--from", str(logs), "-o", str(again)], tmpdir, tmp_path)
    assert r.returncode == 1 and again.read_text() == out.read_text(), r.stderr
    r = _grade(["--from", str(logs / "gradebook.json"), "--format", "json"], tmpdir, tmp_path)
    assert json.loads(r.stdout) == book
    r = _grade(["--from", str(logs), "--format", "markdown"], tmpdir, tmp_path)
    assert r.stdout.startswith("| student | kv_bytes | total | score |") and "| hang | timed out |" in r.stdout
    assert {p.name: p.stat().st_mtime_ns for p in logs.iterdir()} == stamp

    # without --logs the work folder is temporary and removed at the end
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "good.py").write_text(KV)
    r = _grade([str(tmp_path / "one"), "--concept", "kv_bytes", "--format", "csv", "--", "-k", "course_7b"],
               tmpdir, tmp_path)
    assert r.returncode == 0 and "good,1,1,passed" in r.stdout, r.stdout + r.stderr[-2000:]
    assert "--logs DIR keeps it" in r.stderr
    assert not list(tmpdir.iterdir()), list(tmpdir.iterdir())
