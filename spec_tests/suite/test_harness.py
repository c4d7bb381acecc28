"""The harness's own tests: loading, name resolution, not-implemented handling, the tolerance rule,
the report, the CLI, the student template and the per-test timeout."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from conformance.loader import NotImplementedInImpl, load_implementation
from conformance.registry import CONCEPTS
from conformance.template import render
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
    assert flat.name == "flat" and flat.get("kv_bytes.kv_cache_bytes")() == 7
    pkg = tmp_path / "pkg"
    (pkg / "kv_bytes").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "kv_bytes" / "__init__.py").write_text("def kv_cache_bytes(**kw):\n    return 9\n")
    assert load_implementation(str(pkg)).get("kv_bytes.kv_cache_bytes")() == 9


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
    assert impl.get("attention.attention")() == "namespaced"
    assert impl.get("kv_bytes.kv_cache_bytes")() == "flat"
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
        impl.get("kv_bytes.kv_cache_bytes")()
    with pytest.raises(NotImplementedError, match="deeper down"):
        impl.get("attention.attention")()
    with pytest.raises(NotImplementedInImpl, match="KVCache.__init__"):
        impl.get("kv_bytes.KVCache")()


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


# --- template, CLI, report, timeout ----------------------------------------------------------
def test_template_imports_and_every_concept_is_not_implemented(tmp_path):
    """The full template (every concept) imports, provides every contract name, and each of
    them is reported "not implemented" (a stub), never a failure."""
    ids = list(CONCEPTS)
    text = render(ids)
    path = tmp_path / "full_template.py"
    path.write_text(text)
    impl = load_implementation(str(path))
    for cid in ids:
        for name in CONCEPTS[cid].names:
            assert impl.resolve(name) is not None, name


def test_new_then_check_reports_not_implemented_and_passes_filled_function(tmp_path):
    path = tmp_path / "student.py"
    r = _run(["-m", "conformance", "new", str(path), "--concepts", "kv_bytes,attention"])
    assert r.returncode == 0, r.stderr
    text = path.read_text().replace(
        '    """Bytes of the KV cache for ``batch`` sequences of ``seq_len`` tokens (module doc formula)."""\n'
        '    raise NotImplementedError',
        '    """filled"""\n'
        '    from reference.kv_bytes import kv_bytes_per_token, _positive_int\n'
        '    _positive_int("seq_len", seq_len, allow_zero=True)\n'
        '    _positive_int("batch", batch, allow_zero=True)\n'
        '    return kv_bytes_per_token(layers=layers, kv_heads=kv_heads, head_dim=head_dim, dtype=dtype) * seq_len * batch')
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


def test_check_exits_nonzero_for_a_bug_and_list_works():
    r = _run(["-m", "conformance", "check", "mutant:kv_bytes.missing_factor_two", "--concept", "kv_bytes"])
    assert r.returncode == 1, r.stdout[-2000:]
    assert "FAILED" in r.stdout and "reproduce:" in r.stdout
    r = _run(["-m", "conformance", "list"])
    assert r.returncode == 0 and "attention" in r.stdout and "03.05" in r.stdout


def test_a_hanging_implementation_fails_its_test_instead_of_hanging(tmp_path):
    f = tmp_path / "hang.py"
    f.write_text("import time\ndef kv_cache_bytes(**kw):\n    time.sleep(3600)\n")
    report = tmp_path / "r.json"
    r = _run(["-m", "pytest", "spec_tests/kv_bytes/test_kv_bytes.py", "-k", "course_7b", "--impl", str(f),
              "-o", "timeout=5", "-p", "no:cacheprovider", "--report-json", str(report)], timeout=300)
    assert r.returncode == 1, r.stdout[-2000:]
    assert json.loads(report.read_text())["concepts"]["kv_bytes"]["hang"]["status"] == "failed"
    assert "Timeout" in r.stdout
