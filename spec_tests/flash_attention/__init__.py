"""Concept `flash_attention`: its specification (tests, strategies, oracles, mutants). See docs/flash_attention.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="FlashAttention-2: forward + backward, varlen (packed) batches, nn.Module drop-in",
    lessons=("05.07",),
    chapters=(5,),
    module="3 The KV cache",
    vocabulary=(),
)
