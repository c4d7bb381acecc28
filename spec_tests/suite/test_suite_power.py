"""The suite's own power: every planted bug of every concept's ``spec_tests/X/mutants.py`` must be
caught by its own concept, in one pytest run over all mutants (derandomized, profile
``mutants``), and every concept must have at least three. The full run happens in CI (``ci``
profile), ``thorough`` and with ``--run-slow``; the default ``dev`` loop skips it."""
from __future__ import annotations

import pytest

from conformance import mutants, power
from conformance.registry import CONCEPTS, MIN_MUTANTS

pytestmark = pytest.mark.meta
ALL = mutants.all_mutants()


@pytest.fixture(scope="module")
def mutant_report(tmp_path_factory, request) -> dict:
    """One derandomized pytest run per group of concepts, the groups in parallel (one per CPU,
    at most 4), each with every mutant of its concepts as an --impl; the JSON reports merged.

    It costs about 8 minutes of a 2-core machine for the ~200 mutants, so it runs under the `ci`
    profile (CI gates every landing on it), under `thorough` and with --run-slow; the quick `dev`
    loop skips it (run one concept's mutants by hand: docs/suite-power.md)."""
    from hypothesis import settings
    if settings.get_current_profile_name() == "dev" and not request.config.getoption("run_slow"):
        pytest.skip("the mutant power run: under the ci and thorough profiles and with --run-slow")
    try:
        return power.run(ALL, profile="mutants", tmp=tmp_path_factory.mktemp("mutants"))
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.mark.timeout(3600)  # the fixture runs every mutant of every concept (minutes on 2 cores)
@pytest.mark.parametrize("cid,mutant", ALL, ids=[mutants.impl_id(c, m.name) for c, m in ALL])
def test_mutant_is_caught(mutant_report, cid, mutant):
    column = mutants.impl_id(cid, mutant.name)
    cell = mutant_report["concepts"].get(cid, {}).get(column)
    assert cell is not None, f"{column}: no test of concept {cid!r} ran against it"
    assert cell["status"] == "failed", (
        f"{column} (planted in {cid}: {mutant.doc}) was NOT caught: {cell['passed']} tests passed, "
        f"not implemented {cell['not_implemented']}")


@pytest.mark.parametrize("cid", list(CONCEPTS))
def test_every_concept_has_mutants(cid):
    assert len(mutants.table(cid)) >= MIN_MUTANTS


def test_patches_apply_exactly_once():
    """Every source patch still matches its file exactly once (else the mutant is stale)."""
    for cid, m in ALL:
        if isinstance(m, mutants.Patch):
            mutants.patched_source(m)
