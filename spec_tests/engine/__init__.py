"""Concept `engine`: its specification (tests, strategies, oracles, mutants). See docs/engine.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="The serving engine: continuous batching over a paged KV cache",
    lessons=("04.01", "04.02", "04.03", "04.04", "04.05"),
    chapters=(4, 9),
    module="4 The batch",
    vocabulary=(),
)
