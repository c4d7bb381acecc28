"""Concept `stopping`: its specification (tests, strategies, oracles, mutants). See docs/stopping.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="EOS, max/min tokens, stop strings across token boundaries, held-back streaming",
    lessons=("01.06",),
    chapters=(1,),
    module="1 The generation loop",
    vocabulary=("Step",),  # what append returns
)
