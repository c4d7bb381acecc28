"""The generic contract test: a contract name with a wrong signature gets one line naming the name
and the parameter, before any property runs (conformance/signatures.py); every bundled
implementation's signatures agree with the reference's."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from conformance import signatures
from conformance.loader import load_implementation
from conformance.registry import CONCEPTS, ROOT


def contract(q, k, v, *, causal=False, scale=None):
    """A contract with positional and keyword-only parameters."""


def _problem(fn, want=contract, label="attention.attention"):
    return signatures.compare(label, signatures.parameters(want), signatures.parameters(fn))


@pytest.mark.parametrize("fn, words", [
    (lambda q, k, *, causal=False, scale=None: 0, "no parameter 'v'"),
    (lambda q, k, v, causal=False, scale=None: 0, "'causal' is positional; the contract makes it keyword-only"),
    (lambda q, k, v, *, scale=None: 0, "no keyword-only parameter 'causal'"),
    (lambda q, v, k, *, causal=False, scale=None: 0, "parameter 2 is 'v', the contract's is 'k'"),
    (lambda q, k, v, *, causal, scale=None: 0, "'causal' has no default"),
    (lambda q, k, v, *, causal=False, scale=None, window: 0, "requires 'window', which the contract does not have"),
    (lambda q, *, k, v, causal=False, scale=None: 0, "'k' is keyword-only; the contract takes it by position too"),
], ids=["missing", "positional-not-keyword-only", "missing-keyword", "swapped", "no-default", "extra-required",
        "keyword-only-not-positional"])
def test_a_wrong_signature_names_the_name_and_the_parameter(fn, words):
    text = _problem(fn)
    assert text is not None and text.startswith("attention.attention: ") and words in text, text
    assert "(the contract: attention(q, k, v, *, causal=False, scale=None))" in text and "\n" not in text


@pytest.mark.parametrize("fn", [
    lambda q, k, v, *, causal=False, scale=None: 0,
    lambda q, k, v, *, causal=True, scale=0.5, window=0: 0,      # defaults' values are the properties' business
    lambda *args, **kwargs: 0,                                   # a catch-all wrapper
    lambda q, k, v, **options: 0,
    lambda q, k, v, *, causal=False, scale=None, **extra: 0,
], ids=["same", "extra-optional", "catch-all", "kwargs", "kwargs-extra"])
def test_a_signature_that_takes_every_contract_call_passes(fn):
    assert _problem(fn) is None


def test_classes_are_checked_by_constructor_and_by_the_methods_both_have():
    class Contract:
        def __init__(self, num_blocks, block_size=16):
            pass

        def append(self, seq, n=1):
            pass

        def free(self, seq):
            pass

    class NoDefault(Contract):
        def __init__(self, num_blocks, block_size):
            pass

    class NoN(Contract):
        def append(self, seq):
            pass

    class Fine:  # no free(): left to the properties that call it
        def __init__(self, num_blocks, block_size=16, watermark=0.0):
            pass

        def append(self, seq, n=1):
            pass

    methods = ["append", "free"]
    want = {"paged.BlockAllocator": signatures.shape(Contract, methods)}
    for cls, words in [(NoDefault, "paged.BlockAllocator: 'block_size' has no default"),
                       (NoN, "paged.BlockAllocator.append: no parameter 'n'"), (Fine, None)]:
        got = signatures.problems(want, {"paged.BlockAllocator": signatures.shape(cls, methods)})
        assert (got == []) if words is None else (len(got) == 1 and got[0].startswith(words)), got


def test_bundled_implementations_keep_the_contract_signatures():
    """Every contract name of every concept that the bundled implementations provide (the
    reference against itself is the test that cannot fail; the optimized one is the regression
    gate), and the check sees something: it reads the signature of every contract name."""
    impls = [load_implementation("reference"), load_implementation("optimized")]
    unread = []
    for c in CONCEPTS.values():
        want, wanted = signatures.contract_shapes(c)
        unread += [name for name, shape in want.items() if shape is None or shape["call"] is None]
        for impl in impls:
            assert signatures.problems(want, signatures.shapes(impl, wanted)) == [], (c.id, impl.name)
    assert unread == [], unread  # every contract name's signature is read (none is a C builtin)


@pytest.mark.heavy
def test_check_says_wrong_signature_before_any_property_runs(tmp_path):
    """A submission whose append lost its parameter n: its cell says so in one line, the first
    test fails with it and every other test of the concept is not run."""
    sub = tmp_path / "my_paged.py"
    sub.write_text(textwrap.dedent("""\
        from reference.paged import *  # noqa: F403
        from reference import paged as _reference


        class BlockAllocator(_reference.BlockAllocator):
            def append(self, seq):
                return super().append(seq, 1)
        """))
    out = tmp_path / "r.json"
    r = subprocess.run([sys.executable, "-m", "conformance", "check", str(sub), "--concept", "paged",
                        "--report-json", str(out)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    cell = json.loads(out.read_text())["concepts"]["paged"]["my_paged"]
    assert cell["status"] == "wrong signature", cell
    assert cell["verdict"].startswith("wrong signature: paged.BlockAllocator.append: no parameter 'n' "
                                      "(the contract: append(seq, n=1))"), cell["verdict"]
    assert cell["passed"] == 0 and cell["not_run"] >= 10, cell
    assert "wrong signature: paged.BlockAllocator.append" in r.stdout, r.stdout[-3000:]
    assert str(ROOT) not in cell["verdict"]
