"""Concept `batching`: its specification (tests, strategies, oracles, mutants). See docs/batching.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="Static and continuous batching",
    lessons=("04.01", "04.02", "04.03"),
    chapters=(4,),
    module="4 The batch",
    vocabulary=("Request", "BatchRun", "LengthDistribution"),
)
