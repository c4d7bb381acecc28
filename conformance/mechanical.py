"""Mechanical mutants: every single-change variant of a concept's module that a small set of AST
operators can make, written by no one, so the suite's power is measured on bugs nobody tuned it to.

The operators (each site of the module's syntax tree, in a fixed walk order, gives one variant per
replacement):

- comparisons at their boundary: ``<`` <-> ``<=``, ``>`` <-> ``>=``, ``==`` <-> ``!=``, ``is`` <->
  ``is not``, ``in`` <-> ``not in``;
- ``and`` <-> ``or``; ``not x`` -> ``x``;
- arithmetic: ``+`` <-> ``-``, ``*`` <-> ``/``, ``//`` -> ``/``, ``%`` -> ``//``;
- an integer constant (not a bool) ``n`` -> ``n + 1`` and ``n - 1`` (indices, bounds, defaults);
- ``min`` <-> ``max`` (a call of the builtin, or a method ``.min``/``.max``);
- the first two positional arguments of a call swapped;
- a dropped statement: a ``raise`` (a missing validation; never inside its message), a bare call (a missing side effect), an
  augmented assignment (a missing update) -> ``pass``;
- ``break`` <-> ``continue``.

A variant is named ``mech_<module>_<k>`` (``module``: ``reference``, ``optimized``, or
``optimized_<file>`` for another file of an optimized package or a private ``optimized/_X_*.py``
module, :func:`sources`; ``k``: its index in the walk) and behaves as any planted mutant (:mod:`conformance.mutants`): as an
implementation it is ``mutant:<concept>.mech_reference_12``; its control is the unchanged file run
the same way. The index is stable while the file is unchanged. Docstrings, ``__all__`` and
annotations are never mutated.
"""
from __future__ import annotations

import ast
import functools
import os
import runpy
from dataclasses import dataclass
from typing import Callable

from conformance.declarations import Patch
from conformance.registry import ROOT, optimized_path

PREFIX = "mech_"
MODULES = ("reference", "optimized")

_COMPARE = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
            ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}
_ARITH = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Div,
          ast.Mod: ast.FloorDiv}
_SYMBOL = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.Is: "is",
           ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in", ast.Add: "+", ast.Sub: "-", ast.Mult: "*",
           ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.And: "and", ast.Or: "or"}


@dataclass(frozen=True)
class Site:
    """One variant: where (line), what (words), and the change, made in place on ``node`` (a node
    of the tree the site was found in: make each variant from a freshly parsed tree)."""
    line: int
    what: str
    node: ast.AST
    change: Callable[[ast.AST], None]

    def apply(self) -> None:
        self.change(self.node)


def _skipped(tree: ast.Module) -> set[int]:
    """Nodes never mutated: docstrings, ``__all__``/``__optional__`` and other dunder assignments,
    annotations, and the f-strings of a raised exception's message (a variant there changes the
    wording of an error, which a spec checks by its type and the argument it names, not its numbers)."""
    out: set[int] = set()

    def mark(node):
        out.update(id(sub) for sub in ast.walk(node))

    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and body:
            first = body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                mark(first)
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id.startswith("__") for t in node.targets):
            mark(node)
        if isinstance(node, ast.Raise) and node.exc is not None:
            for sub in ast.walk(node.exc):
                if isinstance(sub, ast.JoinedStr):
                    mark(sub)
        if isinstance(node, ast.AnnAssign):
            mark(node.annotation)
        if isinstance(node, ast.arg) and node.annotation is not None:
            mark(node.annotation)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            mark(node.returns)
    return out


def _set_op(new):
    return lambda n: setattr(n, "op", new())


def sites(tree: ast.Module, text: str | None = None) -> list[Site]:
    """Every variant of ``tree``, in :func:`ast.walk`'s order. ``text``, the source ``tree`` was
    parsed from, names a dropped statement by its own first line (``ast.unparse`` writes f-strings
    differently from one Python version to the next, and a name must not change with it)."""
    skip = _skipped(tree)
    out: list[Site] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                new = _COMPARE.get(type(op))
                if new is not None:
                    out.append(Site(line, f"{_SYMBOL[type(op)]} -> {_SYMBOL[new]}", node,
                                    lambda n, i=i, new=new: n.ops.__setitem__(i, new())))
        elif isinstance(node, ast.BoolOp):
            new = ast.Or if isinstance(node.op, ast.And) else ast.And
            out.append(Site(line, f"{_SYMBOL[type(node.op)]} -> {_SYMBOL[new]}", node, _set_op(new)))
        elif isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in _ARITH:
            new = _ARITH[type(node.op)]
            eq = "=" if isinstance(node, ast.AugAssign) else ""
            out.append(Site(line, f"{_SYMBOL[type(node.op)]}{eq} -> {_SYMBOL[new]}{eq}", node, _set_op(new)))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            out.append(Site(line, "not x -> x", node, _set_op(ast.UAdd)))
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            for delta in (1, -1):
                out.append(Site(line, f"{node.value} -> {node.value + delta}", node,
                                lambda n, d=delta: setattr(n, "value", n.value + d)))
        elif isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name in ("min", "max"):
                other = "max" if name == "min" else "min"
                attr = "id" if isinstance(f, ast.Name) else "attr"
                out.append(Site(line, f"{name} -> {other}", node, lambda n, a=attr, o=other: setattr(n.func, a, o)))
            if len(node.args) >= 2 and not any(isinstance(a, ast.Starred) for a in node.args):
                call = name or "call"
                out.append(Site(line, f"{call}(a, b, ...) -> {call}(b, a, ...)", node,
                                lambda n: n.args.__setitem__(slice(0, 2), [n.args[1], n.args[0]])))
        elif isinstance(node, (ast.Break, ast.Continue)):
            new = ast.Continue if isinstance(node, ast.Break) else ast.Break
            out.append(Site(line, f"{type(node).__name__.lower()} -> {new.__name__.lower()}", node,
                            lambda n, new=new: setattr(n, "__class__", new)))
        for field in ("body", "orelse", "finalbody"):
            stmts = getattr(node, field, None)
            if not isinstance(stmts, list):
                continue
            for i, stmt in enumerate(stmts):
                if id(stmt) in skip:
                    continue
                if (isinstance(stmt, (ast.Raise, ast.AugAssign))
                        or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call))):
                    code = (ast.get_source_segment(text, stmt) if text is not None else None) or ast.unparse(stmt)
                    code = " ".join(part.strip() for part in code.splitlines())[:60]
                    out.append(Site(stmt.lineno, f"drop `{code}`", node,
                                    lambda n, f=field, i=i: getattr(n, f).__setitem__(i, ast.Pass())))
    return out


def variants(path: str) -> list[tuple[int, str]]:
    """(line, what) of every variant of the repository file ``path``, index = position."""
    return list(_variants_of((ROOT / path).read_text()))


@functools.lru_cache(maxsize=64)
def _variants_of(text: str) -> tuple[tuple[int, str], ...]:
    return tuple((s.line, s.what) for s in sites(ast.parse(text), text))


def _variant(text: str, k: int, path: str) -> tuple[int, str, str]:
    """(line, what, the whole module's text) of variant ``k`` of the source ``text`` (a fresh tree:
    a site changes its tree in place)."""
    tree = ast.parse(text)
    found = sites(tree, text)
    if not 0 <= k < len(found):
        raise ValueError(f"{path} has {len(found)} mechanical variants, no variant {k}")
    found[k].apply()
    return found[k].line, found[k].what, ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def variant_source(path: str, k: int) -> str:
    """The text of variant ``k`` of ``path`` (the whole module, unparsed from the changed tree)."""
    return _variant((ROOT / path).read_text(), k, path)[2]


def name_of(module: str, k: int) -> str:
    return f"{PREFIX}{module}_{k}"


def parse_name(name: str) -> tuple[str, int]:
    """``mech_reference_12`` -> ("reference", 12); ``mech_optimized_split_row_3`` ->
    ("optimized_split_row", 3) (a module label of :func:`sources`)."""
    body = name[len(PREFIX):] if name.startswith(PREFIX) else ""
    module, _, k = body.rpartition("_")
    if not (module in MODULES or module.startswith("optimized_")) or not k.isdigit():
        raise ValueError(f"{name!r}: a mechanical mutant is named {PREFIX}<reference|optimized|optimized_<file>>_<index>")
    return module, int(k)


def sources(concept_id: str) -> dict[str, str]:
    """{module label: repository path} of every file whose variants are ``concept_id``'s mechanical
    mutants: ``reference`` (reference/X.py), ``optimized`` (optimized/X.py, or the package's
    ``__init__.py``), ``optimized_<stem>`` for every other module of the package optimized/X/, and
    ``optimized_<stem>`` for a private module optimized/_X_*.py that the optimized module imports
    (its stem keeps the leading underscore: ``optimized__speculative_triton``)."""
    out = {"reference": f"reference/{concept_id}.py"}
    path = optimized_path(concept_id)
    if path is None:
        return out
    if path.endswith("/"):
        out["optimized"] = path + "__init__.py"
        for f in sorted((ROOT / path).glob("*.py")):
            if f.name != "__init__.py":
                out[f"optimized_{f.stem}"] = path + f.name
    else:
        out["optimized"] = path
    for f in sorted((ROOT / "optimized").glob(f"_{concept_id}_*.py")):
        out[f"optimized_{f.stem}"] = f"optimized/{f.name}"
    return out


def labels(concept_id: str, which=MODULES) -> list[str]:
    """The module labels of :func:`sources` that ``which`` (``reference``, ``optimized``: every
    optimized file) selects."""
    return [m for m in sources(concept_id) if any(m == w or m.startswith(w + "_") for w in which)]


def patch(concept_id: str, name: str) -> Patch:
    """Variant ``name`` of ``concept_id`` as a planted mutant (the whole file replaced by the variant's
    text; its control is the unchanged file)."""
    module, k = parse_name(name)
    path = source_of(module, concept_id)
    original = (ROOT / path).read_text()
    line, what, new = _variant(original, k, path)
    return Patch(name, f"mechanical: {path}:{line}: {what}", original, new, file=path)


def variant_names(concept_id: str, modules=MODULES) -> list[str]:
    """The names of :func:`all_patches`' variants, in its order, without building them."""
    return [name_of(module, k) for module in labels(concept_id, modules)
            for k in range(len(variants(source_of(module, concept_id))))]


def all_patches(concept_id: str, modules=MODULES) -> list[Patch]:
    """Every mechanical mutant of ``concept_id``'s reference (and optimized) files (:func:`labels`)."""
    return [patch(concept_id, name) for name in variant_names(concept_id, modules)]


def source_of(module: str, concept_id: str) -> str:
    """The repository path of the file labelled ``module`` for ``concept_id`` (:func:`sources`)."""
    found = sources(concept_id)
    if module not in found:
        raise ValueError(f"concept {concept_id!r} has no module {module!r} (it has {', '.join(found)})")
    return found[module]


# ------------------------------------------------------------------------------ triage
CLASSES = ("equivalent", "outside the contract")
TRIAGE_FILE = "mechanical_triage.py"


def key(concept_id: str, name: str) -> tuple[str, str, str]:
    """A variant's triage key: (module, its source line stripped, what changed). It names the
    change by the code it changes, so it survives edits elsewhere in the file (which move the
    index and the line number). The n-th same change of the same line says so: ``1 -> 0 (#2)``."""
    module, k = parse_name(name)
    return _keys(source_of(module, concept_id), module)[k]


def _keys(path: str, module: str) -> list[tuple[str, str, str]]:
    return list(_keys_of((ROOT / path).read_text(), module))


@functools.lru_cache(maxsize=64)
def _keys_of(text: str, module: str) -> tuple[tuple[str, str, str], ...]:
    """The keys of every variant of a module's ``text`` (one pass; a score asks for many)."""
    lines = text.splitlines()
    out, seen = [], {}
    for line, what in _variants_of(text):
        code = lines[line - 1].strip()
        n = seen[(code, what)] = seen.get((code, what), 0) + 1
        out.append((module, code, what if n == 1 else f"{what} (#{n})"))
    return tuple(out)


def triage(concept_id: str) -> dict[tuple[str, str, str], tuple[str, str]]:
    """``spec_tests/<concept>/mechanical_triage.py``'s ``TRIAGE``: key -> (class, one-line reason)
    for each survivor judged not a gap of the spec: ``equivalent`` (no input of the contract tells
    it from the original) or ``outside the contract`` (code no contract name reaches)."""
    path = ROOT / "spec_tests" / concept_id / TRIAGE_FILE
    if not path.exists():
        return {}
    table = runpy.run_path(str(path)).get("TRIAGE", {})
    bad = [k for k, (cls, why) in table.items() if cls not in CLASSES or not why.strip()]
    if bad:
        raise ValueError(f"{path}: entries need a class in {CLASSES} and a reason: {bad[:3]}")
    return table


@dataclass
class Score:
    """A concept's mechanical score: killed of the variants not triaged as equivalent or outside
    the contract; ``stale``: triaged variants that were killed (the entry is wrong: remove it)."""
    concept: str
    total: int
    killed: int
    triaged: list            # [(name, class, reason)] of surviving variants with a triage entry
    gaps: list               # names of surviving variants without one
    stale: list              # names of killed variants that have a triage entry

    @property
    def counted(self) -> int:
        return self.total - len(self.triaged)

    @property
    def percent(self) -> float:
        return 100.0 * self.killed / self.counted if self.counted else 100.0

    def line(self) -> str:
        return (f"mechanical score {self.concept}: {self.killed}/{self.counted} killed ({self.percent:.1f} %) "
                f"of {self.total} variants, {len(self.triaged)} triaged "
                f"({', '.join(f'{sum(t[1] == c for t in self.triaged)} {c}' for c in CLASSES)}), "
                f"{len(self.gaps)} untriaged survivors" + (f", {len(self.stale)} STALE triage entries" if self.stale else ""))


def score(concept_id: str, killed: dict[str, bool]) -> Score:
    """The score of ``concept_id`` from {variant name: killed}."""
    table = triage(concept_id)
    triaged, gaps, stale = [], [], []
    for name, dead in sorted(killed.items(), key=lambda kv: parse_name(kv[0])):
        entry = table.get(key(concept_id, name))
        if dead:
            if entry is not None:
                stale.append(name)
        elif entry is not None:
            triaged.append((name, *entry))
        else:
            gaps.append(name)
    return Score(concept_id, len(killed), sum(killed.values()), triaged, gaps, stale)


# ------------------------------------------------------------------------------ recorded results
RESULTS = ROOT / "docs" / "results" / "mechanical.json"


def record(path, killed: dict[tuple[str, str], bool], command: str) -> None:
    """Merge {(concept, variant name): killed} into the results file ``path``: per concept, each
    variant's key and verdict (a newer verdict replaces an older one of the same key), the
    module's current variant count, and the commands that produced them."""
    import json
    import platform
    from datetime import date
    data = json.loads(path.read_text()) if path.exists() else {}
    for (cid, name), dead in killed.items():
        module, _ = parse_name(name)
        entry = data.setdefault(cid, {"variants": {}, "commands": []})
        entry["variants"]["\t".join(key(cid, name))] = bool(dead)
        entry[f"{module}_variants"] = len(variants(source_of(module, cid)))
        line = f"{command}  # {date.today()}, {platform.machine()} {os.cpu_count()} CPUs"
        if line not in entry["commands"]:
            entry["commands"].append(line)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def recorded(path=None) -> dict:
    import json
    path = path or RESULTS
    return json.loads(path.read_text()) if path.exists() else {}


def current_names(concept_id: str) -> dict[tuple[str, str, str], str]:
    """key -> variant name, for every variant of the concept's modules as they are now."""
    out: dict = {}
    for module, path in sources(concept_id).items():
        out.update((k, name_of(module, i)) for i, k in enumerate(_keys(path, module)))
    return out


def recorded_score(concept_id: str, data: dict | None = None) -> Score | None:
    """The concept's score from the recorded verdicts of variants that still exist."""
    data = recorded() if data is None else data
    entry = data.get(concept_id)
    if not entry:
        return None
    names = current_names(concept_id)
    killed = {names[k]: v for k, v in ((tuple(s.split("\t")), v) for s, v in entry["variants"].items()) if k in names}
    return score(concept_id, killed)
