"""The harness's own tests: loading, name resolution, not-implemented handling, the tolerance rule
(and the kind of an output), the report, the CLI, the student template and the per-test timeout.
Isolation of submissions and `inferspec grade`: test_isolation.py."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from conformance.loader import load_implementation
from conformance.implementation import NotImplementedInImpl
from conformance.registry import CONCEPTS
from conformance.tolerance import ToleranceError, assert_close_to_oracle, assert_metamorphic

pytestmark = pytest.mark.meta
ROOT = Path(__file__).resolve().parents[2]


def _run(args, cwd=ROOT, timeout=600):
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


# --- loading and name resolution -----------------------------------------------------------
def test_load_module_file_and_package(tmp_path):
    assert load_implementation("reference").resolve("attention.attention") is not None
    f = tmp_path / "flat.py"
    f.write_text("def kv_cache_bytes(**kw):\n    return 7\n")
    flat = load_implementation(str(f))
    assert flat.name == "flat" and flat.of("kv_bytes").get("kv_cache_bytes")() == 7
    pkg = tmp_path / "pkg"
    (pkg / "kv_bytes").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "kv_bytes" / "__init__.py").write_text("def kv_cache_bytes(**kw):\n    return 9\n")
    assert load_implementation(str(pkg)).of("kv_bytes").get("kv_cache_bytes")() == 9


def test_resolution_prefers_the_submodule(tmp_path):
    f = tmp_path / "both.py"
    f.write_text(textwrap.dedent("""
        import types
        attention = types.ModuleType("attention")
        attention.attention = lambda *a, **k: "namespaced"
        def kv_cache_bytes(**kw):
            return "flat"
    """))
    impl = load_implementation(str(f))
    assert impl.of("attention").get("attention")() == "namespaced"
    assert impl.of("kv_bytes").get("kv_cache_bytes")() == "flat"
    assert impl.missing("sampling.sample", "kv_bytes.kv_cache_bytes") == ["sampling.sample"]


def test_bad_specs_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="no such file"):
        load_implementation(str(tmp_path / "nope.py"))
    with pytest.raises(ValueError, match="no module named"):
        load_implementation("surely_not_a_module_xyz")
    with pytest.raises(ValueError, match="impl"):
        load_implementation("")


def test_stub_raising_not_implemented_is_a_skip_but_deeper_errors_are_not(tmp_path):
    f = tmp_path / "stubs.py"
    f.write_text(textwrap.dedent("""
        def kv_cache_bytes(**kw):
            raise NotImplementedError
        def _helper():
            raise NotImplementedError("a real bug deeper down")
        def attention(*a, **k):
            return _helper()
        class KVCache:
            def __init__(self, **kw):
                raise NotImplementedError
    """))
    impl = load_implementation(str(f))
    with pytest.raises(NotImplementedInImpl, match="not implemented: kv_bytes.kv_cache_bytes"):
        impl.of("kv_bytes").get("kv_cache_bytes")()
    with pytest.raises(NotImplementedError, match="deeper down"):
        impl.of("attention").get("attention")()
    with pytest.raises(NotImplementedInImpl, match="KVCache.__init__"):
        impl.of("kv_bytes").get("KVCache")()


# --- the tolerance rule ----------------------------------------------------------------------
def _fixture_tensors():
    g = torch.Generator().manual_seed(0)
    oracle = torch.randn(4, 8, generator=g, dtype=torch.float64)
    ref = oracle.to(torch.float16)
    return oracle, ref


def test_tolerance_accepts_reference_level_error_and_rejects_more():
    oracle, ref = _fixture_tensors()
    assert_close_to_oracle(ref.clone(), ref, oracle)
    bad = ref.clone()
    bad[2, 5] += 0.25
    with pytest.raises(ToleranceError) as info:
        assert_close_to_oracle(bad, ref, oracle, name="out", inputs={"q": ref})
    msg = str(info.value)
    assert "(2, 5)" in msg and "reference's own float16 error" in msg and "tensor(4, 8) float16" in msg


def test_tolerance_checks_nonfinite_entries_exactly():
    oracle, ref = _fixture_tensors()
    oracle[0, 0] = float("-inf")
    ref[0, 0] = float("-inf")
    assert_close_to_oracle(ref.clone(), ref, oracle)
    nan = ref.clone()
    nan[0, 0] = float("nan")
    with pytest.raises(ToleranceError, match="non-finite"):
        assert_close_to_oracle(nan, ref, oracle)
    nan = ref.clone()
    nan[1, 1] = float("nan")
    with pytest.raises(ToleranceError, match="non-finite"):
        assert_close_to_oracle(nan, ref, oracle)
    with pytest.raises(ToleranceError, match="dtype"):
        assert_close_to_oracle(ref.float(), ref, oracle)
    with pytest.raises(ToleranceError, match="shape"):
        assert_close_to_oracle(ref[:2], ref, oracle)


def test_metamorphic_bound():
    oracle, ref = _fixture_tensors()
    assert_metamorphic(ref, ref.clone(), ref, oracle)
    other = ref.clone()
    other[3, 3] += 0.5
    with pytest.raises(ToleranceError, match="differ by"):
        assert_metamorphic(ref, other, ref, oracle)


def test_output_of_the_wrong_kind_is_named_before_any_comparison():
    """numpy instead of a tensor, a meta (or other) device, the wrong dtype or shape: each named in
    the message, never a failure deep inside the comparison ("Cannot copy out of meta tensor")."""
    oracle, ref = _fixture_tensors()
    cases = [(ref.numpy(), "wrong type: got numpy.ndarray (numpy instead of a tensor), expected torch.Tensor"),
             (torch.empty(ref.shape, dtype=ref.dtype, device="meta"), "wrong device: got meta, expected cpu"),
             (ref.double(), "wrong dtype: got float64, expected float16"),
             (ref[:2], "wrong shape: got (2, 8), expected (4, 8)"),
             ([1.0], "wrong type: got list")]
    for bad, words in cases:
        with pytest.raises(ToleranceError, match=re.escape(words)):
            assert_close_to_oracle(bad, ref, oracle, name="out")
        with pytest.raises(ToleranceError, match=re.escape(words)):
            assert_metamorphic(bad, ref, ref, oracle, name="out")


# --- template, CLI, report, timeout ----------------------------------------------------------
def test_contract_names_are_unique_across_concepts():
    """A submission is one module: `impl.get(name)` looks a name up by its last part, so two
    concepts may not both own a function of the same name (hit_rate.simulate and a routing
    `simulate` once broke `inferspec new` for the whole course; only the heavy run saw it)."""
    owners: dict[str, set[str]] = {}
    for cid, concept in CONCEPTS.items():
        for name in concept.names:
            owners.setdefault(name.rsplit(".", 1)[1], set()).add(name)
    clashes = {attr: sorted(names) for attr, names in owners.items() if len(names) > 1}
    assert not clashes, clashes


@pytest.mark.heavy
def test_the_full_template_imports_and_checks_as_not_implemented(tmp_path):
    """`inferspec new` for every concept writes a file that imports, and `inferspec check` on it
    (every concept) fails nothing: each concept is "not implemented (stubbed)", or "partial" where
    the template imports a data class of the reference whose own tests pass (ModelConfig,
    StopParams) -- and then the table says the stubs and that only bad-input tests passed."""
    path = tmp_path / "full_template.py"
    r = _run(["-m", "conformance", "new", str(path)])
    assert r.returncode == 0, r.stderr
    report = tmp_path / "r.json"
    r = _run(["-m", "conformance", "check", str(path), "--report-json", str(report)])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    data = json.loads(report.read_text())
    assert set(data["concepts"]) <= set(CONCEPTS) and len(data["concepts"]) >= 8, data["concepts"].keys()
    for cid, cells in data["concepts"].items():
        cell = cells["full_template"]
        assert cell["status"] in ("not implemented", "partial"), (cid, cell["text"])
        assert cell["stubbed"], (cid, cell)
        if cell["status"] == "partial":
            assert "stubbed" in cell["text"], cell["text"]


def test_check_runs_the_spec_only_and_a_submission_never_runs_the_suite(tmp_path):
    """`inferspec check` ignores spec_tests/suite and bundled; `pytest --impl x.py` deselects them,
    and the benchmarks (bench/), even when they are named on the command line."""
    from conformance.cli import _pytest_args, build_parser
    from conformance.registry import NOT_CONCEPTS
    args = build_parser().parse_args(["check", "x.py"])
    args.pytest_args = []
    argv = _pytest_args(args)
    for folder in NOT_CONCEPTS:
        assert str(ROOT / "spec_tests" / folder) in argv
    f = tmp_path / "x.py"
    f.write_text("")
    r = _run(["-m", "pytest", "spec_tests/suite", "spec_tests/bundled", "bench", "spec_tests/kv_bytes",
              "--collect-only", "-q", "-p", "no:cacheprovider", "--impl", str(f)])
    collected = [l for l in r.stdout.splitlines() if "::" in l]
    assert collected and all(l.startswith("spec_tests/kv_bytes/") for l in collected), r.stdout[-2000:]


def test_the_table_says_stubbed_missing_and_bad_input_only():
    from conformance.report import Cell, cell_text
    cell = Cell(required=("kv_bytes.kv_cache_bytes",), passed=3, passed_bad_input=3,
                not_implemented=["kv_bytes.KVCache.__init__", "kv_bytes.KVCache"], stubbed=["kv_bytes.KVCache.__init__"])
    text = cell_text(cell, "kv_bytes", "me")
    assert "only bad-input tests passed" in text and "stubbed kv_bytes.KVCache.__init__" in text
    assert "missing kv_bytes.KVCache" in text and cell.status == "passed"
    assert "only bad-input" not in cell_text(Cell(passed=4, passed_bad_input=3), "kv_bytes", "me")


def test_failure_record_reads_hypothesis_notes_and_unwraps_groups():
    from conformance.report import failure_record
    try:
        group_type = ExceptionGroup
    except NameError:  # Python 3.10: Hypothesis's backport
        from exceptiongroup import ExceptionGroup as group_type
    a, b = AssertionError("off by one\nmore"), TypeError("bad type")
    a.__notes__ = ["Failing test case: test_x(\n    n=3,\n)"]        # what Hypothesis 6.170 attaches
    b.__notes__ = ["Falsifying example: test_x(\n    n=-1,\n)"]      # and what older versions did
    group = group_type("Hypothesis found 2 distinct failures.", [a, b])
    rec = failure_record(group, "t.py::test_x", "pytest t.py::test_x")
    assert [f["error"] for f in rec["failures"]] == ["AssertionError: off by one", "TypeError: bad type"]
    assert [f["example"].splitlines()[1] for f in rec["failures"]] == ["    n=3,", "    n=-1,"]
    assert "2 distinct failures" in rec["error"]


@pytest.mark.heavy
def test_new_then_check_reports_not_implemented_and_passes_filled_function(tmp_path):
    path = tmp_path / "student.py"
    r = _run(["-m", "conformance", "new", str(path), "--concepts", "kv_bytes,attention"])
    assert r.returncode == 0, r.stderr
    text = path.read_text()
    head, _, tail = text.partition("def kv_cache_bytes(")
    body, _, rest = tail.partition("    raise NotImplementedError")
    text = head + "def kv_cache_bytes(" + body + (
        '    """filled"""\n'
        '    from reference.kv_bytes import kv_bytes_per_token, _positive_int\n'
        '    _positive_int("seq_len", seq_len, allow_zero=True)\n'
        '    _positive_int("batch", batch, allow_zero=True)\n'
        '    return kv_bytes_per_token(layers=layers, kv_heads=kv_heads, head_dim=head_dim, dtype=dtype) * seq_len * batch'
    ) + rest
    assert "filled" in text
    path.write_text(text)
    report = tmp_path / "r.json"
    r = _run(["-m", "conformance", "check", str(path), "--concept", "kv_bytes,attention",
              "--report-json", str(report)])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    data = json.loads(report.read_text())
    assert data["concepts"]["kv_bytes"]["student"]["status"] == "passed"
    assert data["concepts"]["attention"]["student"]["status"] == "not implemented"
    assert "per-concept verdict" in r.stdout


@pytest.mark.heavy
def test_check_exits_nonzero_for_a_bug_and_list_works():
    r = _run(["-m", "conformance", "check", "mutant:kv_bytes.missing_factor_two", "--concept", "kv_bytes"])
    assert r.returncode == 1, r.stdout[-2000:]
    assert "FAILED" in r.stdout and "reproduce:" in r.stdout
    r = _run(["-m", "conformance", "list"])
    assert r.returncode == 0 and "attention" in r.stdout and "03.05" in r.stdout
