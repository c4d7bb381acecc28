"""Concept `generate`: its specification (tests, strategies, oracles, mutants). See docs/generate.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="Prefill + decode with a KV cache",
    lessons=("01.02", "01.03", "03.01", "03.02"),
    chapters=(1,),
    module="1 The generation loop",
    vocabulary=(),
)
