"""Correct submissions pass, in every concept, the way students submit them (issue 19, items 6-7).

* The vocabulary a concept declares may be imported under ``--forbid-reference`` whether the
  worker processes are forked (the default on a CPU machine) or spawned (``INFERSPEC_ZYGOTE=spawn``,
  the only mode on a CUDA machine), and nothing else of the reference may.
* A submission that imports a reference module for a helper (``from reference import paged``) is
  checked on its own names, never on the reference module's.
* The reference re-exported from a file (``from reference.X import *``), submitted with ``--impl``
  in the default (isolated) mode, passes every concept; so does a copy of the reference's source
  that imports only the declared vocabulary, under ``--forbid-reference``. The full sweep (every
  concept, both ways) runs under the ``ci`` and ``thorough`` profiles and with ``--run-slow``; the
  default ``dev`` loop runs a quick sample (the tests that isolation used to break).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conformance import isolation
from conformance.loader import load_implementation
from conformance.registry import CONCEPTS, allowed_imports

pytestmark = pytest.mark.meta
ROOT = Path(__file__).resolve().parents[2]


# --- the vocabulary under --forbid-reference, forked and spawned workers ----------------------------
VOCABULARY_PROBE = textwrap.dedent('''
    import json, sys
    from pathlib import Path
    from conformance import isolation
    from conformance.loader import load_implementation
    from conformance.registry import CONCEPTS, allowed_imports

    mode, folder = sys.argv[1], Path(sys.argv[2])
    if mode == "fork":
        list(CONCEPTS)      # as under pytest: the judge has loaded the registry before it forks
    isolation.pool().prestart(fork=mode == "fork")
    out = {"zygote": "spawned" if isolation.pool().zygote.proc is not None else "forked"}
    allowed = allowed_imports()
    for c in CONCEPTS.values():
        if not c.vocabulary:
            continue
        behaviour = [n.split(".", 1)[1] for n in c.contract
                     if n.split(".", 1)[1] not in allowed[f"reference.{c.id}"]][:1]
        for kind, names in (("vocabulary", c.vocabulary), ("behaviour", behaviour)):
            path = folder / f"{kind}_{c.id}.py"
            path.write_text(f"from reference.{c.id} import {', '.join(names)}\\n")
            impl = load_implementation(str(path), options=isolation.Options(forbid_reference=True))
            try:
                found = impl.resolve(c.contract[-1])
                out[f"{kind}:{c.id}"] = "missing" if found is None else "found"
            except isolation.SubmissionDied as exc:
                out[f"{kind}:{c.id}"] = exc.verdict
            impl.submission.close()
    print(json.dumps(out))
''')


@pytest.fixture(scope="module")
def vocabulary_probes(tmp_path_factory) -> dict:
    """The probe run once per zygote mode (the two in parallel): per concept with vocabulary, a
    file importing exactly its vocabulary and a file importing one behaviour name of it."""
    def one(mode: str) -> dict:
        folder = tmp_path_factory.mktemp(mode)
        env = {**os.environ, "INFERSPEC_ZYGOTE": "spawn" if mode == "spawn" else ""}
        r = subprocess.run([sys.executable, "-c", VOCABULARY_PROBE, mode, str(folder)], cwd=ROOT,
                           capture_output=True, text=True, timeout=300, env=env)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        return json.loads(r.stdout.strip().splitlines()[-1])
    with ThreadPoolExecutor(2) as pool:
        return dict(zip(("fork", "spawn"), pool.map(one, ("fork", "spawn"))))


WITH_VOCABULARY = [c for c in CONCEPTS if CONCEPTS[c].vocabulary]


@pytest.mark.parametrize("mode", ["fork", "spawn"])
@pytest.mark.parametrize("cid", WITH_VOCABULARY)
def test_vocabulary_imports_under_forbid_reference(vocabulary_probes, mode, cid):
    """``from reference.<cid> import <its vocabulary>`` is allowed (the cell is "not implemented",
    nothing forbidden), with forked and with spawned workers; a behaviour name of the same module
    is still the verdict ``forbidden``."""
    got = vocabulary_probes[mode]
    assert got["zygote"] == {"fork": "forked", "spawn": "spawned"}[mode], got
    assert got[f"vocabulary:{cid}"] == "missing", got
    assert got[f"behaviour:{cid}"].startswith(f"forbidden: imports reference.{cid}."), got


def test_allowed_imports_come_from_the_registry():
    """Every concept's reference module, with its vocabulary and contract data classes: derived
    from the registry. ``reference`` and ``optimized`` list no concepts (importing either package
    loads none of its modules), so nothing can depend on such a list going stale."""
    allowed = allowed_imports()
    assert set(allowed) == {f"reference.{c}" for c in CONCEPTS}
    for c in CONCEPTS.values():
        assert set(c.vocabulary) <= set(allowed[f"reference.{c.id}"])
    r = subprocess.run([sys.executable, "-c", "import sys, reference, optimized; "
                        "print(sorted(m for m in sys.modules if m.startswith(('reference.', 'optimized.'))))"],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr


# --- a reference module imported for a helper is not the submission's concept ------------------------
HELPER_IMPORT = '''
from reference import paged                      # for a helper, say; not the submission's allocator


class BlockAllocator:                            # the submission's own (wrong on purpose)
    def __init__(self, *a, **k):
        raise RuntimeError("the submission's own BlockAllocator")
'''


@pytest.mark.parametrize("in_process", [False, True], ids=["isolated", "in-process"])
def test_a_reference_module_imported_by_a_submission_is_not_its_concept(tmp_path, in_process):
    """``from reference import paged`` gives the submission an attribute ``paged`` that is the
    reference's module: ``paged.BlockAllocator`` must resolve to the submission's own top-level
    name (or to nothing), never through that module to the reference's class. A module of the
    submission's own (a sibling file, a submodule, a module object it builds) still counts."""
    (tmp_path / "own.py").write_text(HELPER_IMPORT)
    (tmp_path / "silent.py").write_text("from reference import paged, attention  # noqa: F401\n")
    (tmp_path / "mine_paged.py").write_text("class BlockAllocator:\n    mine = True\n")
    (tmp_path / "sibling.py").write_text("import mine_paged as paged  # noqa: F401\n")
    load = lambda name: load_implementation(str(tmp_path / f"{name}.py"), in_process=in_process)  # noqa: E731
    own, silent, sibling = load("own"), load("silent"), load("sibling")
    import reference.paged
    with pytest.raises(RuntimeError, match="the submission's own BlockAllocator"):
        own.get("paged.BlockAllocator")(num_blocks=4, block_size=2)
    assert silent.resolve("paged.BlockAllocator") is None and silent.resolve("attention.attention") is None
    found = sibling.get("paged.BlockAllocator")
    assert found is not reference.paged.BlockAllocator and found.mine is True
    for impl in (own, silent, sibling):
        if impl.submission is not None:
            impl.submission.close()
