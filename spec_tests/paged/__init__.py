"""Concept `paged`: its specification (tests, strategies, oracles, mutants). See docs/paged.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="Paged KV cache: block allocator, block tables, fork and copy-on-write",
    lessons=("03.06", "03.07", "03.08"),
    chapters=(3,),
    module="3 The KV cache",
    vocabulary=(),
)
