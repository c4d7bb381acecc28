"""Concept `hit_rate`: its specification (tests, strategies, oracles, mutants). See docs/hit_rate.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="Prefix-cache hit rate on a request trace: tokens and time saved, cache-aware scheduling",
    lessons=("03.10",),
    chapters=(6,),
    module="3 The KV cache",
    vocabulary=("PrefillCost",),
)
