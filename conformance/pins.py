"""Pinned examples and the bugs they pin.

A pinned ``@example`` exists to catch one realistic bug, and only a mutant proves that it does. So
every explicit example in a concept's tests says which mutant(s) it pins, with Hypothesis's public
``example.via`` label. A test's concept is its folder, so the label names a mutant of that
concept's ``mutants.py`` by its bare name (in spec_tests/kv_bytes/)::

    @example(seq_len=0, batch=1).via("mutant:zero_len_rejected")
    @example(seq_len=1, batch=0).via("mutant:a mutant:b")                  # several
    @example(x=torch.empty(0)).via("boundary: the empty tensor is legal")  # no realistic bug

:func:`scan` reads the test files (statically: the labels are string literals next to the
example, so a reader sees them too) and :func:`problems` lists the examples that name no mutant,
name an unknown one, or qualify the name (``mutant:kv_bytes.x``: the proof runs the concept's own
mutants, so another concept's cannot be pinned, and the folder already says which concept). ``spec_tests/suite/test_pins.py`` runs that check
in every run and, under the ``ci``/``thorough`` profiles or ``--run-slow``, proves each label:
the named mutant, run against the pinned test with explicit examples only (profile ``pins``),
fails it. ``python -m conformance pins`` prints the table.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from conformance.registry import CONCEPTS, SPEC_DIR

MUTANT = "mutant:"
BOUNDARY = "boundary:"


@dataclass(frozen=True)
class Pin:
    concept: str
    file: Path          # the test module
    test: str           # the decorated test function
    line: int
    label: str | None   # the ``.via("...")`` literal, None when absent or not a literal

    @property
    def mutants(self) -> tuple[str, ...]:
        """The mutant names the label gives (``mutant:<name>`` tokens; :func:`problems` reports
        any other)."""
        if not self.label or self.label.startswith(BOUNDARY):
            return ()
        return tuple(tok[len(MUTANT):] for tok in self.label.split()
                     if tok.startswith(MUTANT) and "." not in tok)

    @property
    def where(self) -> str:
        return f"{_shown(self.file)}:{self.line} {self.test}"


def _shown(path: Path) -> str:
    return str(path.relative_to(SPEC_DIR.parent)) if path.is_relative_to(SPEC_DIR.parent) else str(path)


def _is_example_call(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call)
            and ((isinstance(node.func, ast.Name) and node.func.id == "example")
                 or (isinstance(node.func, ast.Attribute) and node.func.attr == "example")))


def _label(decorator: ast.AST) -> tuple[bool, str | None]:
    """(is an explicit example, its via literal or None)."""
    if _is_example_call(decorator):
        return True, None
    if (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute)
            and decorator.func.attr == "via" and _is_example_call(decorator.func.value)):
        arg = decorator.args[0] if decorator.args else None
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return True, arg.value
        return True, None
    return False, None


def scan_file(concept: str, path: Path) -> tuple[list[Pin], list[str]]:
    """The pins of one test module, and the example calls that are not test decorators (which
    this check cannot attribute: write them as decorators of the test they pin)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    pins: list[Pin] = []
    decorator_calls: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in node.decorator_list:
                is_example, label = _label(d)
                if is_example:
                    pins.append(Pin(concept, path, node.name, d.lineno, label))
                    decorator_calls.add(id(d if _is_example_call(d) else d.func.value))
    stray = [f"{_shown(path)}:{n.lineno}" for n in ast.walk(tree)
             if _is_example_call(n) and id(n) not in decorator_calls]
    return pins, stray


def scan() -> tuple[list[Pin], list[str]]:
    """Every explicit example of every concept's test modules (``spec_tests/<concept>/*.py``)."""
    pins: list[Pin] = []
    stray: list[str] = []
    for cid in CONCEPTS:
        for path in sorted((SPEC_DIR / cid).glob("*.py")):
            p, s = scan_file(cid, path)
            pins += p
            stray += s
    return pins, stray


def problems(pins: list[Pin], stray: list[str]) -> list[str]:
    """What is wrong with the labels: one line per example."""
    from conformance import mutants
    names = {cid: {m.name for m in mutants.table(cid)} for cid in CONCEPTS}
    out = [f"{w}: an example(...) that is not a decorator of a test function (cannot be attributed)"
           for w in stray]
    for p in pins:
        if p.label is None:
            out.append(f"{p.where}: @example without .via(\"mutant:<name>\") (a mutant of "
                       f"spec_tests/{p.concept}/mutants.py) or .via(\"boundary: ...\")")
            continue
        if p.label.startswith(BOUNDARY):
            if not p.label[len(BOUNDARY):].strip():
                out.append(f"{p.where}: boundary label says nothing: {p.label!r}")
            continue
        for tok in p.label.split():
            name = tok[len(MUTANT):]
            if not tok.startswith(MUTANT) or not name:
                out.append(f"{p.where}: label token {tok!r} is not 'mutant:<name>'")
            elif "." in name:
                cid, _, bare = name.partition(".")
                if cid == p.concept:
                    out.append(f"{p.where}: label token {tok!r}: write 'mutant:{bare}' (the test's "
                               f"folder is its concept, {p.concept})")
                else:
                    out.append(f"{p.where}: names mutant {tok!r} of another concept: a pin proves "
                               f"a mutant of its own concept, {p.concept}")
            elif name not in names[p.concept]:
                out.append(f"{p.where}: no mutant {name!r} in spec_tests/{p.concept}/mutants.py")
    return out


def mutant_pins(pins: list[Pin]) -> dict[str, dict[tuple[str, str], set[str]]]:
    """concept -> {(test module path, test name): {mutant names}} for the labels that name mutants."""
    out: dict[str, dict[tuple[str, str], set[str]]] = {}
    for p in pins:
        if p.mutants:
            out.setdefault(p.concept, {}).setdefault((str(p.file), p.test), set()).update(p.mutants)
    return out


def main() -> int:
    pins, stray = scan()
    bad = problems(pins, stray)
    labelled = sum(1 for p in pins if p.mutants)
    boundary = sum(1 for p in pins if p.label and p.label.startswith(BOUNDARY))
    print(f"{len(pins)} explicit examples: {labelled} pin mutants, {boundary} pin boundaries, "
          f"{len(bad)} problems")
    for line in bad:
        print("  " + line)
    return 1 if bad else 0
