"""Planted-bug implementations: the suite must catch every one (spec_tests/test_suite_power.py).

Each mutant is a module named ``<concept>__<bug>.py`` that provides the contract names of one
concept with one realistic bug, and sets ``TARGET = "<concept id>"``: the concept whose
properties must fail. Run one by hand with::

    pytest --impl conformance/mutants/attention__causal_off_by_one.py --concept attention
"""
from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent


def mutant_files() -> list[Path]:
    return sorted(p for p in HERE.glob("*.py") if "__" in p.stem and not p.stem.startswith("_"))


def target_of(path: Path) -> str:
    import ast
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "TARGET" for t in node.targets):
            return node.value.value
    raise ValueError(f"{path.name}: a mutant must set TARGET = '<concept id>'")
