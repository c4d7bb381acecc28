"""Concept `cost_per_task`: its specification (tests, enumeration, simulation, mutants). See docs/cost_per_task.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="Cost per solved task (retry, pass@k, best-of-n)",
    lessons=("08.12",),
    chapters=(11,),
    module="8 Thinking costs tokens",
    vocabulary=(),
)
