"""`inferspec`'s usage errors and help: answered at once, without importing torch; `check`
validates its concepts and files before pytest starts (exit 2, "did you mean"); `new` takes
`--concept` like `check`; the student-facing docs quote the counts and words the code produces."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conformance import cli, loader, report
from conformance.registry import CONCEPTS, concept_ids

pytestmark = pytest.mark.meta
ROOT = Path(__file__).resolve().parents[2]

# Runs `inferspec ARGS` in a fresh interpreter and reports, as the last line of stdout: its exit
# code, whether torch (or pytest) got imported, and how long the import and the command took.
PROBE = r'''
import json, sys, time
t0 = time.perf_counter()
sys.path.remove("")   # as under the `inferspec` script: the current folder is not on sys.path
import conformance.cli as cli
try:
    rc = cli.main(json.loads(sys.argv[1]))
except SystemExit as exc:   # argparse's --help and its own usage errors
    rc = exc.code
sys.stdout.flush()
print("\nPROBE " + json.dumps({"rc": rc, "torch": "torch" in sys.modules, "pytest": "pytest" in sys.modules,
                              "s": time.perf_counter() - t0}))
'''


def _probe(args: list[str], cwd: Path) -> tuple[dict, str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    r = subprocess.run([sys.executable, "-c", PROBE, json.dumps(args)], cwd=cwd, capture_output=True,
                       text=True, timeout=120, env=env)
    line = next((ln for ln in reversed(r.stdout.splitlines()) if ln.startswith("PROBE ")), None)
    assert line is not None, r.stdout[-2000:] + r.stderr[-2000:]
    return json.loads(line[6:]), r.stdout, r.stderr


@pytest.fixture(scope="module")
def torch_import_s() -> float:
    """What importing torch costs here, in a fresh interpreter: the bound a usage error must stay
    well under."""
    r = subprocess.run([sys.executable, "-c", "import time; t = time.perf_counter(); import torch; "
                        "print(time.perf_counter() - t)"], capture_output=True, text=True, timeout=300)
    return float(r.stdout.strip())


USAGE = [
    (["--help"], 0, r"usage: inferspec", "stdout"),
    (["check", "--help"], 0, r"exit codes:\n  0  every implemented concept passed.*\n  1  .*\n(.*\n)*  2  usage error"
                             r"(.*\n)*  3  the run did not complete", "stdout"),
    (["check", "--concept", "radx", "x.py"], 2,
     r"inferspec check: x\.py: no such file\ninferspec check: unknown concept 'radx' \(did you mean radix\?\)\n"
     r"inferspec check: known concepts: .*kv_bytes.*radix", "stderr"),
    (["check", "does_not_exist.py"], 2, r"\Ainferspec check: does_not_exist\.py: no such file\n\Z", "stderr"),
    (["check", "no_such_module_zz"], 2, r"no_such_module_zz: no module named 'no_such_module_zz' and no such file",
     "stderr"),
    (["check", "--concept", "kv_bytes,nope"], 2, r"unknown concept 'nope'\n.*known concepts:", "stderr"),
    (["new", "x.py", "--concept", "nope"], 2, r"inferspec new: unknown concept 'nope'\ninferspec new: known concepts:",
     "stderr"),
    (["new", "x.py", "--concepts", "radx"], 2, r"inferspec new: unknown concept 'radx' \(did you mean radix\?\)",
     "stderr"),
]


@pytest.mark.parametrize("args,code,pattern,stream", USAGE, ids=[" ".join(u[0]) for u in USAGE])
def test_usage_errors_answer_without_importing_torch(tmp_path, torch_import_s, args, code, pattern, stream):
    got, out, err = _probe(args, tmp_path)
    assert got["rc"] == code, (got, out[-2000:], err[-2000:])
    assert re.search(pattern, out if stream == "stdout" else err), (out[-2000:], err[-2000:])
    assert not got["torch"] and not got["pytest"], got
    assert got["s"] < 0.5 * torch_import_s, (got, torch_import_s)
    assert not (tmp_path / "x.py").exists()


def test_check_suggests_close_file_names(tmp_path):
    (tmp_path / "my_impl.py").write_text("")
    got, _, err = _probe(["check", "my_imp.py"], tmp_path)
    assert got["rc"] == 2 and "my_imp.py: no such file (did you mean my_impl.py?)" in err, err
    got, _, err = _probe(["check", "my_impl"], tmp_path)   # a module name that is a file's stem
    assert got["rc"] == 2 and "did you mean my_impl.py?" in err, err
    (tmp_path / "folder").mkdir()
    got, _, err = _probe(["check", "folder"], tmp_path)    # neither a path nor a module
    assert got["rc"] == 2 and "no module named 'folder'" in err, err
    got, _, err = _probe(["check", "./folder"], tmp_path)
    assert got["rc"] == 2 and "./folder: a folder must be a package (it has no __init__.py)" in err, err
    assert not got["torch"]


def test_import_conformance_is_light_and_its_public_names_still_work():
    code = ("import sys, conformance\n"
            "assert 'torch' not in sys.modules, 'import conformance imported torch'\n"
            "assert set(conformance.__all__) <= set(dir(conformance))\n"
            "from conformance import CONCEPTS, Concept, concept, Implementation, NotImplementedInImpl\n"
            "from conformance import load_implementation, assert_close_to_oracle\n"
            "assert concept('kv_bytes').id == 'kv_bytes' and isinstance(CONCEPTS['radix'], Concept)\n"
            "assert conformance.load_implementation is load_implementation\n"
            "try:\n    conformance.no_such_name\nexcept AttributeError:\n    pass\nelse:\n    raise SystemExit(3)\n"
            "from conformance import profiles  # a submodule still imports by name\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]


def test_concept_ids_are_the_registry_without_building_it():
    r = subprocess.run([sys.executable, "-c", "import sys, json; from conformance.registry import concept_ids; "
                        "print(json.dumps([concept_ids(), 'torch' in sys.modules]))"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    ids, torch_loaded = json.loads(r.stdout)
    assert ids == list(CONCEPTS) == concept_ids() and not torch_loaded


def test_check_and_the_loader_read_impl_values_with_one_rule():
    assert cli.looks_like_path is loader.looks_like_path
    for spec, path in (("my_impl.py", True), ("a/b", True), ("pkg.mod", False), ("reference", False),
                       ("mutant:kv_bytes.x", False), ("dir/pkg.mod", True), ("x.pyc", False)):
        assert loader.looks_like_path(spec) is path, spec


def test_new_takes_concept_like_check_and_keeps_concepts_as_a_hidden_alias(tmp_path, capsys):
    parser = cli.build_parser()
    args = parser.parse_args(["new", "x.py", "--concept", "kv_bytes,metrics", "--concept", "stopping"])
    assert cli._wanted_concepts(args) == ["kv_bytes", "metrics", "stopping"]
    assert cli._wanted_concepts(parser.parse_args(["new", "x.py", "--concepts", "kv_bytes"])) == ["kv_bytes"]
    assert parser.parse_args(["new", "x.py"]).concept == []
    path = tmp_path / "t.py"
    assert cli.main(["new", str(path), "--concept", "kv_bytes", "--concept", "metrics"]) == 0
    head = path.read_text().splitlines()[0]
    assert head.endswith("concepts: kv_bytes, metrics.") and "def kv_cache_bytes" in path.read_text()
    assert cli.main(["new", str(tmp_path / "u.py"), "--concepts", "kv_bytes"]) == 0
    assert "concepts: kv_bytes." in (tmp_path / "u.py").read_text()
    with pytest.raises(SystemExit):
        parser.parse_args(["new", "--help"])
    help_text = capsys.readouterr().out
    assert "--concept ID" in help_text and "--concepts" not in help_text


def test_check_maps_pytests_usage_error_to_2(tmp_path):
    """Arguments after `--` that pytest rejects are a usage error of check: 2, not pytest's 4."""
    r = subprocess.run([sys.executable, "-m", "conformance", "check", "--concept", "kv_bytes", "--",
                        "--no-such-pytest-option"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-2000:]
    assert "--no-such-pytest-option" in r.stderr


# ------------------------------------------------------------------ the docs say what the code does
STUDENT_DOCS = ("README.md", "docs/student-guide.md")


@pytest.mark.parametrize("doc", STUDENT_DOCS)
def test_student_docs_counts_of_concepts_are_current(doc):
    """A count of concepts in the student-facing docs is the registry's (or there is none)."""
    text = (ROOT / doc).read_text()
    for m in re.finditer(r"\b(\d+) concepts\b", text):
        assert int(m.group(1)) == len(concept_ids()), f"{doc}: {m.group(0)!r} (there are {len(concept_ids())})"


def test_student_guide_quotes_the_tables_words_for_unimplemented_names():
    guide = (ROOT / "docs" / "student-guide.md").read_text()
    req = ("kv_bytes.f", "kv_bytes.g", "kv_bytes.h")
    missing = report.Cell(required=req, skipped=3, not_implemented=list(req))
    stubbed = report.Cell(required=req, skipped=3, not_implemented=list(req), stubbed=list(req))
    partial = report.Cell(required=req, passed=12, skipped=5, not_implemented=["kv_bytes.g", "kv_bytes.h"],
                          stubbed=["kv_bytes.h"])
    for cell in (missing, stubbed):
        assert f"`{report.cell_text(cell, 'kv_bytes', 'my_impl')}`" in guide
    text = report.cell_text(partial, "kv_bytes", "my_impl").replace("kv_bytes.g", "X").replace("kv_bytes.h", "Y")
    assert f"`{text}`" in guide, text
