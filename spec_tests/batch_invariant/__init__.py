"""Concept `batch_invariant`: its specification (tests, strategies, oracles, mutants). See docs/batch_invariant.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="Batch-invariant reductions: the same request gives the same bits, whoever shares its batch",
    lessons=("08.10", "08.11"),
    chapters=(11,),
    module="8 Thinking costs tokens",
    vocabulary=("BLOCK", "KV_SPLIT"),
)
