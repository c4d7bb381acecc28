"""Concept `cost`: its specification (tests, simulation, mutants). See docs/cost.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="Cost per million tokens (input and output prices)",
    lessons=("06.11",),
    chapters=(6,),
    module="6 The Fleet",
    vocabulary=(),
)
