"""The benchmarks measure the bundled implementations, never a submission: a run that checks one
(``--impl`` or ``$INFERSPEC_IMPL``) deselects bench/'s tests, as it does the specification's
non-concept folders (spec_tests/suite, spec_tests/bundled)."""
from __future__ import annotations

import os
from pathlib import Path

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    if not (config.getoption("impl", None) or os.environ.get("INFERSPEC_IMPL")):
        return
    ours = [it for it in items if HERE in Path(str(it.path)).resolve().parents]
    if ours:
        config.hook.pytest_deselected(items=ours)
        items[:] = [it for it in items if it not in ours]
