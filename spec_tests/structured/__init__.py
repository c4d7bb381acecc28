"""Concept `structured`: its specification (grammar -> token masks, constrained sampling, mutants). See docs/structured.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="Structured output: a grammar (regex, JSON Schema) compiled to a token automaton; masks and constrained sampling",
    lessons=("07.08", "07.09"),
    chapters=(),
    module="7 Serving agents",
    vocabulary=(),
)
