"""The per-concept verdict: concept x implementation -> passed / failed / not implemented / ...

A concept *fails* for an implementation if any of its tests failed (the first failure is kept
with its Hypothesis example); it *passes* if at least one test passed and none failed; it is
*not implemented* if every test was skipped because contract names were missing or stubbed. A
submission's worker that crashed, exited, ran out of memory, timed out, failed to import or
tried a forbidden import gives the cell that verdict (``crashed (signal 11) in test_x``) and the
cell's remaining tests are not run.

Each test's outcome is carried as a plain record in ``report.user_properties`` (key
``inferspec``), built where the test ran from the exception itself (Hypothesis's notes hold the
failing example; exception groups are unwrapped), so the table is the same in-process and under
pytest-xdist, where the controller builds it from the workers' reports.
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from conformance.registry import CONCEPTS
from conformance.verdict import DEATHS, Verdict

KEY = "inferspec"
_EXAMPLE_NOTE = re.compile(r"^\s*(Falsifying|Failing)\b")


@dataclass
class Failure:
    test: str
    error: str
    example: str
    reproduce: str
    failures: list = field(default_factory=list)   # [{"error": first line, "example": ...}] per distinct failure
    output: str = ""                               # what the submission printed (capped)
    rule: str = ""                                 # the test's docstring, first sentence: the rule it checks
    kind: str = ""                                 # example / property / state machine / bad input
    calls: str = ""                                # the failing example's calls into the submission


@dataclass
class Cell:
    required: tuple[str, ...] = ()
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    not_implemented: list[str] = field(default_factory=list)   # missing or stubbed
    stubbed: list[str] = field(default_factory=list)           # exist, but raise NotImplementedError
    skip_reasons: list[str] = field(default_factory=list)
    first_failure: Failure | None = None
    passed_bad_input: int = 0     # passing tests that only check the rejection of bad input
    not_run: int = 0              # tests not run because the cell's worker was gone
    verdict: str | None = None    # "crashed (signal 11)", "timed out after 5 s", ...
    verdict_kind: str | None = None  # a Verdict's value: the worker's death
    verdict_test: str = ""
    first_is_death: bool = False  # the first failure was the worker's death (else a real failure came first)
    failing: list = field(default_factory=list)  # every failing test: {"test", "error", "rule", "kind"}
    budget_stops: int = 0         # passing tests that ran fewer examples: their time budget ran out
    choices_passed: int = 0       # passing tests of the reference's choices (marked ``choice``)
    choices_failed: list = field(default_factory=list)  # {"test", "choice", "error"}: not enforced, told
    _rank: tuple = ()             # the shown failure's rank (see KIND_RANK)

    @property
    def status(self) -> Verdict:
        if self.verdict_kind and (self.first_is_death or self.first_failure is None):
            return Verdict(self.verdict_kind)
        if self.failed:
            return Verdict.FAILED
        if self.passed:
            missing_required = [n for n in self.not_implemented
                                if any(n == r or n.startswith(r + ".") for r in self.required)]
            return Verdict.PARTIAL if missing_required else Verdict.PASSED
        if self.not_implemented:
            return Verdict.NOT_IMPLEMENTED
        return Verdict.SKIPPED

    @property
    def only_bad_input(self) -> bool:
        """Every passing test was a bad-input test (a stub that validates its arguments and then
        raises NotImplementedError passes those and nothing else)."""
        return self.passed > 0 and self.passed == self.passed_bad_input

    @property
    def missing(self) -> list[str]:
        return [n for n in self.not_implemented if n not in self.stubbed]


# Which failure a cell shows first: the most specific rule that broke. A fixed example of one rule
# names it best; a property next; a state machine mixes every rule; a bad-input test fails too when
# the probe after the rejected call meets another bug. Among equals, an answer the spec judged wrong
# before a crash inside the implementation (often a later symptom of the same bug), then the
# failing example that made the fewest calls into the submission, then the order the tests ran.
KIND_RANK = {"example": 0, "property": 1, "state machine": 2, "bad input": 3}


def failure_rank(rec: dict, seq: int) -> tuple:
    f = rec.get("failure") or {}
    return (KIND_RANK.get(rec.get("kind", ""), 1), bool(f.get("crash")), f.get("ncalls") or 0, seq)


# ------------------------------------------------------------------------------- records
def first_line(text: str) -> str:
    return _first_line(text)


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def _type_name(exc: BaseException) -> str:
    t = type(exc)
    module = getattr(t, "__module__", "") or ""
    if module in ("builtins", "") or module.startswith("<"):
        return t.__qualname__
    return f"{module}.{t.__qualname__}"


def _leaves(exc: BaseException, depth: int = 0) -> list[BaseException]:
    subs = getattr(exc, "exceptions", None)
    if isinstance(subs, (list, tuple)) and subs and depth < 5 and hasattr(exc, "split"):  # an exception group
        out = []
        for sub in subs:
            out += _leaves(sub, depth + 1)
        return out
    return [exc]


def _example_of(exc: BaseException) -> str:
    notes = [str(n) for n in (getattr(exc, "__notes__", None) or [])]
    for note in notes:
        if _EXAMPLE_NOTE.match(note):
            return note.strip()
    return ""


def failure_record(exc: BaseException, nodeid: str, reproduce: str, longrepr: str = "") -> dict:
    """The failure of a test, read from the exception (never from rendered text): each distinct
    failure of an exception group with its first line and its example (Hypothesis's note
    "Falsifying example: ..." / "Failing test case: ...")."""
    leaves = _leaves(exc)
    failures, seen = [], set()
    for leaf in leaves:
        try:
            message = str(leaf)
        except Exception:  # noqa: BLE001
            message = f"<unprintable {type(leaf).__name__}>"
        line = f"{_type_name(leaf)}: {_first_line(message)}".rstrip(": ")
        if line in seen:
            continue
        seen.add(line)
        failures.append({"error": line, "example": _example_of(leaf)[:4000], "message": message})
    if not failures:
        failures = [{"error": _first_line(longrepr), "example": "", "message": longrepr}]
    first = failures[0]
    if len(failures) > 1:
        error = f"{len(failures)} distinct failures:\n" + "\n".join(f"  {f['error']}" for f in failures)
    elif getattr(leaves[0], "verdict", None) is not None:  # a submission's worker died: its own words
        error = first["message"]
    else:
        body = first["message"].strip().splitlines()
        error = f"{_type_name(leaves[0])}: " + "\n".join(body[:6]) if body else first["error"]
    example = first["example"] or _example_of(exc)
    return {"test": nodeid, "error": error.strip()[:3000], "example": example[:4000], "reproduce": reproduce,
            "failures": [{"error": f["error"][:500], "example": f["example"]} for f in failures[:8]]}


# ------------------------------------------------------------------------------- results
class Results:
    def __init__(self, impls: list[str]):
        self.impls = list(impls)
        self.cells: dict[tuple[str, str], Cell] = {}
        self.suite_failed: list[str] = []

    def record(self, report) -> None:
        """Record a test report carrying an ``inferspec`` record in its user_properties."""
        rec = dict(getattr(report, "user_properties", ()) or ()).get(KEY)
        if rec is not None:
            self.add(rec)

    def add(self, rec: dict) -> None:
        concept, impl = rec["concept"], rec["impl"]
        if impl is None:  # the suite's own tests (meta, harness): not part of the concept table
            if rec["outcome"] == "failed":
                self.suite_failed.append(rec["nodeid"])
            return
        if impl not in self.impls:
            self.impls.append(impl)
        cell = self.cells.get((concept, impl))
        if cell is None:
            c = CONCEPTS.get(concept)
            cell = self.cells[(concept, impl)] = Cell(required=c.contract if c else ())
        outcome = rec["outcome"]
        if rec.get("choice_failed"):  # a choice not enforced for this implementation: the law holds
            cell.choices_failed.append({"test": rec["nodeid"], "choice": rec["choice"],
                                        "error": rec["choice_failed"]})
            return
        if rec["when"] == "call" and outcome == "passed":
            cell.passed += 1
            if rec.get("choice"):
                cell.choices_passed += 1
            if rec.get("budget"):
                cell.budget_stops += 1
            if rec.get("bad_input"):
                cell.passed_bad_input += 1
        elif outcome == "failed":
            cell.failed += 1
            if rec.get("verdict") and cell.verdict is None:
                cell.verdict, cell.verdict_kind = rec["verdict"], rec["verdict_kind"]
                cell.verdict_test = rec["nodeid"]
            f = rec.get("failure")
            if f:
                cell.failing.append({"test": f["test"], "error": _first_line(f["error"]), "rule": f.get("rule", ""),
                                     "kind": rec.get("kind", "")})
                rank = failure_rank(rec, len(cell.failing))
                death = bool(rec.get("verdict"))
                # a death shown first stays first (the cell's verdict); otherwise the most specific rule
                if cell.first_failure is None or (not cell.first_is_death and not death and rank < cell._rank):
                    cell.first_is_death, cell._rank = death, rank
                    cell.first_failure = Failure(test=f["test"], error=f["error"], example=f["example"],
                                                 reproduce=f["reproduce"], failures=f.get("failures", []),
                                                 output=rec.get("output", ""), rule=f.get("rule", ""),
                                                 kind=rec.get("kind", ""), calls=f.get("calls", ""))
        elif outcome == "skipped":
            names = rec.get("not_implemented") or []
            if names:
                for name in names:
                    if name not in cell.not_implemented:
                        cell.not_implemented.append(name)
                    if rec.get("stubbed") and name not in cell.stubbed:
                        cell.stubbed.append(name)
            elif rec.get("not_run"):
                cell.not_run += 1
            else:
                cell.skipped += 1
                reason = rec.get("skip_reason") or ""
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
        """True when no implemented concept failed (or died) for any implementation."""
        return not any(c.failed or c.verdict for c in self.cells.values()) and not self.suite_failed

    def to_dict(self) -> dict:
        out: dict = {"implementations": self.impls, "concepts": {}, "suite_failures": self.suite_failed}
        for concept in self.concepts():
            row = {}
            for impl in self.impls:
                cell = self.cells.get((concept, impl))
                if cell is None:
                    continue
                d = asdict(cell)
                d.pop("_rank", None)
                d["status"] = cell.status.value
                d["text"] = cell_text(cell, concept, impl)
                d["only_bad_input"] = cell.only_bad_input
                d["levels"] = {"law": cell.status.value, "token_exact": token_exact(cell)}
                row[impl] = d
            out["concepts"][concept] = row
        out["ok"] = self.ok()
        return out

    def write_json(self, path: str) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")


STYLE = {Verdict.PASSED: "green", Verdict.PARTIAL: "cyan", Verdict.FAILED: "bold red",
         Verdict.NOT_IMPLEMENTED: "yellow", Verdict.SKIPPED: "dim", "-": "dim", Verdict.WRONG_SIGNATURE: "bold red",
         **{d: "bold red" for d in DEATHS}}


def _names(names: list[str]) -> str:
    return ", ".join(names)


def short_test(nodeid: str, impl: str) -> str:
    """``test_x[impl-case]`` -> ``test_x[case]``, ``test_x[impl]`` -> ``test_x``: the column says the impl."""
    name = nodeid.split("::")[-1]
    head, sep, params = name.partition("[")
    if not sep:
        return name
    parts = [p for p in params.rstrip("]").split("-") if p != impl]
    return f"{head}[{'-'.join(parts)}]" if parts else head


def token_exact(cell: Cell) -> str:
    """The second level of a verdict: "passed" (every test of the reference's choices passed),
    "failed" (some differ: told, not enforced), or "not tested" (the concept has none, or none ran)."""
    if cell.choices_failed:
        return "failed"
    return "passed" if cell.choices_passed else "not tested"


def level_text(cell: Cell) -> str:
    """``; law ✓, token-exact ✗ (<choice>)`` when a choice differs, else nothing."""
    if not cell.choices_failed:
        return ""
    choices = list(dict.fromkeys(c["choice"] for c in cell.choices_failed))
    more = f" and {len(choices) - 1} more" if len(choices) > 1 else ""
    return f"; law ✓, token-exact ✗ ({choices[0]}{more})"


def cell_text(cell: Cell | None, concept: str = "", impl: str = "") -> str:
    if cell is None:
        return "-"
    c = CONCEPTS.get(concept)
    status = cell.status
    if status is Verdict.NOT_IMPLEMENTED and impl == "optimized" and c is not None and not c.has_optimized:
        return "n/a (reference only)"
    if status is Verdict.WRONG_SIGNATURE:
        return cell.verdict
    if cell.verdict and status is not Verdict.FAILED:
        return f"{cell.verdict} in {short_test(cell.verdict_test, impl)}"
    if status in (Verdict.PASSED, Verdict.PARTIAL):
        extra = ""
        if cell.missing:
            extra += f", missing {_names(cell.missing)}"
        if cell.stubbed:
            extra += f", stubbed {_names(cell.stubbed)}"
        skipped = f", {cell.skipped} skipped" if cell.skipped else ""
        only = ", only bad-input tests passed" if cell.only_bad_input else ""
        budget = f", {cell.budget_stops} cut short by the time budget" if cell.budget_stops else ""
        return f"{status} ({cell.passed}{skipped}{only}{budget}{extra}){level_text(cell)}"
    if status is Verdict.FAILED:
        then = f" (then {cell.verdict} in {short_test(cell.verdict_test, impl)})" if cell.verdict else ""
        return f"FAILED {short_test(cell.first_failure.test, impl) if cell.first_failure else ''}{then}"
    if status is Verdict.NOT_IMPLEMENTED:
        return "not implemented (stubbed)" if cell.stubbed and not cell.missing else "not implemented"
    return f"skipped ({cell.skip_reasons[0][:40]})" if cell.skip_reasons else "skipped"


def print_table(results: Results, terminalreporter=None, file=None) -> None:
    from rich.console import Console
    from rich.table import Table

    width = getattr(getattr(terminalreporter, "_tw", None), "fullwidth", None)
    console = Console(width=max(100, width or 120), highlight=False, file=file,
                      force_terminal=None if file is None else False)
    table = Table(title="inferspec: per-concept verdict", title_justify="left")
    table.add_column("concept", no_wrap=True)
    table.add_column("lessons", style="dim")
    for impl in results.impls:
        table.add_column(impl)
    for concept in results.concepts():
        c = CONCEPTS.get(concept)
        cells = []
        for impl in results.impls:
            cell = results.cells.get((concept, impl))
            status = cell.status if cell else "-"
            text = cell_text(cell, concept, impl).replace("[", "\\[")
            cells.append(f"[{STYLE.get(status, 'bold red')}]{text}[/]")
        table.add_row(concept, ", ".join(c.lessons) if c else "", *cells)
    console.print()
    console.print(table)
    for (concept, impl), cell in sorted(results.cells.items()):
        if cell.first_failure is None:
            continue
        f = cell.first_failure
        console.print(f"[bold red]{concept} / {impl}[/]: {'FAILED' if not cell.first_is_death else cell.verdict_kind} "
                      f"[bold]{f.test}[/]", soft_wrap=True)
        # Everything below is printed as is: never wrapped, never parsed as markup.
        if f.rule:
            console.print(f"  the rule: {f.rule}", markup=False, soft_wrap=True)
        console.print("  " + "\n  ".join(f.error.splitlines()[:8]), markup=False, soft_wrap=True)
        if f.calls:  # the failing example as the calls made into the submission: paste into a REPL
            module = Path(impl.rstrip("'")).stem
            console.print(f"  the calls into {impl} (the failing example), in order:\n"
                          f"    from {module} import *\n    " + f.calls.replace("\n", "\n    "),
                          markup=False, soft_wrap=True)
        examples = [x for x in f.failures if x.get("example")] or ([{"example": f.example}] if f.example else [])
        if not (f.calls and f.kind == "state machine"):  # a state machine's draws say less than its calls
            for x in examples[:4]:
                console.print("  " + x["example"].replace("\n", "\n  "), markup=False, soft_wrap=True)
        if f.output:
            console.print("  the submission printed:\n    " + f.output.rstrip().replace("\n", "\n    "),
                          markup=False, soft_wrap=True)
        if f.reproduce:
            console.print("  reproduce: " + f.reproduce.replace("\n", "\n  "), markup=False, soft_wrap=True)
        others = [x for x in cell.failing if x["test"] != f.test]
        if others:
            console.print(f"  {len(others)} more failing test{'s' if len(others) > 1 else ''} of {concept}:",
                          markup=False, soft_wrap=True)
            for x in others[:15]:
                name = short_test(x["test"], impl)
                console.print(f"    {name}: {x['error'][:140]}", markup=False, soft_wrap=True)
            if len(others) > 15:
                console.print(f"    ... and {len(others) - 15} more (pytest's log has them all)", markup=False)
    for (concept, impl), cell in sorted(results.cells.items()):
        if not cell.choices_failed or cell.status is not Verdict.PASSED:
            continue
        console.print(f"[bold cyan]{concept} / {impl}[/]: law ✓, token-exact ✗: it differs from the "
                      f"reference's choices the law leaves open (enforced only with TOKEN_EXACT = True):",
                      soft_wrap=True)
        for c in cell.choices_failed[:8]:
            console.print(f"    {short_test(c['test'], impl)}: {c['error'][:160]}", markup=False, soft_wrap=True)
    for nodeid in results.suite_failed:
        console.print(f"[bold red]suite test failed[/]: {nodeid}", soft_wrap=True)
