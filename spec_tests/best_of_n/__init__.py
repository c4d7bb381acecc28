"""Concept `best_of_n`: its specification (selection rules, closed forms, enumeration, simulation, mutants). See docs/best_of_n.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="Best-of-N, self-consistency voting and verifier scoring (closed forms on toy tasks)",
    lessons=("08.06", "08.07"),
    chapters=(11,),
    module="8 Thinking costs tokens",
    vocabulary=(),
)
