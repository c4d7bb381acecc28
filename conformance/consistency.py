"""The pieces of every concept checked against each other, not trusted to agree: run before every
pytest session (the plugin refuses to run while there is a problem) and by the suite's own tests.
"""
from __future__ import annotations

import importlib

from conformance import mutants
from conformance.registry import CONCEPTS, DOCS_DIR, MIN_MUTANTS, SPEC_DIR


def problems() -> list[str]:
    """Every disagreement between a concept's pieces (empty when consistent)."""
    out = CONCEPTS.discovery_errors()
    for c in CONCEPTS.values():
        ref = importlib.import_module(f"reference.{c.id}")
        if not c.contract:
            out.append(f"reference/{c.id}.py: __all__ is empty or missing (it is the contract)")
        for name in (*getattr(ref, "__all__", ()), *getattr(ref, "__optional__", ()), *c.vocabulary):
            if not hasattr(ref, name):
                out.append(f"reference/{c.id}.py: contract/vocabulary name {name!r} is not defined there")
        if DOCS_DIR.is_dir() and not (DOCS_DIR / f"{c.id}.md").exists():
            out.append(f"concept {c.id!r}: no docs page docs/{c.id}.md")
        if not (SPEC_DIR / c.id / "mutants.py").exists():
            out.append(f"concept {c.id!r}: no spec_tests/{c.id}/mutants.py (its planted bugs)")
            continue
        try:
            table = mutants.table(c.id)
        except Exception as exc:  # a broken mutants.py is a problem to report, not a crash
            out.append(f"spec_tests/{c.id}/mutants.py: {type(exc).__name__}: {exc}")
            continue
        if len(table) < MIN_MUTANTS:
            out.append(f"spec_tests/{c.id}/mutants.py: {len(table)} mutants, at least {MIN_MUTANTS} required")
    return out
