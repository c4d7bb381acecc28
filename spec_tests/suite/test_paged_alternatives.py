"""The paged spec accepts every correct block allocator, whichever free block it takes.

The contract of ``paged.BlockAllocator`` does not say which free block a call takes (the bundled
allocators use a LIFO stack; vLLM v1's ``BlockPool`` a FIFO queue), so spec_tests/paged compares
an implementation with the reference up to a renaming of block ids. Two correct allocators that
choose differently live in spec_tests/paged/alt_allocators/ -- ``fifo_queue.py`` (a freed block
goes to the back of a queue) and ``highest_first.py`` (always the largest free id) -- and every
test of spec_tests/paged must pass against them, loaded as submissions are
(``load_implementation(path)``), in process: a ``pytest`` subprocess would add ~3 s of start-up
per run to the default suite. The same check from the command line:

    pytest spec_tests/paged --impl spec_tests/paged/alt_allocators/fifo_queue.py \
        --impl spec_tests/paged/alt_allocators/highest_first.py
"""
from __future__ import annotations

import importlib
import inspect
import itertools
import pkgutil

import pytest
from _pytest.mark.structures import ParameterSet

import spec_tests.paged
from conformance.loader import load_implementation
from conformance.registry import SPEC_DIR

pytestmark = [pytest.mark.meta, pytest.mark.concept("paged")]
ALTERNATIVES = SPEC_DIR / "paged" / "alt_allocators"


def spec_cases():
    """(test id, function, its parametrized arguments) for every test of spec_tests/paged."""
    for info in pkgutil.iter_modules(spec_tests.paged.__path__):
        if not info.name.startswith("test_"):
            continue
        module = importlib.import_module(f"spec_tests.paged.{info.name}")
        for name, fn in vars(module).items():
            if not (name.startswith("test_") and inspect.isfunction(fn)):
                continue
            axes = []  # one list of {argname: value} per parametrize mark
            for mark in getattr(fn, "pytestmark", []):
                if mark.name == "parametrize":
                    names = mark.args[0]
                    names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
                    values = [v.values if isinstance(v, ParameterSet) else v for v in mark.args[1]]
                    axes.append([dict(zip(names, v if len(names) > 1 else (v,))) for v in values])
            for combo in itertools.product(*axes):
                kwargs = {k: v for d in combo for k, v in d.items()}
                yield f"{info.name}::{name}{list(kwargs.values()) if kwargs else ''}", fn, kwargs


@pytest.mark.parametrize("name", ["fifo_queue", "highest_first"])
def test_allocators_that_take_other_blocks_pass_the_spec(name):
    impl = load_implementation(str(ALTERNATIVES / f"{name}.py"), in_process=True).of("paged")
    reference = load_implementation("reference").of("paged")
    ran = []
    for test_id, fn, kwargs in spec_cases():
        params = inspect.signature(fn).parameters
        extra = {"impl": impl, "reference": reference}
        unknown = [p for p in params if p not in kwargs and p not in extra]
        assert not unknown, f"{test_id}: this runner does not provide {unknown}; extend it"
        kwargs = {**kwargs, **{k: v for k, v in extra.items() if k in params}}
        try:
            fn(**kwargs)
        except pytest.skip.Exception as exc:  # "not implemented" or any skip is a failure here
            pytest.fail(f"{name}: {test_id} was skipped ({exc}); it must pass")
        ran.append(test_id)
    assert "test_state_machine::test_state_machine" in ran and len(ran) > 30, ran
