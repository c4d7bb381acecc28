"""A judge no submission can break: every way a submission can fail its process, as a test.

Each hostile submission holds a correct ``kv_cache_bytes`` plus one bad ``attention``; all of them
run in ONE pytest run next to the bundled reference (``--concept kv_bytes,attention``, three
tests), so the test also shows that one submission's crash, hang or tampering costs exactly its
own cell: the reference column, every hostile file's kv_bytes cell, the table and the JSON
survive. Then the mechanics of the boundary are checked in-process (global state, in-place
writes, generators, callbacks, autograd), and the report's counterexamples, --forbid-reference and
pytest-xdist. ``inferspec grade`` (a class of good, crashing and hanging submissions): test_grade.py.
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import hypothesis
import pytest
import torch

from conformance.submission import Options
from conformance.verdict import SubmissionDied
from conformance.loader import load_implementation
from conformance.implementation import NotImplementedInImpl

pytestmark = pytest.mark.meta
ROOT = Path(__file__).resolve().parents[2]
# The subprocess runs pin the dev profile: under CI=true the ci profile is derandomized and its fixed
# example sequence need not reach the inputs these tests plant bugs at (seq_len > 5000).
ENV = {**os.environ, "INFERSPEC_PROFILE": "dev"}

# A correct kv_cache_bytes that imports nothing of the reference (so --forbid-reference allows it).
KV = '''
import torch


def _int(name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")


def kv_cache_bytes(*, layers, kv_heads, head_dim, seq_len, batch=1, dtype=torch.float16):
    for name, value in dict(layers=layers, kv_heads=kv_heads, head_dim=head_dim).items():
        _int(name, value, 1)
    for name, value in dict(seq_len=seq_len, batch=batch).items():
        _int(name, value, 0)
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch.dtype, got {dtype!r}")
    size = torch.empty(0, dtype=dtype).element_size()
    return 2 * layers * kv_heads * head_dim * seq_len * batch * size
'''

HOSTILE = {
    "syntax": "def attention(q, k, v, *, causal=False\n",
    "raises": "raise RuntimeError('boom at import')\n",
    "hang": "def attention(q, k, v, **kw):\n    while True:\n        pass\n",
    "exits": "import os\ndef attention(q, k, v, **kw):\n    os._exit(1)\n",
    "segv": "import ctypes\ndef attention(q, k, v, **kw):\n    ctypes.string_at(0)\n",
    "dtype": "torch.set_default_dtype(torch.float64)\ntorch.manual_seed(0)\ntorch.set_num_threads(2)\n"
             "from reference.attention import attention\n",
    "patchref": "import reference.attention\nreference.attention.attention = lambda *a, **k: None\n"
                "def attention(q, k, v, **kw):\n    raise ValueError('wrong on purpose')\n",
    "patchreport": "import conformance.report\nconformance.report.Results.ok = lambda self: True\n"
                   "conformance.report.Cell.status = property(lambda self: 'passed')\n"
                   "def attention(q, k, v, **kw):\n    raise ValueError('wrong on purpose')\n",
    "prints": "def attention(q, k, v, **kw):\n    print('x' * 10_000_000)\n    raise ValueError('wrong on purpose')\n",
    "meta": "def attention(q, k, v, *, return_lse=False, **kw):\n"
            "    out = torch.empty(q.shape, dtype=q.dtype, device='meta')\n"
            "    return (out, torch.empty(q.shape[:-1], device='meta')) if return_lse else out\n",
}
# Two distinct bugs, each hit by an explicit @example of test_matches_course_formula (head_dim 24;
# batch 0), so both are found on every run whatever the profile, seed or example database.
TWO_BUGS = KV.replace("    return 2 * layers", "    if head_dim == 24:\n        raise OverflowError('too long')\n"
                      "    if batch == 0:\n        return 1\n    return 2 * layers")
SELECT = "course_7b or float64_brute_force or fresh_result or matches_course_formula"


def _pytest(args, cwd=ROOT, timeout=300):
    return subprocess.run([sys.executable, "-m", "pytest", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=ENV)


def _write(folder: Path, name: str, body: str) -> Path:
    path = folder / f"{name}.py"
    path.write_text(KV + "\n" + body)
    return path


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    """One run: the reference and every hostile submission, kv_bytes and attention, --call-timeout 5."""
    folder = tmp_path_factory.mktemp("hostile")
    paths = [_write(folder, name, body) for name, body in HOSTILE.items()]
    late = folder / "late.py"
    late.write_text(TWO_BUGS)
    report = folder / "report.json"
    # --call-timeout: the deadline of each call into a submission (`inferspec check --timeout`)
    args = ["spec_tests/kv_bytes", "spec_tests/attention", "-p", "no:cacheprovider", "-q", "--call-timeout", "5",
            "-k", SELECT, "--report-json", str(report), "--hypothesis-seed", "0", "--impl", "reference"]
    for p in paths + [late]:
        args += ["--impl", str(p)]
    r = _pytest(args)
    data = json.loads(report.read_text()) if report.exists() else None
    return r, data, late


def _cell(data, concept, impl):
    return data["concepts"][concept][impl]


@pytest.mark.heavy
def test_the_report_survives_every_hostile_submission(hostile_run):
    """Two submissions or eleven, one crashing or five: the run ends, pytest exits 1 (not 3), the
    table and the JSON are written, the reference and every correct kv_bytes cell pass."""
    r, data, _ = hostile_run
    assert data is not None, r.stdout[-3000:] + r.stderr[-3000:]
    assert r.returncode == 1, r.stdout[-3000:]
    assert "INTERNALERROR" not in r.stdout + r.stderr
    assert "per-concept verdict" in r.stdout
    assert data["ok"] is False
    assert _cell(data, "kv_bytes", "reference")["status"] == "passed"
    assert _cell(data, "attention", "reference")["status"] == "passed"
    for name in HOSTILE:
        if name not in ("syntax", "raises"):
            assert _cell(data, "kv_bytes", name)["status"] == "passed", name


@pytest.mark.parametrize("name, status, words", [
    ("syntax", "import failed", "import failed: SyntaxError"),
    ("raises", "import failed", "import failed: RuntimeError: boom at import"),
])
@pytest.mark.heavy
def test_an_error_at_import_is_the_verdict_of_every_concept(hostile_run, name, status, words):
    _, data, _ = hostile_run
    for concept in ("kv_bytes", "attention"):
        cell = _cell(data, concept, name)
        assert cell["status"] == status and words in cell["verdict"], cell


@pytest.mark.parametrize("name, status, verdict", [
    ("hang", "timed out", "timed out after 5 s"),
    ("exits", "exited", "exited (1)"),
    ("segv", "crashed", "crashed (signal 11)"),
])
@pytest.mark.heavy
def test_a_dying_worker_costs_exactly_its_cell(hostile_run, name, status, verdict):
    """A hang inside a Hypothesis @given test ends at --call-timeout; os._exit and a segfault are named;
    the cell's later tests are not run (and not restarted), its kv_bytes cell passed."""
    _, data, _ = hostile_run
    cell = _cell(data, "attention", name)
    assert cell["status"] == status and cell["verdict"] == verdict, cell
    assert "test_matches_float64_brute_force" in cell["verdict_test"]
    assert cell["not_run"] >= 1, cell          # test_fresh_result_for_each_call was skipped
    assert verdict in cell["text"]


@pytest.mark.heavy
def test_global_state_and_patches_stay_in_the_submissions_process(hostile_run):
    """set_default_dtype, seeds, threads, replacing reference.attention.attention, patching
    conformance.report: none of it reaches the reference column or the verdict."""
    r, data, _ = hostile_run
    assert _cell(data, "attention", "dtype")["status"] == "passed"          # the reference's own code
    assert _cell(data, "attention", "patchref")["status"] == "failed"
    assert "wrong on purpose" in _cell(data, "attention", "patchref")["first_failure"]["error"]
    assert _cell(data, "attention", "patchreport")["status"] == "failed"    # and ok is False, exit 1


@pytest.mark.heavy
def test_printing_10_mb_per_call_costs_nothing(hostile_run):
    r, data, _ = hostile_run
    cell = _cell(data, "attention", "prints")
    assert cell["status"] == "failed"
    assert "more characters not kept" in cell["first_failure"]["output"]
    assert len(r.stdout) < 2_000_000, len(r.stdout)


@pytest.mark.heavy
def test_a_meta_tensor_is_a_wrong_device(hostile_run):
    _, data, _ = hostile_run
    error = _cell(data, "attention", "meta")["first_failure"]["error"]
    assert "wrong device: got meta, expected cpu" in error, error


# --- the boundary's mechanics, in this process ----------------------------------------------------
MECHANICS = KV + '''
import reference.attention
import conformance.report


def attention(q, k, v, **kw):                      # global state, in-place writes, the global RNG
    drawn = torch.rand(3)
    torch.set_default_dtype(torch.float64)
    reference.attention.attention = None
    conformance.report.Results.ok = lambda self: True
    q.mul_(2)
    return drawn


def sample(logits, params=None, generator=None, **kw):   # a seeded draw advances the caller's generator
    return torch.multinomial(torch.softmax(logits, -1), 2, generator=generator)


def generate(model, prompt, n, *, sample_fn=None, generator=None, **kw):   # callbacks, re-entrant
    logits = model(prompt)
    return sample_fn(logits, generator), generator


class MyError(ValueError):
    pass


class StopChecker:
    def __init__(self, params, vocab):
        self.text, self.vocab = "", vocab

    def append(self, token):
        if token not in self.vocab:
            raise MyError(f"token_id {token} not in the vocabulary")
        self.text += self.vocab[token]
        return self

    def extend(self, tokens):                      # calls its own method: an instance attribute may wrap it
        for token in tokens:
            self.append(token)
        return self.text


def summarize(requests, **kw):                     # a judge-side object's private parts are not served
    return requests.__globals__


def attention_varlen(q, k, v, cu_q, cu_k, **kw):   # autograd through the boundary
    return (q * k).sum(-1), cu_q


def request_metrics(arrival, token_times):
    raise NotImplementedError
'''


@pytest.fixture(scope="module")
def mechanics(tmp_path_factory):
    path = tmp_path_factory.mktemp("mech") / "mech.py"
    path.write_text(MECHANICS)
    impl = load_implementation(str(path))
    yield impl
    impl.submission.close()


def test_global_state_of_a_call_stays_in_its_worker_but_the_rng_is_synchronised(mechanics):
    """The worker's default dtype and patches stay there; an in-place write reaches the caller's
    tensor; the global torch RNG is the judge's on the way in and comes back advanced (so a test
    can still see that an implementation drew from it)."""
    import conformance.report
    import reference.attention
    original, ok = reference.attention.attention, conformance.report.Results.ok
    q = torch.ones(2)
    torch.manual_seed(123)
    got = mechanics.of("attention").get("attention")(q, q, q)
    after = torch.random.get_rng_state()
    torch.manual_seed(123)
    want = torch.rand(3)
    assert torch.get_default_dtype() == torch.float32
    assert reference.attention.attention is original and conformance.report.Results.ok is ok
    assert torch.equal(q, torch.full((2,), 2.0)), "an in-place write must reach the caller's tensor"
    assert torch.equal(got, want), "the worker must draw from the judge's global RNG state"
    assert torch.equal(after, torch.random.get_rng_state()), "the judge's global RNG must advance as the worker's did"


def test_generators_callbacks_objects_and_exceptions_cross_the_boundary(mechanics):
    logits = torch.randn(3, 7)
    g = torch.Generator().manual_seed(5)
    mine = torch.Generator().manual_seed(5)
    assert torch.equal(mechanics.of("sampling").get("sample")(logits, None, g),
                       torch.multinomial(torch.softmax(logits, -1), 2, generator=mine))
    assert torch.equal(g.get_state(), mine.get_state()), "the caller's generator must advance"
    seen = []

    def sample_fn(lg, gen):
        seen.append(gen)
        return lg.argmax(-1)

    model = torch.nn.Linear(4, 5)
    x = torch.randn(2, 4)
    tokens, back = mechanics.of("generate").get("generate")(model, x, 1, sample_fn=sample_fn, generator=g)
    assert torch.equal(tokens, model(x).argmax(-1)) and seen == [g] and back is g
    checker = mechanics.of("stopping").get("StopChecker")(None, {0: "a", 1: "b"})
    assert checker.append(0) is checker and checker.append(1).text == "ab"
    with pytest.raises(ValueError, match="token_id 7") as info:
        checker.append(7)
    assert type(info.value).__name__ == "MyError"
    assert getattr(checker, "nope", "default") == "default"
    with pytest.raises(AttributeError, match="private"):
        mechanics.of("metrics").get("summarize")(lambda: 0)
    with pytest.raises(NotImplementedInImpl, match="stubbed"):
        mechanics.of("metrics").get("request_metrics")(0.0, [1.0])


def test_a_saved_method_stays_the_class_method_when_the_instance_attribute_is_wrapped(mechanics):
    """Python's bound-method semantics across the boundary: ``saved = obj.m; obj.m = wrapper`` then
    ``wrapper`` calling ``saved`` runs the class's ``m`` (not ``wrapper`` again, which would recurse),
    the submission's own ``self.m()`` calls reach ``wrapper``, and deleting the attribute restores ``m``."""
    checker = mechanics.of("stopping").get("StopChecker")(None, {0: "a", 1: "b"})
    saved, calls = checker.append, []

    def counting(token):
        calls.append(token)
        return saved(token)

    checker.append = counting
    assert checker.extend([0, 1, 0]) == "aba" and calls == [0, 1, 0]
    assert checker.append(1).text == "abab" and calls == [0, 1, 0, 1]
    del checker.append
    assert checker.extend([1]) == "ababb" and calls == [0, 1, 0, 1]


def test_autograd_runs_through_the_boundary(mechanics):
    q = torch.randn(3, 4, requires_grad=True)
    k = torch.randn(3, 4, requires_grad=True)
    cu = torch.tensor([0, 3])
    out, cu_back = mechanics.of("flash_attention").get("attention_varlen")(q, k, None, cu, cu)
    assert cu_back is cu, "a tensor returned as is must be the caller's own"
    out.sum().backward()
    assert torch.allclose(q.grad, k.detach()) and torch.allclose(k.grad, q.detach())


@pytest.mark.heavy
def test_memory_limit_is_a_clear_verdict(tmp_path):
    """--memory GB caps each worker's address space: allocating past it is "out of memory" for that
    cell; the next call of the cell raises the same verdict at once (nothing is restarted)."""
    vm_kb = next(int(l.split()[1]) for l in Path("/proc/self/status").read_text().splitlines() if l.startswith("VmSize"))
    limit = vm_kb / (1 << 20) + 1.0    # the worker is a fork of this process: its size + 1 GB
    path = tmp_path / "greedy.py"
    path.write_text(KV.replace("    size = ", "    torch.empty(8 << 30, dtype=torch.uint8).fill_(1)\n    size = "))
    impl = load_implementation(str(path), options=Options(memory_gb=limit))
    f = impl.of("kv_bytes").get("kv_cache_bytes")
    try:
        for _ in range(2):
            with pytest.raises(SubmissionDied) as info:
                f(layers=1, kv_heads=1, head_dim=1, seq_len=1)
            assert info.value.kind == "out of memory" and info.value.verdict.startswith("out of memory"), info.value
    finally:
        impl.submission.close()


# --- the report never loses the counterexample ----------------------------------------------------
@pytest.mark.heavy
def test_the_report_shows_hypothesis_examples_and_a_reproduce_command_that_works_anywhere(hostile_run, tmp_path):
    """With the installed Hypothesis (pinned in pyproject), both distinct failures of an exception
    group are listed with their examples; the reproduce line is one line of absolute paths and,
    run from another folder, fails the same test."""
    r, data, late = hostile_run
    f = _cell(data, "kv_bytes", "late")["first_failure"]
    errors = [x["error"] for x in f["failures"]]
    assert any(e.startswith("AssertionError") for e in errors) and any("OverflowError: too long" in e for e in errors), errors
    examples = [x["example"] for x in f["failures"]]
    assert all(e.startswith(("Falsifying", "Failing")) and "seq_len=" in e for e in examples), (hypothesis.__version__, examples)
    lines = [l for l in r.stdout.splitlines() if l.strip().startswith("reproduce: pytest ") and "[late" in l]
    assert lines, r.stdout[-3000:]
    cmd = shlex.split(lines[0].split("reproduce: ", 1)[1])
    assert Path(cmd[1].split("::")[0]).is_absolute() and str(late) in cmd and "--rootdir" in cmd
    again = subprocess.run([sys.executable, "-m", *cmd, "-p", "no:cacheprovider"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=300, env=ENV)
    assert again.returncode == 1 and "1 failed" in again.stdout, again.stdout[-3000:] + again.stderr[-2000:]


# --- --forbid-reference and pytest-xdist ------------------------------------------------------------
@pytest.mark.heavy
def test_forbid_reference_under_xdist_builds_the_table(tmp_path):
    """--forbid-reference: importing the reference's behaviour is the cell's verdict; the
    vocabulary (SamplingParams, StopParams, ModelConfig) may be imported. Run with -n 2: the
    controller builds the table from the workers' reports."""
    pytest.importorskip("xdist", reason="pytest-xdist (a test extra) is not installed")
    cheat = _write(tmp_path, "cheat", "from reference.attention import attention\n")
    vocab = _write(tmp_path, "vocab", "from reference.sampling import SamplingParams\n"
                   "from reference.stopping import StopParams\nfrom reference.model import ModelConfig\n")
    report = tmp_path / "r.json"
    r = _pytest(["spec_tests/kv_bytes", "spec_tests/attention", "-p", "no:cacheprovider", "-n", "2",
                 "--forbid-reference", "-k", "course_7b or float64_brute_force", "--report-json", str(report),
                 "--impl", str(cheat), "--impl", str(vocab)])
    assert report.exists() and "per-concept verdict" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
    data = json.loads(report.read_text())["concepts"]
    assert data["attention"]["cheat"]["status"] == "forbidden"
    assert data["attention"]["cheat"]["verdict"] == "forbidden: imports reference.attention.attention"
    assert data["kv_bytes"]["vocab"]["status"] == "passed"
    assert data["attention"]["vocab"]["status"] == "not implemented"
