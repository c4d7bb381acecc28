"""Two levels in a verdict: the law, which every correct implementation satisfies, and the
reference's choices where the law leaves them open (tests marked ``choice``), enforced only for an
implementation that declares ``TOKEN_EXACT = True`` (and for ours: the bundled ones, the planted
and mechanical mutants). A choice test that fails for an undeclared submission is told
("law ✓, token-exact ✗ (<choice>)"), never a failure of the cell."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conformance.implementation import declared_token_exact
from conformance.registry import ROOT

pytestmark = pytest.mark.meta

PROBE = '''
import pytest

@pytest.mark.concept("metrics")
def test_law(impl):
    assert impl.of("metrics").get("percentile")([1.0, 2.0, 3.0], 50) == 2.0

@pytest.mark.concept("metrics")
@pytest.mark.choice("the median of an even count is the lower middle")
def test_choice(impl):
    assert impl.of("metrics").get("percentile")([1.0, 2.0], 50) == 1.0, "not the lower middle"
'''


@pytest.mark.parametrize("text,expect", [
    ("TOKEN_EXACT = True\n", True), ("TOKEN_EXACT: bool = True\n", True), ("TOKEN_EXACT = 1\n", False),
    ("TOKEN_EXACT = False\n", False), ("x = 1\n", False), ("def f(:\n", False),
    ("if True:\n    TOKEN_EXACT = True\n", False),   # module level only: read, never executed
])
def test_the_declaration_is_read_from_the_syntax_tree(tmp_path, text, expect):
    f = tmp_path / "sub.py"
    f.write_text(text)
    assert declared_token_exact(f) is expect
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(text)
    assert declared_token_exact(pkg) is expect


def test_a_choice_is_enforced_only_where_declared(tmp_path):
    (tmp_path / "test_probe.py").write_text(PROBE)
    source = (ROOT / "reference" / "metrics.py").read_text()
    law_only, exact = tmp_path / "law_only.py", tmp_path / "exact.py"
    law_only.write_text(source)
    exact.write_text(source + "\nTOKEN_EXACT = True\n")
    out = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(tmp_path / "test_probe.py"), "-q", "-n", "0", "-p", "no:cacheprovider",
         "--rootdir", str(ROOT), "--impl", str(law_only), "--impl", str(exact), "--report-json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    cells = json.loads(out.read_text())["concepts"]["metrics"]
    law, tok = cells["law_only"], cells["exact"]
    # the reference's percentile interpolates (1.5): the probe's choice differs from it
    assert law["status"] == "passed" and law["levels"] == {"law": "passed", "token_exact": "failed"}, law
    assert "law ✓, token-exact ✗ (the median of an even count is the lower middle)" in law["text"], law["text"]
    assert law["choices_failed"] and "not the lower middle" in law["choices_failed"][0]["error"]
    assert tok["status"] == "failed" and "enforced because it declares TOKEN_EXACT" in tok["first_failure"]["rule"]
    assert proc.returncode == 1, proc.stdout[-2000:]   # the declared one failed
