"""The live per-concept progress display of ``inferspec check`` (rich).

A pytest plugin that counts, per concept, the tests collected and the tests finished (passed,
failed, skipped), with xdist or without: without xdist the collected items are known after
collection; with xdist the controller learns each worker's collection from
``pytest_xdist_node_collection_finished`` and every test's result from the reports the workers send
back. It draws on its own console (a duplicate of the terminal's file descriptor taken before
pytest starts, so pytest's output capture never swallows it); pytest's own output goes to a log.
"""
from __future__ import annotations

import time
from collections import Counter

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from conformance.registry import NOT_CONCEPTS


def concept_of_nodeid(nodeid: str) -> str | None:
    """``spec_tests/<concept>/test_x.py::test[...]`` -> ``<concept>``."""
    parts = nodeid.split("::", 1)[0].replace("\\", "/").split("/")
    if len(parts) >= 3 and parts[-3] == "spec_tests" and parts[-2] not in NOT_CONCEPTS:
        return parts[-2]
    return None


class ProgressPlugin:
    def __init__(self, console: Console):
        self.console = console
        self.config = None
        self.progress = Progress(TextColumn("{task.description:<18}"), BarColumn(bar_width=30),
                                 MofNCompleteColumn(), TextColumn("{task.fields[status]}"),
                                 TimeElapsedColumn(), console=console, transient=False,
                                 refresh_per_second=4)
        self.tasks: dict[str, int] = {}
        self.totals: Counter = Counter()
        self.failed: Counter = Counter()
        self.outcomes: Counter = Counter()
        self.seen_collection: set[str] = set()
        self.started = time.monotonic()

    # ----------------------------------------------------------------- pytest hooks
    def pytest_configure(self, config) -> None:
        self.config = config

    def _add_collected(self, nodeids) -> None:
        for nodeid in nodeids:
            if nodeid in self.seen_collection:
                continue
            self.seen_collection.add(nodeid)
            concept = concept_of_nodeid(nodeid)
            if concept is not None:
                self.totals[concept] += 1
        for concept, total in self.totals.items():
            if concept not in self.tasks:
                self.tasks[concept] = self.progress.add_task(concept, total=total, status="")
            else:
                self.progress.update(self.tasks[concept], total=total)

    def pytest_collection_finish(self, session) -> None:
        if not hasattr(session.config, "workerinput"):
            self._add_collected(item.nodeid for item in session.items)
            self.progress.start()

    def pytest_xdist_node_collection_finished(self, node, ids) -> None:
        if not self.tasks:
            self.progress.start()
        self._add_collected(ids)

    def pytest_runtest_logreport(self, report) -> None:
        concept = concept_of_nodeid(report.nodeid)
        finished = report.when == "call" or (report.when == "setup" and report.outcome != "passed")
        if finished:
            if str(getattr(report, "wasxfail", "")).startswith("token-exact"):
                self.outcomes["token-exact ✗"] += 1   # a choice test, told (conformance/plugin.py)
            else:
                self.outcomes["error" if report.when == "setup" and report.failed else report.outcome] += 1
        elif report.when == "teardown" and report.failed:
            self.outcomes["error"] += 1
        if concept is None or concept not in self.tasks or not finished:
            return
        if report.failed:
            self.failed[concept] += 1
        status = f"[bold red]{self.failed[concept]} failed[/]" if self.failed[concept] else ""
        self.progress.update(self.tasks[concept], advance=1, status=status)

    def pytest_sessionfinish(self, session, exitstatus) -> None:
        self.stop()

    def stop(self) -> None:
        if self.progress.live.is_started:
            self.progress.stop()

    def summary(self) -> str:
        parts = [f"{self.outcomes[k]} {k}" for k in ("passed", "failed", "error", "token-exact ✗", "skipped")
                 if self.outcomes[k]]
        return ", ".join(parts or ["no tests ran"]) + f" in {time.monotonic() - self.started:.1f} s"
