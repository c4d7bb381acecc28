"""Concept `smoothquant`: its specification (tests, strategies, oracles, mutants). See docs/smoothquant.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="SmoothQuant: W8A8 with activation outliers migrated into the weights",
    lessons=("05.04", "05.05"),
    chapters=(5,),
    module="5 Fewer bytes, fewer steps",
    vocabulary=(),
)
