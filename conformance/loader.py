"""Load an implementation: a dotted module name or a file/folder path, a planted bug
(``mutant:<concept>.<name>``) or its control.

A submission given as a path or as a module name other than the bundled ``reference`` and
``optimized`` is never imported here: it is a :class:`conformance.submission.Submission`, run in
worker processes, and its names resolve to proxies. The bundled implementations and the planted
bugs run in-process, for speed. How names resolve: :mod:`conformance.implementation`.
"""
from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
from pathlib import Path

from conformance.implementation import (Implementation, declared_token_exact, import_failed, import_path,
                                        registry_contracts, submission_home, syntax_error)
from conformance.options import looks_like_path

BUNDLED = ("reference", "optimized")


def load_implementation(spec: str, name: str | None = None, *, options=None,
                        in_process: bool = False) -> Implementation:
    """Load ``spec``: a dotted module name (``reference``, ``my_pkg.impl``) or a path to a ``.py``
    file or a package folder. Raises ``ValueError`` with the spec in the message if it cannot.

    The bundled implementations and mutants are imported here; anything else is a submission run
    in worker processes (``options``: :class:`conformance.submission.Options`), unless
    ``in_process`` (for a debugger: a crash of the submission then ends the run)."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"impl: expected a module name or a path, got {spec!r}")
    spec = spec.strip()
    from conformance import mutants
    from conformance.submission import Options, Submission
    from conformance.verdict import SubmissionDied, Verdict
    options = options or Options()
    if options.forbid_reference and options.allowed is None:
        from conformance.registry import allowed_imports
        options = dataclasses.replace(options, allowed=allowed_imports())
    if options.contracts is None:
        options = dataclasses.replace(options, contracts=registry_contracts())
    if spec.startswith(mutants.PREFIX):
        cid, mname = mutants.parse_spec(spec)
        return Implementation(name=name or mutants.impl_id(cid, mname), module=mutants.load(cid, mname), spec=spec,
                              token_exact=True)
    if spec.startswith(mutants.CONTROL_PREFIX):   # a mutant's control: the same, without the bug
        cid, mname = mutants.parse_spec(spec)
        return Implementation(name=name or mutants.control_id(cid, mname),
                              module=mutants.load(cid, mname, control=True), spec=spec,
                              token_exact=True)
    if looks_like_path(spec):
        path = Path(spec)
        if not path.exists():
            raise ValueError(f"--impl {spec}: no such file or folder")
        if path.is_dir() and not (path / "__init__.py").exists():
            raise ValueError(f"--impl {spec}: a folder must be a package (no __init__.py)")
        default_name = path.stem if path.is_file() else path.resolve().name
        if in_process:
            try:
                module = import_path(path)
            except Exception as exc:  # noqa: BLE001 -- the submission's own failure, told as such
                raise import_failed(spec, exc, path.resolve()) from exc
            return Implementation(name=name or default_name, module=module, spec=spec,
                                  token_exact=declared_token_exact(path))
        syntax = syntax_error(path.resolve())
        sub = Submission(name or default_name, spec, {"path": str(path.resolve())}, options,
                                   import_error=syntax[0] if syntax else None)
        if syntax and syntax[1]:  # the verdict with where it is: file, line, the line, a caret
            sub.import_failure = SubmissionDied(Verdict.IMPORT_FAILED, f"import failed: {syntax[0]}",
                                                          detail=syntax[1])
        return Implementation(name=name or default_name, module=None, spec=spec, submission=sub,
                              token_exact=declared_token_exact(path))
    root = spec.partition(".")[0]
    if root in BUNDLED or in_process:
        try:
            module = importlib.import_module(spec)
        except ModuleNotFoundError as exc:
            if exc.name and spec.startswith(exc.name):
                raise ValueError(f"--impl {spec}: no module named {exc.name!r} (a path must end in .py)") from exc
            if root in BUNDLED:
                raise
            raise import_failed(spec, exc, submission_home({"module": spec})) from exc
        except Exception as exc:  # noqa: BLE001
            if root in BUNDLED:
                raise
            raise import_failed(spec, exc, submission_home({"module": spec})) from exc
        return Implementation(name=name or spec, module=module, spec=spec,
                              token_exact=root in BUNDLED or getattr(module, "TOKEN_EXACT", False) is True)
    if importlib.util.find_spec(root) is None:
        raise ValueError(f"--impl {spec}: no module named {root!r} (a path must end in .py)")
    sub = Submission(name or spec, spec, {"module": spec}, options)
    found = importlib.util.find_spec(spec)
    origin = Path(found.origin) if found is not None and found.origin else None
    return Implementation(name=name or spec, module=None, spec=spec, submission=sub,
                          token_exact=origin is not None and declared_token_exact(origin))


def impl_specs_from_env() -> list[str]:
    """``INFERSPEC_IMPL``: implementations separated by commas (used when --impl is not given)."""
    raw = os.environ.get("INFERSPEC_IMPL", "")
    return [s.strip() for s in raw.split(",") if s.strip()]
