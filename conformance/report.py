"""The per-concept verdict: concept x implementation -> passed / failed / not implemented.

A concept *fails* for an implementation if any of its tests failed (the first failure is kept
with its shrunk Hypothesis example); it *passes* if at least one test passed and none failed;
it is *not implemented* if every test was skipped because contract names did not resolve.
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from conformance.registry import CONCEPTS

NOT_IMPLEMENTED = "not implemented: "


@dataclass
class Failure:
    test: str
    error: str
    example: str
    reproduce: str


@dataclass
class Cell:
    required: tuple[str, ...] = ()
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    not_implemented: list[str] = field(default_factory=list)
    skip_reasons: list[str] = field(default_factory=list)
    first_failure: Failure | None = None

    @property
    def status(self) -> str:
        if self.failed:
            return "failed"
        if self.passed:
            missing_required = [n for n in self.not_implemented
                                if any(n == r or n.startswith(r + ".") for r in self.required)]
            return "partial" if missing_required else "passed"
        if self.not_implemented:
            return "not implemented"
        return "skipped"


def _skip_reason(report) -> str:
    lr = report.longrepr
    if isinstance(lr, tuple) and len(lr) == 3:
        return str(lr[2]).removeprefix("Skipped: ")
    return str(lr or "")


def _failure_of(report) -> Failure:
    text = report.longreprtext or ""
    # pytest prefixes the exception lines with "E   "; strip it to read Hypothesis's notes.
    plain = [re.sub(r"^E\s{0,11}", "", l) if l.startswith("E ") or l == "E" else l for l in text.splitlines()]
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        error = crash.message
    else:
        e_lines = [p for l, p in zip(text.splitlines(), plain) if l.startswith("E ")]
        error = e_lines[0] if e_lines else (text.strip().splitlines() or [""])[-1]
    example = ""
    for i, line in enumerate(plain):
        if line.lstrip().startswith("Falsifying"):
            chunk = [line]
            if not line.rstrip().endswith(")"):
                for nxt in plain[i + 1:i + 60]:
                    chunk.append(nxt)
                    if nxt.rstrip() == ")":
                        break
            example = "\n".join(chunk)
            break
    repro = next((c for name, c in report.sections if name == "inferspec: reproduce"), "")
    repro = repro.replace("paste to reproduce:", "").strip()
    blob = re.search(r"@reproduce_failure\([^)]*\)", text)
    if blob:
        repro += f"\n(or decorate the test with {blob.group(0)})"
    return Failure(test=report.nodeid, error=error.strip()[:2000], example=example[:4000], reproduce=repro)


class Results:
    def __init__(self, impls: list[str]):
        self.impls = list(impls)
        self.cells: dict[tuple[str, str], Cell] = {}
        self.suite_failed: list[str] = []

    def record(self, report) -> None:
        concept, impl = report.inferspec_concept, report.inferspec_impl
        if impl is None:  # the suite's own tests (meta, harness): not part of the concept table
            if report.failed:
                self.suite_failed.append(report.nodeid)
            return
        cell = self.cells.get((concept, impl))
        if cell is None:
            c = CONCEPTS.get(concept)
            cell = self.cells[(concept, impl)] = Cell(required=c.contract if c else ())
        if report.when == "call" and report.passed:
            cell.passed += 1
        elif report.failed:
            cell.failed += 1
            if cell.first_failure is None:
                cell.first_failure = _failure_of(report)
        elif report.skipped:
            reason = _skip_reason(report)
            at = reason.find(NOT_IMPLEMENTED)
            if at >= 0:
                for name in reason[at + len(NOT_IMPLEMENTED):].split(", "):
                    if name not in cell.not_implemented:
                        cell.not_implemented.append(name)
            else:
                cell.skipped += 1
                if reason not in cell.skip_reasons:
                    cell.skip_reasons.append(reason)

    def any(self) -> bool:
        return bool(self.cells)

    def concepts(self) -> list[str]:
        seen = {c for c, _ in self.cells}
        ordered = [c for c in CONCEPTS if c in seen]
        return ordered + sorted(seen - set(ordered))

    def status(self, concept: str, impl: str) -> str:
        cell = self.cells.get((concept, impl))
        return cell.status if cell else "-"

    def ok(self) -> bool:
        """True when no implemented concept failed for any implementation."""
        return not any(c.failed for c in self.cells.values()) and not self.suite_failed

    def to_dict(self) -> dict:
        out: dict = {"implementations": self.impls, "concepts": {}, "suite_failures": self.suite_failed}
        for concept in self.concepts():
            row = {}
            for impl in self.impls:
                cell = self.cells.get((concept, impl))
                if cell is None:
                    continue
                d = asdict(cell)
                d["status"] = cell.status
                row[impl] = d
            out["concepts"][concept] = row
        out["ok"] = self.ok()
        return out

    def write_json(self, path: str) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")


_STYLE = {"passed": "green", "partial": "cyan", "failed": "bold red", "not implemented": "yellow", "skipped": "dim", "-": "dim"}


def _cell_text(cell: Cell | None, concept: str = "", impl: str = "") -> str:
    if cell is None:
        return "-"
    c = CONCEPTS.get(concept)
    if cell.status == "not implemented" and impl == "optimized" and c is not None and not c.has_optimized:
        return "n/a (reference only)"
    if cell.status in ("passed", "partial"):
        extra = f", missing {', '.join(cell.not_implemented)}" if cell.not_implemented else ""
        skipped = f", {cell.skipped} skipped" if cell.skipped else ""
        return f"{cell.status} ({cell.passed}{skipped}{extra})"
    if cell.status == "failed":
        return f"FAILED {cell.first_failure.test.split('::')[-1] if cell.first_failure else ''}"
    if cell.status == "not implemented":
        return "not implemented"
    return f"skipped ({cell.skip_reasons[0][:40]})" if cell.skip_reasons else "skipped"


def print_table(results: Results, terminalreporter=None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(100, getattr(getattr(terminalreporter, "_tw", None), "fullwidth", 120)),
                      highlight=False)
    table = Table(title="inferspec: per-concept verdict", title_justify="left")
    table.add_column("concept")
    table.add_column("lessons", style="dim")
    for impl in results.impls:
        table.add_column(impl)
    for concept in results.concepts():
        c = CONCEPTS.get(concept)
        cells = []
        for impl in results.impls:
            cell = results.cells.get((concept, impl))
            status = cell.status if cell else "-"
            cells.append(f"[{_STYLE[status]}]{_cell_text(cell, concept, impl)}[/]")
        table.add_row(concept, ", ".join(c.lessons) if c else "", *cells)
    console.print()
    console.print(table)
    for (concept, impl), cell in sorted(results.cells.items()):
        if cell.first_failure is None:
            continue
        f = cell.first_failure
        console.print(f"[bold red]{concept} / {impl}[/]: first failure [bold]{f.test}[/]")
        console.print("  " + "\n  ".join(f.error.splitlines()[:4]), markup=False)
        if f.example:
            console.print("  " + f.example.replace("\n", "\n  "), markup=False)
        if f.reproduce:
            console.print("  reproduce: " + f.reproduce.replace("\n", "\n  "), markup=False)
    for nodeid in results.suite_failed:
        console.print(f"[bold red]suite test failed[/]: {nodeid}")
