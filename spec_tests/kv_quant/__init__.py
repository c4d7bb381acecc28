"""Concept `kv_quant`: its specification (tests, strategies, oracles, mutants). See docs/kv_quant.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="KV-cache quantisation: FP8 E4M3 / INT8 paged cache with per-token-head scales",
    lessons=("05.06",),
    chapters=(5,),
    module="5 Fewer bytes, fewer steps",
    vocabulary=(),
)
