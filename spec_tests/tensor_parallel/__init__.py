"""Concept `tensor_parallel`: its specification (tests, the gloo pool, oracles, mutants). See docs/tensor_parallel.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="Tensor parallelism: column then row split, one all-reduce per block",
    lessons=("06.02",),
    chapters=(),
    module="6 The Fleet",
    vocabulary=(),
)
