"""Concept `eviction`: its specification (tests, strategies, oracles, mutants). See docs/eviction.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="Eviction policies for prefix caches: LRU, LFU (ties by recency), a recency-frequency hybrid",
    lessons=("03.09", "03.10", "03.11"),
    chapters=(6,),
    module="3 The KV cache",
    vocabulary=(),
)
