"""Concept `kv_bytes`: its specification (tests, strategies, oracles, mutants). See docs/kv_bytes.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="KV-cache byte formula and context budget",
    lessons=("01.08", "03.03", "03.05"),
    chapters=(1,),
    module="1 The generation loop",
    vocabulary=(),
)
