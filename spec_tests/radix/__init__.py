"""Concept `radix`: its specification (tests, strategies, oracles, mutants). See docs/radix.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="Radix prefix cache over token ids (SGLang): match, insert, split, lock, evict",
    lessons=("03.09", "03.10", "03.11"),
    chapters=(6,),
    module="3 The KV cache",
    vocabulary=("MatchResult",),
)
