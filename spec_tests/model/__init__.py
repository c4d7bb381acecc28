"""Concept `model`: its specification (tests, strategies, oracles, mutants). See docs/model.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="Tiny Llama-style decoder (RMSNorm, RoPE, GQA, SwiGLU)",
    lessons=("01.01", "01.04"),
    chapters=(1,),
    module="1 The generation loop",
    vocabulary=(),
)
