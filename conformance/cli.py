"""The ``inferspec`` command.

    inferspec check [IMPL ...] [--concept ID] [--report-json PATH] [--profile P] [-- PYTEST_ARGS]
        Run the spec against implementations (default: the bundled reference and optimized) and
        print the per-concept table. Exit 0 only if every implemented concept passes.
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

PACKAGE_ROOT = Path(conformance.__file__).resolve().parent.parent
SPEC_DIR = PACKAGE_ROOT / "spec_tests"


def _pytest_args(args) -> list[str]:
    from conformance.registry import NOT_CONCEPTS
    out = [str(SPEC_DIR), "-q", "-rfE", "-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning"]
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
    return out + list(args.pytest_args)


def cmd_check(args) -> int:
    import pytest

    report_path = args.report_json or os.path.join(tempfile.mkdtemp(prefix="inferspec-"), "report.json")
    argv = _pytest_args(args) + ["--report-json", report_path]
    if not args.impl:
        print("inferspec check: the bundled implementations (reference, optimized) against the spec")
    code = pytest.main(argv)
    if not Path(report_path).exists():
        print(f"inferspec check: pytest exited {int(code)} before any report was written", file=sys.stderr)
        return int(code) or 2
    if code == 5:
        print("inferspec check: no test was collected (unknown --concept?)", file=sys.stderr)
        return 5
    report = json.loads(Path(report_path).read_text())
    if code not in (0, 1, 5):  # interrupted, internal or usage error
        return int(code)
    return 0 if report["ok"] else 1


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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="inferspec", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="run the spec and print the per-concept table")
    c.add_argument("impl", nargs="*", help="module names or .py paths (default: reference, optimized)")
    c.add_argument("--concept", action="append", default=[], help="only these concepts")
    c.add_argument("--report-json", default=None, help="also write the table as JSON here")
    c.add_argument("--profile", choices=["dev", "ci", "thorough"], default=None,
                   help="Hypothesis profile (default: dev, or ci when CI=true)")
    c.epilog = "Arguments after `--` are passed to pytest unchanged."
    c.set_defaults(func=cmd_check)
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
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1:]
    args = build_parser().parse_args(argv)
    args.pytest_args = extra
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
