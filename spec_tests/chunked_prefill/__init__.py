"""Concept `chunked_prefill`: its specification (tests, strategies, oracles, mutants). See docs/chunked_prefill.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="Chunked prefill: SARATHI token budget, decode-first, stall-free",
    lessons=("04.05",),
    chapters=(9,),
    module="4 The batch",
    vocabulary=("StepCost", "Simulation"),
)
