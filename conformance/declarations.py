"""What a concept declares about itself, in its own files: ``spec_tests/X/__init__.py`` declares
``CONCEPT = ConceptInfo(...)`` and ``spec_tests/X/mutants.py`` a table ``MUTANTS`` of ``Patch`` and
``Replace`` rows (their meaning: ``conformance/mutants.py``).

A leaf: it imports nothing of the harness, so a concept's package imports nothing that imports it
back (the registry discovers the concepts by importing these packages).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ConceptInfo:
    """What ``spec_tests/X/__init__.py`` declares about concept X (its id is the folder name)."""
    title: str
    lessons: tuple[str, ...] = ()
    chapters: tuple[int, ...] = ()
    module: str = ""  # the course module heading, e.g. "3 The KV cache"
    # Names of reference/X.py that implementations may import from the reference (plain data
    # types such as SamplingParams): vocabulary, not behaviour to implement.
    vocabulary: tuple[str, ...] = ()


MODULES = ("reference", "optimized")


@dataclass(frozen=True)
class Patch:
    name: str
    doc: str
    old: str
    new: str
    # the patched file: <module>/<concept>.py of the table's concept, or ``file`` (a path from the
    # repository root) for one not named after the concept; :func:`table` fills ``file`` in
    module: str = field(default="reference", kw_only=True)
    file: str | None = field(default=None, kw_only=True)


@dataclass(frozen=True)
class Replace:
    name: str
    doc: str
    names: dict[str, Any] = field(default_factory=dict)
    base: str = "reference"


Mutant = Patch | Replace
