"""Concept `sampling`: its specification (tests, strategies, oracles, mutants). See docs/sampling.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="Temperature, top-k, top-p, min-p, greedy, penalties, logit bias",
    lessons=("01.05",),
    chapters=(1,),
    module="1 The generation loop",
    vocabulary=("SamplingParams",),
)
