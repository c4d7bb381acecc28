"""The ``inferspec`` command.

    inferspec check [IMPL ...] [--concept ID] [--report-json PATH] [--profile P] [--timeout S]
                    [--memory GB] [--forbid-reference] [--in-process] [-- PYTEST_ARGS]
        Run the spec against implementations (default: the bundled reference and optimized) and
        print the per-concept table. A submission runs in worker processes (a crash or a hang
        costs only its cell). Exit codes: see CHECK_EXIT_CODES (`inferspec check --help`).
    inferspec grade SUBMISSIONS... [--jobs N] [--format table|csv|json|markdown] [--output PATH]
                    [--concept ID] [--timeout S] [--memory GB] [--forbid-reference]
        Check each submission (a .py file or package; a folder of them) with `inferspec check`,
        N at a time, and print one table: submission x concept. Exit 0 if no cell failed,
        1 if some cell failed (or crashed, timed out, ...), 2 on a usage error, 3 if a check
        itself could not run.
    inferspec list
        Concepts, their course lessons, and which bundled implementations provide them.
    inferspec new PATH [--concept ID] [--force]
        Write a student template from the reference's signatures and docstrings.
    inferspec docs [--check]
        Regenerate the registry-determined parts of docs/ (index tables, contract tables);
        with --check, exit 1 if any is stale.
"""
from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
import tempfile
from pathlib import Path

from conformance.options import common_options, looks_like_path, usable_cpus
from conformance.registry import ROOT as PACKAGE_ROOT, SPEC_DIR  # light: no torch

# the bundled check (no implementation named) uses a lighter profile: the same properties with
# fewer generated examples; `--profile dev` (or ci, thorough) asks for more
BUNDLED_CHECK_PROFILE = "quick"

CHECK_EXIT_CODES = """\
exit codes:
  0  every implemented concept passed (a concept not implemented does not count)
  1  some concept failed: a failing test, or its cell crashed, exited, timed out, ran out of
     memory, failed to import or was forbidden
  2  usage error: an unknown concept, no such file or module, a bad option, or pytest
     arguments after `--` that pytest rejects or that select no test
  3  the run did not complete: interrupted, a spec file failed to import, an internal error
     (the last lines of pytest's log are shown)"""

# Usage errors are answered before anything heavy is imported: this module, argparse and the
# concept ids (conformance.registry.concept_ids) only -- never torch, pytest or Hypothesis.


def _wanted_concepts(args) -> list[str]:
    from conformance.registry import split_ids
    return split_ids(args.concept)


def _unknown_concepts(wanted: list[str]) -> list[str]:
    """One line per id of ``wanted`` that is no concept (with the closest id, if one is close),
    then the known ids; empty when every id is known."""
    from conformance.registry import concept_ids
    known = concept_ids()
    lines = []
    for c in dict.fromkeys(wanted):
        if c not in known:
            close = difflib.get_close_matches(c, known, n=1)
            lines.append(f"unknown concept {c!r}" + (f" (did you mean {close[0]}?)" if close else ""))
    if lines:
        lines.append(f"known concepts: {', '.join(known)}")
    return lines


def _close_files(name: str, folder: Path) -> list[str]:
    """.py files and package folders of ``folder`` whose names are close to ``name``."""
    try:
        entries = [e for e in folder.iterdir() if not e.name.startswith(".") and
                   ((e.is_file() and e.suffix == ".py") or (e.is_dir() and (e / "__init__.py").exists()))]
    except OSError:
        return []
    by_name = {e.name: e.name for e in entries}
    by_name.update({e.stem: e.name for e in entries if e.is_file()})   # `my_impl` -> my_impl.py
    return list(dict.fromkeys(by_name[m] for m in difflib.get_close_matches(name, list(by_name), n=3, cutoff=0.75)))


def _impl_problem(spec: str) -> str | None:
    """Why ``spec`` (an IMPL of check) names no implementation, or None. The checks of
    conformance.loader.load_implementation that need no import, made before pytest starts."""
    if spec.startswith(("mutant:", "control:")):   # the plugin checks the planted bugs' names
        return None
    if looks_like_path(spec):
        path = Path(spec)
        if not path.exists():
            folder = path.parent
            close = [m if folder == Path(".") else str(folder / m) for m in _close_files(path.name, folder)]
            hint = f" (did you mean {' or '.join(close)}?)" if close else ""
            return f"{spec}: no such file{'' if spec.endswith('.py') else ' or folder'}{hint}"
        if path.is_dir() and not (path / "__init__.py").exists():
            return f"{spec}: a folder must be a package (it has no __init__.py)"
        if path.is_file() and path.suffix != ".py":
            return f"{spec}: not a .py file"
        return None
    import importlib.util
    root = spec.partition(".")[0]
    try:
        found = importlib.util.find_spec(root) is not None
    except (ImportError, ValueError):
        found = False
    if found:
        return None
    close = _close_files(root, Path("."))
    hint = f"; did you mean {' or '.join(close)}? (a file is named by its path, ending in .py)" if close else \
        " (a file is named by its path, ending in .py)"
    return f"{spec}: no module named {root!r} and no such file{hint}"


def _check_usage(args) -> list[str]:
    """check's usage errors (unknown concepts, implementations that do not exist), found before
    pytest (and torch) is imported."""
    problems = [p for p in map(_impl_problem, args.impl) if p]
    return problems + _unknown_concepts(_wanted_concepts(args))


def _pytest_args(args) -> list[str]:
    from conformance.registry import NOT_CONCEPTS, concept_ids
    wanted = _wanted_concepts(args)
    known = concept_ids()
    if wanted and all(c in known for c in wanted):  # collect only those concepts' folders
        out = [str(SPEC_DIR / c) for c in wanted]
    else:
        out = [str(SPEC_DIR)]
    out += ["-q", "-rfE", "-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning"]
    for folder in NOT_CONCEPTS:  # check runs the specification only, never the suite's own tests
        out += ["--ignore", str(SPEC_DIR / folder)]
    if not (PACKAGE_ROOT / "conftest.py").exists():  # installed without the repository
        out += ["-p", "conformance.entry", "--rootdir", str(PACKAGE_ROOT), "-o", "timeout=300"]
    for impl in args.impl:
        out += ["--impl", impl]
    for c in args.concept:
        out += ["--concept", c]
    if args.profile:
        out += [f"--hypothesis-profile={args.profile}"]
    if args.timeout is not None:  # the deadline of each call into the submission
        out += ["--call-timeout", f"{args.timeout:g}"]
    if getattr(args, "budget", None) is not None:
        out += ["--budget", f"{args.budget:g}"]
    if args.memory is not None:
        out += ["--memory", f"{args.memory:g}"]
    if args.forbid_reference:
        out.append("--forbid-reference")
    if args.in_process:
        out.append("--in-process")
    if getattr(args, "no_table", False):
        out.append("--no-report")
    return out + list(args.pytest_args)


def _jobs(args) -> int:
    """Test processes for ``check``: ``--jobs`` if given, else one per CPU (at most 8) when
    pytest-xdist is installed and more than two concepts are checked, else 1 (starting a test
    process costs ~4 s, more than one concept's tests take). Never with --in-process or when
    pytest's own -n is passed."""
    if args.in_process or "no:xdist" in args.pytest_args or any(
            a.startswith(("-n", "--numprocesses")) for a in args.pytest_args):
        return 1
    if getattr(args, "jobs", None) is not None:
        return max(1, args.jobs)
    try:
        import xdist  # noqa: F401
    except ImportError:
        return 1
    wanted = set(_wanted_concepts(args))
    if wanted and len(wanted) <= 2:  # a worker costs ~4 s to start: more than one concept's tests
        return 1
    return max(1, min(8, usable_cpus()))


def cmd_check(args) -> int:
    problems = _check_usage(args)
    if problems:
        for line in problems:
            print(f"inferspec check: {line}", file=sys.stderr)
        return 2

    import contextlib

    import pytest
    from rich.console import Console

    from conformance import profiles, progress, report
    from conformance.plugin import RESULTS

    # a temporary folder only for what the user did not place: the log (kept: its path is printed)
    # and the JSON report (removed at the end when the log is elsewhere)
    made = not (args.report_json and getattr(args, "log", None))
    workdir = Path(tempfile.mkdtemp(prefix="inferspec-")) if made else None
    report_path = args.report_json or str(workdir / "report.json")
    if args.profile is None and not args.impl:
        args.profile = BUNDLED_CHECK_PROFILE
    argv = _pytest_args(args) + ["--report-json", report_path, "--no-report"]
    jobs = _jobs(args)
    if jobs > 1:  # the spec has no expensive module fixtures: spread single tests, not files
        argv += ["-n", str(jobs), "--dist", "load"]
    what = "the bundled implementations (reference, optimized)" if not args.impl else ", ".join(args.impl)
    print(f"inferspec check: {what} against the spec (profile {args.profile or profiles.default_profile()}, "
          f"{jobs} process{'es' if jobs > 1 else ''})", flush=True)
    log_path = Path(args.log) if getattr(args, "log", None) else workdir / "pytest.log"
    # the live display draws on a duplicate of the terminal's descriptor: pytest's fd-level output
    # capture (active while a test runs) redirects fd 1, never this one
    term = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    console = Console(file=term, force_terminal=sys.stdout.isatty() or None, highlight=False)
    live = progress.ProgressPlugin(console)
    try:
        with open(log_path, "w") as log, contextlib.redirect_stdout(log):
            code = pytest.main(argv, plugins=[live])
    finally:
        live.stop()
        term.close()
    code = int(code)
    if not Path(report_path).exists() or code not in (0, 1):
        tail = log_path.read_text(errors="replace").splitlines()[-40:]
        print("\n".join(tail), file=sys.stderr)
        if code == 5:
            print("inferspec check: no test was collected (pytest arguments after -- that select nothing?)",
                  file=sys.stderr)
        elif code == 4:
            print("inferspec check: stopped before any test ran (the error above)", file=sys.stderr)
        elif not Path(report_path).exists():
            print(f"inferspec check: pytest exited {code} before any report was written", file=sys.stderr)
        # pytest's own codes mapped onto check's (CHECK_EXIT_CODES): 4 usage error, 5 nothing
        # collected -> 2; 2 interrupted (or a collection error), 3 internal error, or no report -> 3
        return _tidy(workdir, args, 2 if code in (4, 5) else 3)
    results = live.config.stash.get(RESULTS, None) if live.config is not None else None
    if results is not None and not args.no_table:
        report.print_table(results)
    print(f"{live.summary()} (pytest's log: {log_path})")
    return _tidy(workdir, args, 0 if json.loads(Path(report_path).read_text())["ok"] else 1)


def _tidy(workdir: Path | None, args, code: int) -> int:
    """Remove check's temporary folder when it holds nothing the user was told about (the log is
    elsewhere): no empty ``inferspec-*`` folder per run in the temp directory."""
    if workdir is not None and getattr(args, "log", None):
        import shutil
        shutil.rmtree(workdir, ignore_errors=True)
    return code


def cmd_list(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from conformance.loader import BUNDLED, load_implementation
    from conformance.registry import CONCEPTS

    if os.environ.get("TRITON_INTERPRET") is None:
        try:
            import torch
            if not torch.cuda.is_available():
                os.environ["TRITON_INTERPRET"] = "1"
        except Exception:  # pragma: no cover
            pass
    impls = [load_implementation(b) for b in BUNDLED]
    table = Table(title="inferspec concepts", title_justify="left")
    table.add_column("concept", no_wrap=True)
    table.add_column("lessons")
    for b in BUNDLED:
        table.add_column(b)
    table.add_column("title")
    for c in CONCEPTS.values():
        provided = []
        for impl in impls:
            missing = impl.missing(*c.contract)
            if not missing:
                provided.append("[green]yes[/]")
            elif len(missing) < len(c.contract):
                provided.append(f"[yellow]partial[/] (no {', '.join(m.split('.')[-1] for m in missing)})")
            else:
                provided.append("[dim]-[/]")
        table.add_row(c.id, ", ".join(c.lessons), *provided, f"{c.title} [dim]({c.docs})[/]")
    Console(width=max(140, Console().width)).print(table)
    return 0


def cmd_new(args) -> int:
    ids = _wanted_concepts(args) or None
    problems = _unknown_concepts(ids or [])
    if problems:
        for line in problems:
            print(f"inferspec new: {line}", file=sys.stderr)
        return 2
    from conformance import template

    try:
        path = template.write(args.path, ids, force=args.force)
    except (ValueError, FileExistsError) as exc:
        print(f"inferspec new: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {path}: fill in a function, then run `inferspec check {path}`")
    return 0


def cmd_docs(args) -> int:
    from conformance import docs

    if args.check:
        stale = docs.check()
        for line in stale:
            print(f"inferspec docs --check: {line}", file=sys.stderr)
        return 1 if stale else 0
    for path in docs.write():
        print(f"rewrote {path}")
    return 0


def cmd_pins(args) -> int:
    from conformance import pins

    return pins.main()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="inferspec", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="run the spec and print the per-concept table",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("impl", nargs="*", help="module names or .py paths (default: reference, optimized)")
    common_options(c)
    c.add_argument("--report-json", default=None, help="also write the table as JSON here")
    c.add_argument("--in-process", action="store_true",
                   help="run submissions in pytest's own process (for a debugger; a crash ends the run)")
    c.add_argument("--no-table", action="store_true", help="do not print the table (JSON only)")
    c.add_argument("--log", default=None, metavar="PATH",
                   help="write pytest's own output here (default: a file in a new temporary folder)")
    c.add_argument("--jobs", "-j", type=int, default=None,
                   help="test processes (pytest-xdist; default: one per CPU, at most 8, when more than two "
                        "concepts are checked; 1 = in one process)")
    c.epilog = "Arguments after `--` are passed to pytest unchanged.\n\n" + CHECK_EXIT_CODES
    c.set_defaults(func=cmd_check)
    from conformance import grade
    grade.add_parser(sub, common_options)
    ls = sub.add_parser("list", help="concepts, lessons, and which bundled impls provide them")
    ls.set_defaults(func=cmd_list)
    n = sub.add_parser("new", help="write a student template")
    n.add_argument("path")
    n.add_argument("--concept", action="append", default=[], metavar="ID",
                   help="only these concepts (repeatable or comma-separated; default: all)")
    n.add_argument("--concepts", action="append", dest="concept", help=argparse.SUPPRESS)  # the old name
    n.add_argument("--force", action="store_true")
    n.set_defaults(func=cmd_new)
    d = sub.add_parser("docs", help="regenerate the docs' index and contract tables from the registry")
    d.add_argument("--check", action="store_true", help="exit 1 if a generated block is stale")
    d.set_defaults(func=cmd_docs)
    pn = sub.add_parser("pins", help="list the pinned examples that name no mutant (or a wrong one)")
    pn.set_defaults(func=cmd_pins)
    up = sub.add_parser("upstream", help="list (or --fetch, with git and network) the wrapped engines' "
                                         "upstream files that the third-party set needs")
    up.add_argument("--fetch", action="store_true", help="fetch the missing ones from GitHub")
    up.set_defaults(func=cmd_upstream)
    sub.add_parser("power", help="run every mutant under dev-profile seeds; each must be caught on every "
                                 "seed (inferspec power --help)", add_help=False)
    sub.add_parser("flakes", help="run the spec and the bundled tests under fresh random dev seeds; every "
                                  "run must pass (inferspec flakes --help)", add_help=False)
    return p


def upstream_needs() -> list[tuple[str, str, str, tuple[str, ...]]]:
    """(adapter, repo, commit, files) of every ``spec_tests/*/third_party*.py`` declaring UPSTREAM."""
    import ast
    needs = []
    for path in sorted(SPEC_DIR.glob("*/third_party*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "UPSTREAM" for t in node.targets):
                repo, commit, files = ast.literal_eval(node.value)
                needs.append((str(path.relative_to(PACKAGE_ROOT)), repo, commit, tuple(files)))
    return needs


def cmd_upstream(args) -> int:
    from conformance import upstream
    missing = 0
    for adapter, repo, commit, files in upstream_needs():
        try:
            where = upstream.locate(repo, commit, files)
            state = f"present in {where}"
        except upstream.Unavailable as exc:
            if args.fetch:
                try:
                    where = upstream.fetch(repo, commit, files)
                    state = f"fetched into {where}"
                except Exception as fexc:  # noqa: BLE001 -- git's own failure, told
                    missing += 1
                    state = f"MISSING, fetch failed: {fexc}"
            else:
                missing += 1
                state = f"MISSING ({exc})"
        print(f"{adapter}: {repo}@{commit[:12]} ({len(files)} files): {state}")
    return 1 if missing else 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1:]
    if argv[:1] == ["power"]:
        from conformance import power
        return power.main(argv[1:])
    if argv[:1] == ["flakes"]:
        from conformance import flakes
        return flakes.main(argv[1:])
    args = build_parser().parse_args(argv)
    args.pytest_args = extra
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
