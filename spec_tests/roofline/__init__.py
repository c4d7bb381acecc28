"""Concept `roofline`: its specification (tests, oracles, real shapes, the kernels' plot, mutants). See docs/roofline.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="The roofline: arithmetic intensity, ridge point, regime; why decode is memory-bound",
    lessons=("02.04", "02.05", "02.06", "02.12"),
    chapters=(2,),
    module="2 The hardware floor",
    vocabulary=(),
)
