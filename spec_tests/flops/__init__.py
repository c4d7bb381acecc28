"""Concept `flops`: its specification (tests, strategies, oracles, mutants). See docs/flops.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="FLOPs and bytes of a forward pass (prefill and decode)",
    lessons=("02.02", "02.04", "02.06"),
    chapters=(2,),
    module="2 The hardware floor",
    vocabulary=(),
)
