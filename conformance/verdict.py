"""What a (submission, concept) cell can come to, in one vocabulary used by the worker, the judge,
the report and the gradebook; and the exceptions that carry a verdict across the harness.

A cell *passes*, is *partial* (an optional name missing), *fails*, is *not implemented* or
*skipped* by its tests; or its worker process *dies* (import failed, forbidden import, crashed,
exited, out of memory, timed out) and the cell's remaining tests are not run. ``Verdict`` is a
``str`` enum: its members compare equal to, print as and serialise to the words the report shows.

This module is a leaf, and light: it imports nothing of the harness, nor pytest or torch (the
commands' usage errors answer before anything heavy is imported).
"""
from __future__ import annotations

import enum


class Verdict(str, enum.Enum):
    PASSED = "passed"
    PARTIAL = "partial"
    FAILED = "failed"
    NOT_IMPLEMENTED = "not implemented"
    SKIPPED = "skipped"
    WRONG_SIGNATURE = "wrong signature"
    # the worker's deaths, in the order the report shows them
    IMPORT_FAILED = "import failed"
    FORBIDDEN = "forbidden"
    CRASHED = "crashed"
    EXITED = "exited"
    OUT_OF_MEMORY = "out of memory"
    TIMED_OUT = "timed out"

    __str__ = str.__str__
    __format__ = str.__format__

    @property
    def died(self) -> bool:
        """The cell's worker is gone (the remaining tests of the cell are not run)."""
        return self in DEATHS


DEATHS = (Verdict.IMPORT_FAILED, Verdict.FORBIDDEN, Verdict.CRASHED, Verdict.EXITED,
          Verdict.OUT_OF_MEMORY, Verdict.TIMED_OUT)


class SubmissionDied(BaseException):
    """The (submission, concept) cell's worker is gone: crashed, exited, out of memory, timed out,
    failed to import, or tried a forbidden import. ``kind`` is the :class:`Verdict`, ``verdict``
    its words for the report (``crashed (signal 11)``, ``timed out after 5 s``). Derives from
    ``BaseException`` so that Hypothesis (which catches ``Exception``) does not retry, shrink or
    replay it: the test ends."""

    def __init__(self, kind: Verdict, verdict: str, test: str = "", detail: str = "", call: str = ""):
        self.kind, self.verdict, self.test, self.detail, self.call = Verdict(kind), verdict, test, detail, call
        super().__init__(self._text())

    def _text(self) -> str:
        where = f" in {self.test.split('::')[-1]}" if self.test else ""
        call = f"\n  during {self.call}" if self.call else ""
        detail = f"\n{self.detail.rstrip()}" if self.detail.strip() else ""
        return f"{self.verdict}{where}{call}{detail}"

    def again(self) -> "SubmissionDied":
        """The same verdict, raised by a later call of the dead cell."""
        return SubmissionDied(self.kind, self.verdict, self.test, self.detail, self.call)


class WrongSignature(Exception):
    """A contract name the implementation provides refuses a call the contract allows
    (``conformance/signatures.py``): raised before the concept's first test, which fails with this
    one line as the cell's verdict; the concept's other tests are not run."""

    kind = Verdict.WRONG_SIGNATURE

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        self.verdict = f"wrong signature: {self.problems[0]}"
        more = "".join(f"\n  and: {p}" for p in self.problems[1:])
        super().__init__(self.verdict + more)


class ForbiddenReference(ImportError):
    """Raised in the worker when a submission checked with --forbid-reference uses the bundled
    implementations (or the tests)."""

    def __init__(self, what: str):
        self.what = what
        super().__init__(f"forbidden: imports {what} (--forbid-reference)")
