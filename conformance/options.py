"""What the commands share: the options ``check`` and ``grade`` both take (``grade`` passes them
on to each submission's check) and the CPUs a run may use. Light: argparse and os only."""
from __future__ import annotations

import argparse
import os


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask, e.g. under taskset or a container's
    cpuset), not the machine's count."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def looks_like_path(spec: str) -> bool:
    """How an ``--impl`` value is read: a path ends in .py or contains a separator; anything else
    is a dotted module name (so the bundled ``reference`` is imported as a module even from the
    repository root)."""
    return spec.endswith(".py") or os.sep in spec or "/" in spec


# The options `inferspec check` and pytest (conformance/entry.py) both take, in the same words
# (pytest spells --timeout as --call-timeout: pytest-timeout owns --timeout).
HELP = {
    "concept": "only these concepts (repeatable or comma-separated; `inferspec list` lists them)",
    "timeout": "seconds one call into a submission may take (default 60); a call past it is killed and "
               "its concept's verdict is 'timed out after S s ... during <the call>'",
    "budget": "seconds of examples one property may spend on a submission (default by profile: quick 60, "
              "dev 120, ci 300, thorough 1800); past it the property starts no new example and stops "
              "shrinking: never a failure, a failing property shows the best counterexample found",
    "memory": "cap each submission worker's address space (RLIMIT_AS) at GB gigabytes; exceeding it is "
              "the verdict 'out of memory'",
    "forbid_reference": "a submission may not import reference/ or optimized/ (only the data types the "
                        "concepts declare as vocabulary); an attempt is its cell's verdict",
}


def common_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--concept", action="append", default=[], metavar="ID", help=HELP["concept"])
    p.add_argument("--profile", choices=["quick", "dev", "ci", "thorough"], default=None,
                   help="Hypothesis profile (default: dev, or ci when CI=true; the bundled check: quick)")
    p.add_argument("--timeout", type=float, default=None, metavar="S", help=HELP["timeout"])
    p.add_argument("--budget", type=float, default=None, metavar="S", help=HELP["budget"])
    p.add_argument("--memory", type=float, default=None, metavar="GB", help=HELP["memory"])
    p.add_argument("--forbid-reference", action="store_true", help=HELP["forbid_reference"])


def common_argv(args) -> list[str]:
    """The values of the options :func:`common_options` defines, as arguments of ``inferspec
    check`` (``grade`` passes them on to each submission's check)."""
    out: list[str] = []
    for c in args.concept:
        out += ["--concept", c]
    if args.profile:
        out += ["--profile", args.profile]
    for name in ("timeout", "budget", "memory"):
        if getattr(args, name, None) is not None:
            out += [f"--{name}", f"{getattr(args, name):g}"]
    if args.forbid_reference:
        out.append("--forbid-reference")
    return out
