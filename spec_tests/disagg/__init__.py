"""Concept `disagg`: its specification (tests, strategies, oracles, mutants). See docs/disagg.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="Disaggregated prefill and decode: the KV hand-off",
    lessons=("04.07", "04.08"),
    chapters=(10,),
    module="4 The batch",
    vocabulary=("Request", "KVHeader"),
)
