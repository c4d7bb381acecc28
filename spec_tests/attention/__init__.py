"""Concept `attention`: its specification (tests, strategies, oracles, mutants). See docs/attention.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="Scaled dot-product attention: MHA/MQA/GQA, causal, sliding window, lse, tiled",
    lessons=("03.02", "03.05", "05.07"),
    chapters=(2, 5),
    module="3 The KV cache",
    vocabulary=(),
)
