"""The registry and the pieces of each concept agree, and a disagreement stops the run with a clear
message: unknown concept ids, a concept marker other than the test's folder, missing reference
module, docs page or mutants, stale generated docs. Also: adding a concept touches exactly its own
files, and a test knows its concept from its folder (the bound ``impl``, the Patch's default file,
a bare pin label: test_pins.py)."""
from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conformance import docs, mutants
from conformance.consistency import problems
from conformance.registry import CONCEPTS, ROOT, SPEC_DIR

pytestmark = pytest.mark.meta


def test_registry_is_consistent():
    assert problems() == []


def test_concept_ids_are_folders_and_modules():
    for cid, c in CONCEPTS.items():
        assert (SPEC_DIR / cid / "__init__.py").exists()
        assert (ROOT / "reference" / f"{cid}.py").exists()
        assert all(name.startswith(f"{cid}.") for name in c.names), c.names
        assert c.has_optimized == ((ROOT / "optimized" / f"{cid}.py").exists()
                                   or (ROOT / "optimized" / cid / "__init__.py").exists())


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
    stale = mutants.Patch("stale", "text that is not in the file", "no such text", "x", file="reference/kv_bytes.py")
    with pytest.raises(AssertionError, match="occurs 0 times"):
        mutants.patched_source(stale)
    with pytest.raises(AssertionError, match="occurs 0 times in reference/kv_bytes.py"):
        mutants.patched_source(mutants.with_file(dataclasses.replace(stale, file=None), "kv_bytes"))


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
PROBE_INIT = '''from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(title="Probe", lessons=("09.99",), module="9 Probes")
'''
PROBE_TEST = '''def test_square(impl):
    assert impl.get("square")(3.0) == 9.0
'''
PROBE_MUTANTS = '''from conformance.declarations import Patch

MUTANTS = [
    Patch("plus", "adds", "    return x * x", "    return x + x"),
    Patch("cube", "cubes", "    return x * x", "    return x * x * x"),
    Patch("one", "constant", "    return x * x", "    return 1.0"),
]
'''


@pytest.mark.heavy
def test_adding_a_concept_touches_only_its_own_files(tmp_path):
    """The contributing checklist, executed in a copy of the repository: each missing piece is
    named; with reference/X.py, spec_tests/X/, docs/X.md (+ the generated blocks) it runs."""
    repo = _copy_repo(tmp_path)
    before = _tree(repo)
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
    after = _tree(repo)
    touched = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
    # written by hand: the concept's own files; besides them only the blocks `inferspec docs`
    # generates (the concept tables of docs/index.md, the mutant counts of docs/suite-power.md)
    own = ["docs/zz_probe.md", "reference/zz_probe.py", "spec_tests/zz_probe/__init__.py",
           "spec_tests/zz_probe/mutants.py", "spec_tests/zz_probe/test_probe.py"]
    assert touched == sorted(own + ["docs/index.md", "docs/suite-power.md"]), touched


def _tree(repo: Path) -> dict[str, bytes]:
    """Every source and docs file of a copy (caches and bytecode aside): path -> content."""
    return {str(p.relative_to(repo)): p.read_bytes() for p in repo.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and not p.name.startswith(".")
            and ".hypothesis" not in p.parts}


@pytest.mark.parametrize("folder,marker,expected", [
    ("suite", "no_such_concept", "marked with unknown concept 'no_such_concept'"),
    ("kv_bytes", "paged", "lives in spec_tests/kv_bytes/ but is marked concept 'paged'"),
])
@pytest.mark.heavy
def test_probe_tests_that_disagree_stop_the_run(tmp_path, folder, marker, expected):
    repo = _copy_repo(tmp_path)
    target = repo / "spec_tests" / folder / "test_probe.py"
    target.write_text(f'import pytest\n\n@pytest.mark.concept("{marker}")\ndef test_x(impl):\n    pass\n')
    r = _pytest(repo, str(target.relative_to(repo)))
    assert r.returncode != 0
    assert expected in r.stdout + r.stderr, (r.stdout + r.stderr)[-3000:]


# --- a test knows its concept from its folder -----------------------------------------------------
def test_a_bound_implementation_takes_bare_names():
    """``impl.of("kv_bytes")`` (what the impl fixture hands a test in spec_tests/kv_bytes/):
    bare names of the concept's contract; another concept through ``of``; the harness keeps
    resolving qualified names; what the tests read of the implementation is the implementation's."""
    import inspect

    import reference.attention
    import reference.kv_bytes
    from conformance.loader import load_implementation
    ref = load_implementation("reference")
    kv = ref.of("kv_bytes")
    assert kv.concept == "kv_bytes" and ref.concept is None
    assert kv.get("KVCache") is reference.kv_bytes.KVCache
    assert inspect.unwrap(kv.resolve("kv_cache_bytes")) is reference.kv_bytes.kv_cache_bytes
    assert kv.provides("KVCache", "kv_cache_bytes") and kv.missing("KVCache") == []
    assert inspect.unwrap(kv.of("attention").get("attention")) is reference.attention.attention
    assert kv.of("attention") is ref.of("attention")
    assert ref.resolve("kv_bytes.KVCache") is kv.get("KVCache")     # the harness's qualified names
    assert (kv.name, kv.spec, kv.module, kv.submission, kv.isolated) == \
        (ref.name, ref.spec, ref.module, None, False)
    assert repr(kv) == repr(ref) == "Implementation('reference')"


def test_a_dotted_name_and_a_typo_are_errors_not_skips():
    """A dotted name says to use ``impl.of``; a name outside the bound concept's contract is a
    LookupError that names the concept and lists its names (never "not implemented")."""
    from conformance.loader import load_implementation
    from conformance.implementation import NotImplementedInImpl
    kv = load_implementation("reference").of("kv_bytes")
    with pytest.raises(LookupError, match=r"impl.of\('attention'\).get\('attention'\)"):
        kv.get("attention.attention")
    with pytest.raises(LookupError, match=r"ask impl.get\('KVCache'\)"):
        kv.get("kv_bytes.KVCache")
    for method in ("get", "resolve", "provides", "missing"):
        with pytest.raises(LookupError, match="not a contract name of concept 'kv_bytes'") as info:
            getattr(kv, method)("KVCahce")
        assert not isinstance(info.value, NotImplementedInImpl)
        assert "KVCache" in str(info.value) and "kv_cache_bytes" in str(info.value)
    with pytest.raises(LookupError, match="unknown concept"):
        kv.of("kv_byte")


def test_an_unbound_implementation_says_to_name_the_concept():
    """Outside a concept folder (no concept marker) ``impl.get`` refuses and says how to ask."""
    from conformance.loader import load_implementation
    ref = load_implementation("reference")
    with pytest.raises(LookupError, match=r"not bound to a concept.*impl.of\('kv_bytes'\).get\('KVCache'\)"):
        ref.get("kv_bytes.KVCache")
    with pytest.raises(LookupError, match=r"impl.of\('<concept>'\).get\('KVCache'\)"):
        ref.get("KVCache")
    with pytest.raises(LookupError, match="not bound"):
        ref.resolve("KVCache")


def test_a_missing_name_of_the_bound_concept_is_not_implemented(tmp_path):
    """A name of the contract that the implementation lacks is "not implemented", told with its
    qualified name (the report's)."""
    from conformance.loader import load_implementation
    from conformance.implementation import NotImplementedInImpl
    f = tmp_path / "only_bytes.py"
    f.write_text("def kv_cache_bytes(**kw):\n    return 7\n")
    kv = load_implementation(str(f), in_process=True).of("kv_bytes")
    assert kv.get("kv_cache_bytes")() == 7 and kv.missing("KVCache", "kv_cache_bytes") == ["KVCache"]
    with pytest.raises(NotImplementedInImpl, match="not implemented: kv_bytes.KVCache"):
        kv.get("KVCache")


def test_the_fixtures_are_bound_to_the_tests_concept(tmp_path):
    """Run through pytest: a test marked with a concept gets ``impl`` and ``reference`` bound to it
    (as a test in spec_tests/<concept>/ does), and a misspelled name fails the test loudly when
    run against the reference; a test with no concept gets the unbound view."""
    probe = tmp_path / "test_probe.py"
    probe.write_text(textwrap.dedent('''
        import inspect

        import pytest

        @pytest.mark.concept("kv_bytes")
        def test_bound(impl, reference):
            assert impl.concept == reference.concept == "kv_bytes"
            assert inspect.unwrap(impl.get("kv_cache_bytes")) is inspect.unwrap(reference.get("kv_cache_bytes"))

        @pytest.mark.concept("kv_bytes")
        def test_typo(impl):
            impl.get("kv_cache_byte")

        def test_unbound(impl):
            assert impl.concept is None
            with pytest.raises(LookupError, match="impl.of"):
                impl.get("kv_cache_bytes")
    '''))
    r = subprocess.run([sys.executable, "-m", "pytest", str(probe), "-q", "-p", "no:cacheprovider", "--no-report",
                        "--impl", "reference", "--concept", "kv_bytes,suite", "-rf"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode == 1 and "2 passed" in out and "1 failed" in out, out[-3000:]
    assert "FAILED" in out and "test_typo" in out and "not a contract name of concept 'kv_bytes'" in out, out[-3000:]


def test_a_patch_names_its_file_from_the_concept():
    """A Patch's file defaults to reference/<concept>.py of its table; ``module="optimized"`` is
    optimized/<concept>.py; ``file=`` names any other; the old five-argument form is refused."""
    p = mutants.Patch("p", "doc", "old", "new")
    assert mutants.with_file(p, "kv_bytes").file == "reference/kv_bytes.py"
    o = mutants.Patch("o", "doc", "old", "new", module="optimized")
    assert mutants.with_file(o, "paged").file == "optimized/paged.py"
    f = mutants.Patch("f", "doc", "old", "new", file="optimized/_scratch.py")
    assert mutants.with_file(f, "paged").file == "optimized/_scratch.py"
    with pytest.raises(ValueError, match="module="):
        mutants.with_file(mutants.Patch("x", "doc", "old", "new", module="optimised"), "paged")
    with pytest.raises(ValueError, match="not both"):
        mutants.with_file(mutants.Patch("x", "doc", "old", "new", module="optimized", file="a.py"), "paged")
    with pytest.raises(TypeError):
        mutants.Patch("x", "doc", "reference/kv_bytes.py", "old", "new")  # noqa -- the old form
    with pytest.raises(ValueError, match="which concept"):
        mutants.patched_source(p)
    assert {m.file for m in mutants.table("kv_bytes") if isinstance(m, mutants.Patch)} == {"reference/kv_bytes.py"}
    assert any(m.file == "optimized/paged.py" for m in mutants.table("paged") if isinstance(m, mutants.Patch))
