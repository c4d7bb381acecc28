"""The concept registry, discovered: a concept is a package ``spec_tests/X/`` whose ``__init__.py``
declares ``CONCEPT = ConceptInfo(...)``. Nothing else lists concepts.

For concept ``X`` everything lives in four places, named by the id once (the folder name):

    reference/X.py     the contract: ``__all__`` lists the required names, ``__optional__`` the
                       names checked when an implementation provides them
    optimized/X.py     the fast counterpart, when there is one (same names; or a package optimized/X/)
    spec_tests/X/      metadata (``__init__.py``), strategies, oracles, ``test_*.py``, ``mutants.py``
    docs/X.md          the page (its contract table is generated: ``inferspec docs``)

Contract names are qualified by the concept's module: ``attention.attention``. Lesson ids are
``module.lesson`` of the "Inference Engineering" outline; ``chapters`` are those of "Inference
engines". ``conformance.consistency.problems`` lists every way the pieces disagree; the plugin refuses to
run while there is one.
"""
from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from conformance.declarations import ConceptInfo

ROOT = Path(__file__).resolve().parent.parent
SPEC_DIR = ROOT / "spec_tests"
DOCS_DIR = ROOT / "docs"
# Folders of spec_tests/ that are not concepts: the suite's own tests, tests of the bundled
# implementations' internals (the benchmarks live outside spec_tests/, in bench/).
NOT_CONCEPTS = ("suite", "bundled")
MIN_MUTANTS = 3


@dataclass(frozen=True)
class Concept:
    id: str
    title: str
    contract: tuple[str, ...]          # required, qualified: "attention.attention"
    optional: tuple[str, ...] = ()     # qualified too
    vocabulary: tuple[str, ...] = ()   # bare names in reference/<id>.py
    lessons: tuple[str, ...] = ()
    chapters: tuple[int, ...] = ()
    module: str = ""
    has_optimized: bool = False
    docs: str = field(default="")

    @property
    def names(self) -> tuple[str, ...]:
        """Every contract name, required then optional."""
        return self.contract + self.optional


def _concept_packages() -> Iterator[tuple[str, object]]:
    import spec_tests
    for info in pkgutil.iter_modules(spec_tests.__path__):
        if info.ispkg and info.name not in NOT_CONCEPTS and not info.name.startswith("_"):
            yield info.name, importlib.import_module(f"spec_tests.{info.name}")


def _declared() -> tuple[dict[str, ConceptInfo], list[str]]:
    """Every ``spec_tests/X/__init__.py`` that declares ``CONCEPT = ConceptInfo(...)``: id -> info,
    ordered by first course lesson, and the folders with tests that declare none. Imports those
    packages' ``__init__`` only (light: no torch, no reference module)."""
    found, errors = {}, []
    for cid, pkg in _concept_packages():
        info = getattr(pkg, "CONCEPT", None)
        if isinstance(info, ConceptInfo):
            found[cid] = info
        elif any((SPEC_DIR / cid).glob("test_*.py")):
            errors.append(f"spec_tests/{cid}/__init__.py: declares no CONCEPT = ConceptInfo(...)")
    order = sorted(found, key=lambda c: (tuple(found[c].lessons[:1]) or ("99",), c))
    return {c: found[c] for c in order}, errors


def split_ids(values) -> list[str]:
    """The concept ids of every ``--concept`` value (the option repeats and takes comma-separated
    lists), blanks dropped."""
    return [c.strip() for item in values for c in item.split(",") if c.strip()]


def concept_ids() -> list[str]:
    """The concept ids, in registry order, without building the registry: no reference module
    (hence no torch) is imported. For validating ``--concept`` before anything heavy runs. A
    concept whose reference module is missing is listed here; the registry reports it."""
    if CONCEPTS._concepts is not None:
        return list(CONCEPTS._concepts)
    return list(_declared()[0])


def _qualified(cid: str, names) -> tuple[str, ...]:
    return tuple(f"{cid}.{n}" for n in names)


def optimized_path(cid: str) -> str | None:
    """Where concept ``cid``'s optimized counterpart lives: ``optimized/<cid>.py``, or the package
    ``optimized/<cid>/`` of a counterpart in several modules; None when there is none."""
    if (ROOT / "optimized" / f"{cid}.py").exists():
        return f"optimized/{cid}.py"
    if (ROOT / "optimized" / cid / "__init__.py").exists():
        return f"optimized/{cid}/"
    return None


def _build(cid: str, info: ConceptInfo) -> Concept:
    ref = importlib.import_module(f"reference.{cid}")
    return Concept(
        id=cid, title=info.title,
        contract=_qualified(cid, getattr(ref, "__all__", ())),
        optional=_qualified(cid, getattr(ref, "__optional__", ())),
        vocabulary=tuple(info.vocabulary), lessons=tuple(info.lessons), chapters=tuple(info.chapters),
        module=info.module, has_optimized=optimized_path(cid) is not None,
        docs=f"docs/{cid}.md")


class _Registry(Mapping):
    """id -> Concept, discovered on first use, ordered by first course lesson."""

    def __init__(self):
        self._concepts: dict[str, Concept] | None = None
        self._errors: list[str] = []

    def _load(self) -> dict[str, Concept]:
        if self._concepts is None:
            declared, errors = _declared()
            found = {}
            for cid, info in declared.items():  # already in registry order
                try:
                    found[cid] = _build(cid, info)
                except ModuleNotFoundError as exc:
                    if exc.name != f"reference.{cid}":
                        raise
                    errors.append(f"concept {cid!r}: no reference module reference/{cid}.py")
            self._concepts = found
            self._errors = errors
        return self._concepts

    def __getitem__(self, key: str) -> Concept:
        return self._load()[key]

    def __iter__(self):
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())

    def discovery_errors(self) -> list[str]:
        self._load()
        return list(self._errors)


CONCEPTS = _Registry()


def concept(concept_id: str) -> Concept:
    try:
        return CONCEPTS[concept_id]
    except KeyError:
        raise KeyError(f"unknown concept {concept_id!r}; known: {', '.join(CONCEPTS)}") from None


def all_contract_names() -> dict[str, str]:
    """Every qualified contract name -> its concept id."""
    return {name: c.id for c in CONCEPTS.values() for name in c.names}


def allowed_imports() -> dict[str, list[str]]:
    """What a submission checked with ``--forbid-reference`` may import, per reference module
    (``reference.<id>`` for every concept, an empty list where nothing is allowed): the vocabulary
    the concept declares plus its contract's data classes (dataclasses and named tuples:
    configurations, parameter records). Derived here, handed to the worker processes as data."""
    out: dict[str, list[str]] = {}
    for c in CONCEPTS.values():
        module = importlib.import_module(f"reference.{c.id}")
        names = set(c.vocabulary)
        for qualified in c.names:
            attr = qualified.split(".", 1)[1]
            obj = getattr(module, attr, None)
            if isinstance(obj, type) and (dataclasses.is_dataclass(obj) or issubclass(obj, tuple)):
                names.add(attr)
        out[f"reference.{c.id}"] = sorted(names)
    return out
