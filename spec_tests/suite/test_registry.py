"""The registry and the pieces of each concept agree, and a disagreement stops the run with a clear
message: unknown concept ids, contract names outside a concept, missing reference module, docs page
or mutants, stale generated docs. Also: adding a concept touches exactly its own files."""
from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conformance import docs, mutants
from conformance.registry import CONCEPTS, ROOT, SPEC_DIR, problems

pytestmark = pytest.mark.meta


def test_registry_is_consistent():
    assert problems() == []


def test_concept_ids_are_folders_and_modules():
    for cid, c in CONCEPTS.items():
        assert (SPEC_DIR / cid / "__init__.py").exists()
        assert (ROOT / "reference" / f"{cid}.py").exists()
        assert all(name.startswith(f"{cid}.") for name in c.names), c.names
        assert c.has_optimized == (ROOT / "optimized" / f"{cid}.py").exists()


def test_generated_docs_are_current():
    assert docs.check() == [], "run `inferspec docs`"


def test_mutant_spec_round_trip():
    cid, m = mutants.all_mutants()[0]
    from conformance.loader import load_implementation
    impl = load_implementation(mutants.spec(cid, m.name))
    assert impl.name == mutants.impl_id(cid, m.name)
    assert impl.provides(*CONCEPTS[cid].contract)
    with pytest.raises(ValueError, match="no mutant"):
        load_implementation(f"mutant:{cid}.surely_not_a_mutant")
    with pytest.raises(ValueError, match="known concept"):
        load_implementation("mutant:not_a_concept.x")


def test_a_stale_patch_is_an_error(tmp_path):
    stale = mutants.Patch("stale", "text that is not in the file", "reference/kv_bytes.py", "no such text", "x")
    with pytest.raises(AssertionError, match="occurs 0 times"):
        mutants.patched_source(stale)


def _copy_repo(tmp_path: Path) -> Path:
    dst = tmp_path / "repo"
    ignore = shutil.ignore_patterns(".git", ".venv", "__pycache__", ".pytest_cache", ".hypothesis",
                                    "*.egg-info", "results", "img", ".benchmarks")
    shutil.copytree(ROOT, dst, ignore=ignore)
    return dst


def _pytest(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", *args, "-q", "-p", "no:cacheprovider", "--no-report"],
                          cwd=repo, capture_output=True, text=True, timeout=600,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(repo), "HOME": str(repo)})


PROBE_REFERENCE = '''"""A probe concept: the square of a number."""
__all__ = ["square"]
__optional__ = []


def square(x: float) -> float:
    """x * x."""
    return x * x
'''
PROBE_INIT = '''from conformance.registry import ConceptInfo

CONCEPT = ConceptInfo(title="Probe", lessons=("09.99",), module="9 Probes")
'''
PROBE_TEST = '''def test_square(impl):
    assert impl.get("zz_probe.square")(3.0) == 9.0
'''
PROBE_MUTANTS = '''from conformance.mutants import Patch

MUTANTS = [
    Patch("plus", "adds", "reference/zz_probe.py", "    return x * x", "    return x + x"),
    Patch("cube", "cubes", "reference/zz_probe.py", "    return x * x", "    return x * x * x"),
    Patch("one", "constant", "reference/zz_probe.py", "    return x * x", "    return 1.0"),
]
'''


@pytest.mark.heavy
def test_adding_a_concept_touches_only_its_own_files(tmp_path):
    """The contributing checklist, executed in a copy of the repository: each missing piece is
    named; with reference/X.py, spec_tests/X/, docs/X.md (+ the generated blocks) it runs."""
    repo = _copy_repo(tmp_path)
    (repo / "spec_tests" / "zz_probe").mkdir()
    (repo / "spec_tests" / "zz_probe" / "__init__.py").write_text(PROBE_INIT)
    (repo / "spec_tests" / "zz_probe" / "test_probe.py").write_text(PROBE_TEST)
    r = _pytest(repo, "spec_tests/zz_probe")
    assert r.returncode != 0 and "no reference module reference/zz_probe.py" in r.stdout + r.stderr
    (repo / "reference" / "zz_probe.py").write_text(PROBE_REFERENCE)
    r = _pytest(repo, "spec_tests/zz_probe")
    out = r.stdout + r.stderr
    assert "no docs page docs/zz_probe.md" in out and "no spec_tests/zz_probe/mutants.py" in out, out[-3000:]
    (repo / "docs" / "zz_probe.md").write_text("# Probe\n\n<!-- contract:begin -->\n<!-- contract:end -->\n")
    (repo / "spec_tests" / "zz_probe" / "mutants.py").write_text(PROBE_MUTANTS.replace('    Patch("one"', '    # Patch("one"'))
    r = _pytest(repo, "spec_tests/zz_probe")
    assert "2 mutants, at least 3 required" in r.stdout + r.stderr
    (repo / "spec_tests" / "zz_probe" / "mutants.py").write_text(PROBE_MUTANTS)
    r = _pytest(repo, "spec_tests/zz_probe")
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    gen = subprocess.run([sys.executable, "-m", "conformance", "docs"], cwd=repo, capture_output=True,
                         text=True, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(repo)})
    assert gen.returncode == 0, gen.stderr
    assert "`zz_probe.square`" in (repo / "docs" / "zz_probe.md").read_text()
    assert "[zz_probe.md](zz_probe.md)" in (repo / "docs" / "index.md").read_text()
    r = _pytest(repo, "spec_tests", "--concept", "zz_probe",
                *[a for n in ("plus", "cube", "one") for a in ("--impl", f"mutant:zz_probe.{n}")])
    assert r.returncode == 1 and r.stdout.count("FAILED") >= 3, r.stdout[-3000:]


@pytest.mark.parametrize("body,expected", [
    ('import pytest\n\n@pytest.mark.concept("no_such_concept")\ndef test_x(impl):\n    pass\n',
     "marked with unknown concept 'no_such_concept'"),
    ('def test_x(impl):\n    impl.get("kv_bytes.no_such_name")\n',
     "impl.get('kv_bytes.no_such_name') is not a contract name"),
    ('def test_x(impl):\n    impl.get("attention.attention")\n',
     "a test of concept 'kv_bytes' asks the implementation for 'attention.attention'"),
])
@pytest.mark.heavy
def test_probe_tests_that_disagree_stop_the_run(tmp_path, body, expected):
    repo = _copy_repo(tmp_path)
    target = repo / "spec_tests" / ("kv_bytes" if "no_such_concept" not in body else "suite") / "test_probe.py"
    target.write_text(textwrap.dedent(body))
    r = _pytest(repo, str(target.relative_to(repo)))
    assert r.returncode != 0
    assert expected in r.stdout + r.stderr, (r.stdout + r.stderr)[-3000:]
