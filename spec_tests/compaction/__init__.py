"""Concept `compaction`: its specification (tests, oracles, exhaustive enumeration, mutants). See docs/compaction.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="Context compaction and the prefix cache: hit after an edit, the cost of re-prefill",
    lessons=("07.11",),
    chapters=(6,),
    module="7 Serving agents",
    vocabulary=(),
)
