"""The ``inferspec`` command.

    inferspec check [IMPL ...] [--concept ID] [--report-json PATH] [--profile P] [--timeout S]
                    [--memory GB] [--forbid-reference] [--in-process] [-- PYTEST_ARGS]
        Run the spec against implementations (default: the bundled reference and optimized) and
        print the per-concept table. A submission runs in worker processes (a crash or a hang
        costs only its cell). Exit 0 only if every implemented concept passes.
    inferspec grade SUBMISSIONS... [--jobs N] [--format table|csv|json|markdown] [--output PATH]
                    [--concept ID] [--timeout S] [--memory GB] [--forbid-reference]
        Check each submission (a .py file or package; a folder of them) with `inferspec check`,
        N at a time, and print one table: submission x concept. Exit 0 if no cell failed,
        1 if some cell failed (or crashed, timed out, ...), 2 on a usage error, 3 if a check
        itself could not run.
    inferspec list
        Concepts, their course lessons, and which bundled implementations provide them.
    inferspec new PATH [--concepts a,b] [--force]
        Write a student template from the reference's signatures and docstrings.
    inferspec docs [--check]
        Regenerate the registry-determined parts of docs/ (index tables, contract tables);
        with --check, exit 1 if any is stale.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import conformance

# the bundled check (no implementation named) uses a lighter profile: the same properties with
# fewer generated examples; `--profile dev` (or ci, thorough) asks for more
BUNDLED_CHECK_PROFILE = "quick"
PACKAGE_ROOT = Path(conformance.__file__).resolve().parent.parent
SPEC_DIR = PACKAGE_ROOT / "spec_tests"


def _wanted_concepts(args) -> list[str]:
    """The concept ids of every ``--concept`` (repeatable, comma-separated)."""
    return [c.strip() for raw in args.concept for c in raw.split(",") if c.strip()]


def _pytest_args(args) -> list[str]:
    from conformance.registry import CONCEPTS, NOT_CONCEPTS
    wanted = _wanted_concepts(args)
    if wanted and all(c in CONCEPTS for c in wanted):  # collect only those concepts' folders
        out = [str(SPEC_DIR / c) for c in wanted]
    else:
        out = [str(SPEC_DIR)]
    out += ["-q", "-rfE", "-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning"]
    for folder in NOT_CONCEPTS:  # check runs the specification only, never the suite's own tests
        out += ["--ignore", str(SPEC_DIR / folder)]
    if not (PACKAGE_ROOT / "conftest.py").exists():  # installed without the repository
        out += ["-p", "conformance.plugin", "--rootdir", str(PACKAGE_ROOT), "-o", "timeout=300"]
    for impl in args.impl:
        out += ["--impl", impl]
    for c in args.concept:
        out += ["--concept", c]
    if args.profile:
        out += [f"--hypothesis-profile={args.profile}"]
    if args.timeout is not None:
        out += ["--timeout", f"{args.timeout:g}"]
    if args.memory is not None:
        out += ["--memory", f"{args.memory:g}"]
    if args.forbid_reference:
        out.append("--forbid-reference")
    if args.in_process:
        out.append("--in-process")
    if getattr(args, "no_table", False):
        out.append("--no-report")
    return out + list(args.pytest_args)


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask, e.g. under taskset or a container's
    cpuset), not the machine's count."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


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
    import contextlib

    import pytest
    from rich.console import Console

    from conformance import profiles, progress, report
    from conformance.plugin import RESULTS

    workdir = Path(tempfile.mkdtemp(prefix="inferspec-"))
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
            print("inferspec check: no test was collected (unknown --concept?)", file=sys.stderr)
        elif not Path(report_path).exists():
            print(f"inferspec check: pytest exited {code} before any report was written", file=sys.stderr)
        return code or 2
    results = live.config.stash.get(RESULTS, None) if live.config is not None else None
    if results is not None and not args.no_table:
        report.print_table(results)
    print(f"{live.summary()} (pytest's log: {log_path})")
    return 0 if json.loads(Path(report_path).read_text())["ok"] else 1


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
    from conformance import template

    ids = [c.strip() for c in args.concepts.split(",") if c.strip()] if args.concepts else None
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


def _common_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--concept", action="append", default=[], help="only these concepts")
    p.add_argument("--profile", choices=["quick", "dev", "ci", "thorough"], default=None,
                   help="Hypothesis profile (default: dev, or ci when CI=true; the bundled check: quick)")
    p.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="seconds one test may take (default 300); a submission's call past it is "
                        "killed: its cell is 'timed out after S s'")
    p.add_argument("--memory", type=float, default=None, metavar="GB",
                   help="cap each submission worker's memory (address space) at GB gigabytes")
    p.add_argument("--forbid-reference", action="store_true",
                   help="a submission may not import reference/ or optimized/ (vocabulary excepted)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="inferspec", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="run the spec and print the per-concept table")
    c.add_argument("impl", nargs="*", help="module names or .py paths (default: reference, optimized)")
    _common_options(c)
    c.add_argument("--report-json", default=None, help="also write the table as JSON here")
    c.add_argument("--in-process", action="store_true",
                   help="run submissions in pytest's own process (for a debugger; a crash ends the run)")
    c.add_argument("--no-table", action="store_true", help="do not print the table (JSON only)")
    c.add_argument("--log", default=None, metavar="PATH",
                   help="write pytest's own output here (default: a file in a new temporary folder)")
    c.add_argument("--jobs", "-j", type=int, default=None,
                   help="test processes (pytest-xdist; default: one per CPU, at most 8, when more than two "
                        "concepts are checked; 1 = in one process)")
    c.epilog = "Arguments after `--` are passed to pytest unchanged."
    c.set_defaults(func=cmd_check)
    from conformance import grade
    grade.add_parser(sub, _common_options)
    ls = sub.add_parser("list", help="concepts, lessons, and which bundled impls provide them")
    ls.set_defaults(func=cmd_list)
    n = sub.add_parser("new", help="write a student template")
    n.add_argument("path")
    n.add_argument("--concepts", default=None, help="comma-separated concept ids (default: all)")
    n.add_argument("--force", action="store_true")
    n.set_defaults(func=cmd_new)
    d = sub.add_parser("docs", help="regenerate the docs' index and contract tables from the registry")
    d.add_argument("--check", action="store_true", help="exit 1 if a generated block is stale")
    d.set_defaults(func=cmd_docs)
    pn = sub.add_parser("pins", help="list the pinned examples that name no mutant (or a wrong one)")
    pn.set_defaults(func=cmd_pins)
    sub.add_parser("power", help="run every mutant under dev-profile seeds; each must be caught on every "
                                 "seed (inferspec power --help)", add_help=False)
    sub.add_parser("flakes", help="run the spec and the bundled tests under fresh random dev seeds; every "
                                  "run must pass (inferspec flakes --help)", add_help=False)
    return p


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
