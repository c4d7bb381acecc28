"""The structure drawn from the imports: no circle, no upward arrow (docs/design.md, "The rooms").

Every import statement of the repository's Python files counts, at module level or inside a
function (a lazy import is still an arrow). The layers, lowest first:

0. ``reference``                the specification
1. ``optimized``                the fast counterparts (may read the reference)
2. the spec's library           what the concepts' tests use of ``conformance``: declarations, upstream,
                                verdicts, tolerance, statistics, strategies, bad input, the
                                state-machine runner and the clock it tells
3. ``spec_tests/<concept>``     the concepts' specifications
4. the runner                   everything else of ``conformance``: the registry (which discovers
                                layer 3 by importing it), loading, isolation, the plugin, the
                                report, the commands
5. the suite's own tests        ``spec_tests/suite``, ``spec_tests/bundled``, ``bench``

An arrow may go down or stay within a layer, never up; within a layer the modules form no circle.
"""
from __future__ import annotations

import ast
from pathlib import Path

from conformance.registry import ROOT

PACKAGES = ("reference", "optimized", "conformance", "spec_tests", "bench")
LIBRARY = {"declarations", "verdict", "tolerance", "stats", "strategies", "badinput", "stateful",
           "clock", "proxy", "upstream"}
TOP = ("spec_tests.suite", "spec_tests.bundled", "bench")


def layer(module: str) -> int:
    if module.startswith("reference"):
        return 0
    if module.startswith("optimized"):
        return 1
    if module.startswith("conformance"):
        return 2 if module.split(".")[1:2] and module.split(".")[1] in LIBRARY else 4
    if module.startswith(TOP) or module.startswith("spec_tests.conftest"):
        return 5
    if module == "spec_tests":
        return 3
    return 3


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py") if (ROOT / pkg).is_dir() else ():
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _is_main_block(node) -> bool:
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__"
            and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in node.test.comparators))


def imports(name: str, path: Path, known: dict) -> set[str]:
    """The repository's modules that ``name`` imports, anywhere in its text except its
    ``if __name__ == "__main__":`` block (a script's entry runs on top of everything; importing
    the module never runs it)."""
    found = set()
    tree = ast.parse(path.read_text(), str(path))
    tree.body = [n for n in tree.body if not _is_main_block(n)]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")[:None if path.name == "__init__.py" else -1]
                base = base[:len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{a.name}" for a in node.names)
    out = set()
    for m in found:
        while m and m not in known:
            m = m.rpartition(".")[0]
        if m and m != name and not name.startswith(m + "."):  # a package's own __init__ is not an arrow
            out.add(m)
    return out


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def circles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_no_upward_arrow():
    g = graph()
    up = [f"{a} (layer {layer(a)}) imports {b} (layer {layer(b)})"
          for a, targets in sorted(g.items()) for b in sorted(targets) if layer(b) > layer(a)]
    assert up == [], "\n".join(up)


def test_no_circle():
    found = circles(graph())
    assert found == [], found


def test_the_check_sees_arrows():
    """The graph is not empty where arrows are known to exist, and a planted upward arrow and a
    planted circle are found (the two tests above cannot pass by seeing nothing)."""
    g = graph()
    assert "conformance.wire" in g["conformance.submission"] and "conformance.declarations" in g["spec_tests.paged"]
    assert layer("conformance.registry") > layer("spec_tests.paged") > layer("conformance.tolerance")
    planted = dict(g, **{"reference.paged": g["reference.paged"] | {"conformance.registry"}})
    assert any(layer(b) > layer(a) for a, t in planted.items() for b in t)
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
