"""Concept `kv_tiers`: its specification (model, state machine, exhaustive traces, faults, the crossover, mutants). See docs/kv_tiers.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="KV tiers: offload and reload HBM -> host -> disk with an LRU per tier; reload vs recompute",
    lessons=("07.04", "07.05", "07.06"),
    chapters=(),
    module="7 Serving agents",
    vocabulary=(),
)
