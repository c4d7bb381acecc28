"""Concept `paged_attention`: its specification (tests, strategies, oracles, mutants). See docs/paged_attention.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="Paged attention: decode attention over a block table (split-KV, GQA, speculative tokens)",
    lessons=("03.06", "03.07", "03.08"),
    chapters=(3,),
    module="3 The KV cache",
    vocabulary=(),
)
