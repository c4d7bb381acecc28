"""Concept `lora`: its specification (tests, strategies, oracles, mutants). See docs/lora.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="Multi-LoRA batching: many adapters in one batch (Punica, S-LoRA)",
    lessons=("06.08",),
    chapters=(),
    module="6 The Fleet",
    vocabulary=(),
)
