"""Concept `prefix_cache`: its specification (tests, strategies, oracles, mutants). See docs/prefix_cache.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="Prefix caching over a paged pool: hash-chained full blocks (vLLM v1)",
    lessons=("03.09", "03.10", "03.11"),
    chapters=(6,),
    module="3 The KV cache",
    vocabulary=(),
)
