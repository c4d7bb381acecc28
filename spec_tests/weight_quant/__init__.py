"""Concept `weight_quant`: its specification (tests, strategies, oracles, mutants). See docs/weight_quant.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="Weight-only quantisation: group-wise INT4/INT8, round-to-nearest, GPTQ, W4A16 matmul",
    lessons=("05.03",),
    chapters=(5,),
    module="5 Fewer bytes, fewer steps",
    vocabulary=(),
)
