"""Planted bugs, one format: each concept's ``spec_tests/X/mutants.py`` holds a table ``MUTANTS``.

A mutant is one of

``Patch(name, doc, old, new, module="reference", file=None)``
    a source patch of a real module of the repository: ``reference/X.py`` of the table's concept X
    by default, ``optimized/X.py`` with ``module="optimized"``, or ``file``, a path from the
    repository root, for a file not named after the concept (``optimized/sampling/split_row.py``).
    ``old`` must occur in the file exactly once (so a mutant can never silently turn back into
    the correct code when the source changes). The patched text is executed as a fresh module
    (its source registered in ``linecache``, so ``triton.jit`` and the Triton interpreter see the
    mutated kernels); the mutant provides that module's contract names. A file that is not the
    concept's module but one it imports (a submodule of ``optimized/X/``, a private kernel module
    ``optimized/_X_*.py``) is a *dependency*: the concept's module is imported afresh with the
    patched file in its place (:func:`import_with_patched`), and provides the names.
``Replace(name, doc, names, base="reference")``
    a small implementation, where a patch cannot express the bug: ``names`` maps contract names
    (bare, e.g. ``"attention"``) to objects; every other contract name comes from ``base``.

:func:`load` turns ``("attention", "causal_off_by_one")`` into a module the harness checks like
any submission; as an ``--impl`` it is spelled ``mutant:attention.causal_off_by_one``::

    pytest --impl mutant:attention.causal_off_by_one --concept attention

The suite's power test (``spec_tests/suite/test_suite_power.py``) reads every table and requires
each mutant to make its own concept fail.

Each mutant has a **control**, ``control:<concept>.<name>``: the same construction without the bug
(the patched file's own text executed as a fresh module the same way; a ``Replace``'s base without
the replaced names). The power run requires the test that caught a mutant to pass for its control,
so a mutant can never be "caught" by the way it is loaded and run rather than by its bug.
"""
from __future__ import annotations

import dataclasses
import importlib
import importlib.abc
import importlib.util
import linecache
import sys
import types

from conformance.declarations import MODULES, Mutant, Patch, Replace  # noqa: F401  (the tables' types)
from conformance.registry import CONCEPTS, ROOT

PREFIX = "mutant:"
CONTROL_PREFIX = "control:"




def table(concept_id: str) -> list[Mutant]:
    """The ``MUTANTS`` table of ``spec_tests/<concept_id>/mutants.py`` (validated)."""
    module = importlib.import_module(f"spec_tests.{concept_id}.mutants")
    rows = list(getattr(module, "MUTANTS", None) or [])
    seen = set()
    for i, m in enumerate(rows):
        if not isinstance(m, (Patch, Replace)):
            raise TypeError(f"MUTANTS holds {m!r}: each entry must be a Patch or a Replace")
        if not m.name.isidentifier() or m.name in seen:
            raise ValueError(f"mutant name {m.name!r}: must be a unique identifier")
        if not m.doc.strip():
            raise ValueError(f"mutant {m.name!r}: doc must say what bug it plants")
        if isinstance(m, Patch):
            rows[i] = with_file(m, concept_id)
        seen.add(m.name)
    return rows


def with_file(m: Patch, concept_id: str) -> Patch:
    """``m`` with its file named: ``<module>/<concept_id>.py`` unless it gives ``file``."""
    if m.module not in MODULES:
        raise ValueError(f"mutant {m.name!r}: module={m.module!r}, expected one of {MODULES} "
                         "(or file='<path>' for a file not named after the concept)")
    if m.file is not None:
        if m.module != "reference":
            raise ValueError(f"mutant {m.name!r}: give module= or file=, not both")
        return m
    return dataclasses.replace(m, file=f"{m.module}/{concept_id}.py")


def all_mutants() -> list[tuple[str, Mutant]]:
    return [(cid, m) for cid in CONCEPTS for m in table(cid)]


def impl_id(concept_id: str, name: str) -> str:
    """The mutant's column name in reports: ``<concept>__<name>``."""
    return f"{concept_id}__{name}"


def spec(concept_id: str, name: str) -> str:
    return f"{PREFIX}{concept_id}.{name}"


def control_id(concept_id: str, name: str) -> str:
    """The control's column name in reports: ``<concept>__<name>__unmutated``."""
    return f"{impl_id(concept_id, name)}__unmutated"


def control_spec(concept_id: str, name: str) -> str:
    return f"{CONTROL_PREFIX}{concept_id}.{name}"


def find(concept_id: str, name: str) -> Mutant:
    """The planted mutant ``name`` of the concept's table, or a mechanical one (``mech_...``,
    :mod:`conformance.mechanical`)."""
    from conformance import mechanical
    if name.startswith(mechanical.PREFIX):
        return mechanical.patch(concept_id, name)
    for m in table(concept_id):
        if m.name == name:
            return m
    known = ", ".join(m.name for m in table(concept_id))
    raise ValueError(f"no mutant {name!r} in spec_tests/{concept_id}/mutants.py; known: {known}")


def patched_source(m: Patch) -> str:
    """The patched file's text with ``old`` replaced by ``new`` (``m`` as :func:`table` gives it,
    its file named)."""
    if m.file is None:
        raise ValueError(f"mutant {m.name!r}: which concept's file? (take it from mutants.table(concept), "
                         "or name the concept: mutants.with_file(m, concept))")
    source = (ROOT / m.file).read_text()
    count = source.count(m.old)
    if count != 1:
        raise AssertionError(f"mutant {m.name}: its text occurs {count} times in {m.file}, expected exactly once:\n{m.old}")
    return source.replace(m.old, m.new)


def _exec_patched(concept_id: str, m: Patch, control: bool = False) -> types.ModuleType:
    kind = "control" if control else "mutant"
    module_name = f"inferspec_{kind}_{impl_id(concept_id, m.name)}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    text = patched_source(m)
    if control:  # the same file, executed the same way, without the bug
        text = (ROOT / m.file).read_text()
    filename = str(ROOT / f"{m.file}<{kind} {m.name}>")  # unique, never on disk
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    top = concept_module(concept_id, m.file)
    if top is not None:  # a dependency of the concept's module: that module imported afresh over it
        module = import_with_patched(top, dotted_name(m.file), text, filename)
        sys.modules[module_name] = module
        return module
    module = types.ModuleType(module_name, f"mutant {concept_id}.{m.name}: {m.doc}")
    module.__file__ = filename
    sys.modules[module_name] = module
    try:
        exec(compile(text, filename, "exec"), module.__dict__)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module


def dotted_name(path: str) -> str:
    """``optimized/sampling/split_row.py`` -> ``optimized.sampling.split_row`` (a package's
    ``__init__.py`` -> the package)."""
    dotted = path[:-len(".py")].replace("/", ".")
    return dotted[:-len(".__init__")] if dotted.endswith(".__init__") else dotted


def concept_module(concept_id: str, path: str) -> str | None:
    """The module that holds ``concept_id``'s contract names when ``path`` is patched: None when
    ``path`` is that module itself, else ``reference.X`` or ``optimized.X`` (its tree holds
    ``path``)."""
    root = path.split("/", 1)[0]
    own = {f"{root}/{concept_id}.py", f"{root}/{concept_id}/__init__.py"}
    return None if path in own else f"{root}.{concept_id}"


def import_with_patched(top: str, target: str, text: str, filename: str) -> types.ModuleType:
    """Module ``top`` imported afresh, with module ``target`` (which ``top`` imports, directly or
    not) executed from ``text`` instead of its file. The process's own copies of both (and of
    their submodules) are put back afterwards, in ``sys.modules`` and as attributes of their
    parent packages: only the returned module and what it imported see the patched text.

    The fresh copies import each other lazily too (``from optimized._speculative_triton import
    draw_rows`` inside a function, a package's submodule imported on first use): every module of
    ``top``'s package and ``target`` are imported now, each executed with an ``__import__`` of its
    own (set before its code runs: a function keeps the builtins of its module's creation) that
    hands out the fresh copies, never the process's own."""
    import importlib.machinery

    def ours(name: str) -> bool:
        return any(name == p or name.startswith(p + ".") for p in (top, target))

    fresh: dict[str, types.ModuleType] = {}
    table = _fresh_builtins(fresh)

    class FreshLoader(importlib.abc.Loader):
        def __init__(self, inner=None):
            self.inner = inner

        def create_module(self, spec):
            return self.inner.create_module(spec) if self.inner is not None else None

        def exec_module(self, module):
            module.__dict__["__builtins__"] = table
            if self.inner is not None:
                self.inner.exec_module(module)
                return
            module.__file__ = filename
            exec(compile(text, filename, "exec"), module.__dict__)

        def get_source(self, name):   # inspect / triton.jit read the source through the loader
            return text if self.inner is None else self.inner.get_source(name)

    class FreshFinder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target_module=None):
            if not ours(name):
                return None
            if name == target:
                return importlib.util.spec_from_loader(
                    name, FreshLoader(), origin=filename, is_package=filename.split("<")[0].endswith("__init__.py"))
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is not None:
                spec.loader = FreshLoader(spec.loader)
            return spec

    saved = {k: v for k, v in sys.modules.items() if ours(k)}
    finder = FreshFinder()
    for k in saved:
        del sys.modules[k]
    sys.meta_path.insert(0, finder)
    try:
        module = importlib.import_module(top)
        for sub in _package_modules(module):
            importlib.import_module(sub)
        importlib.import_module(target)
        fresh.update((k, v) for k, v in sys.modules.items() if ours(k))
    finally:
        sys.meta_path.remove(finder)
        for k in [k for k in sys.modules if ours(k)]:
            del sys.modules[k]
        sys.modules.update(saved)
        for k, mod in saved.items():
            parent, _, leaf = k.rpartition(".")
            if parent in sys.modules:
                setattr(sys.modules[parent], leaf, mod)
    return module


def _package_modules(module: types.ModuleType) -> list[str]:
    """The dotted names of a package's own ``.py`` modules (none for a plain module)."""
    path = getattr(module, "__path__", None)
    if not path:
        return []
    from pathlib import Path
    return [f"{module.__name__}.{f.stem}" for f in sorted(Path(list(path)[0]).glob("*.py")) if f.stem != "__init__"]


def _fresh_builtins(fresh: dict[str, types.ModuleType]) -> dict:
    """Builtins whose ``__import__`` resolves the names of ``fresh`` (filled once the fresh copies
    are imported) to those copies, and every other name as usual."""
    import builtins
    base = builtins.__import__

    def fresh_import(name, globals=None, locals=None, fromlist=(), level=0):
        absolute = importlib.util.resolve_name("." * level + name, (globals or {}).get("__package__")) if level else name
        if absolute in fresh and (fromlist or "." not in absolute):
            return fresh[absolute]
        return base(name, globals, locals, fromlist, level)

    return dict(vars(builtins), __import__=fresh_import)


def load(concept_id: str, name: str, *, control: bool = False) -> types.ModuleType:
    """The mutant as a module providing concept ``concept_id``'s contract names; with ``control``,
    its control (the same construction without the bug)."""
    c = CONCEPTS[concept_id]
    m = find(concept_id, name)
    bare = [n.split(".", 1)[1] for n in c.names] + list(c.vocabulary)
    column = control_id(concept_id, name) if control else impl_id(concept_id, name)
    what = f"control of mutant {concept_id}.{name} (without its bug)" if control else f"mutant {concept_id}.{name}: {m.doc}"
    out = types.ModuleType(f"inferspec_{column}", what)
    if isinstance(m, Patch):
        source = _exec_patched(concept_id, m, control)
        missing = [n for n in c.contract if not hasattr(source, n.split(".", 1)[1])]
        if missing:
            raise ValueError(f"mutant {concept_id}.{m.name}: {m.file} does not define {missing}; "
                             "patch the module that holds the contract names")
    else:
        source = importlib.import_module(f"{m.base}.{concept_id}")
        unknown = sorted(set(m.names) - set(bare))
        if unknown:
            raise ValueError(f"mutant {concept_id}.{m.name}: {unknown} are not contract names of {concept_id}")
    for n in bare:
        if hasattr(source, n):
            setattr(out, n, getattr(source, n))
    if isinstance(m, Replace) and not control:
        for n, obj in m.names.items():
            setattr(out, n, obj)
    return out


def parse_spec(text: str) -> tuple[str, str]:
    """``mutant:attention.causal_off_by_one`` (or ``control:...``) -> ("attention", "causal_off_by_one")."""
    prefix = CONTROL_PREFIX if text.startswith(CONTROL_PREFIX) else PREFIX
    body = text[len(prefix):]
    cid, _, name = body.partition(".")
    if cid not in CONCEPTS or not name:
        raise ValueError(f"--impl {text}: expected {prefix}<concept>.<name> with a known concept "
                         f"({', '.join(CONCEPTS)})")
    return cid, name
