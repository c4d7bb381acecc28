"""Kernel mutants: plant one bug in the *real* kernel source and load it as a fresh module.

``plant(path, old, new, name)`` reads ``path`` (relative to the repository), replaces ``old`` by
``new`` -- asserting that ``old`` occurs exactly once, so a mutant can never silently turn back
into the correct kernel when the source changes -- and executes the result as a new module
registered in ``sys.modules``. Its source is put in ``linecache`` so that ``triton.jit`` (which
reads a kernel's source with ``inspect``) and the Triton interpreter find the mutated text.
Not a mutant itself (the leading underscore keeps it out of ``mutant_files()``).
"""
from __future__ import annotations

import linecache
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def plant(path: str, old: str, new: str, name: str) -> types.ModuleType:
    source = (ROOT / path).read_text()
    count = source.count(old)
    if count != 1:
        raise AssertionError(f"mutant {name}: {old!r} occurs {count} times in {path}, expected exactly once")
    mutated = source.replace(old, new)
    module_name = f"inferspec_mutant_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    filename = str(ROOT / f"{path}<mutant {name}>")  # unique, never on disk
    linecache.cache[filename] = (len(mutated), None, mutated.splitlines(keepends=True), filename)
    module = types.ModuleType(module_name)
    module.__file__ = filename
    sys.modules[module_name] = module
    try:
        exec(compile(mutated, filename, "exec"), module.__dict__)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module
