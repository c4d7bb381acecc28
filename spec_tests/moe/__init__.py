"""Concept `moe`: its specification (tests, strategies, oracles, the gloo cluster, mutants). See docs/moe.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="Mixture of experts: top-k routing, capacity and dropped tokens, load balance, expert parallelism",
    lessons=("06.05", "06.06"),
    chapters=(),
    module="6 The Fleet",
    vocabulary=(),
)
