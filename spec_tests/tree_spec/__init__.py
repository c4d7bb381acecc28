"""Concept `tree_spec`: tree speculation -- candidate trees, the tree attention mask, greedy and
lossless tree verification, Medusa's typical acceptance (tests, strategies, oracles, mutants). See
docs/tree_spec.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="Tree speculation: candidate trees, tree attention, lossless multi-draft verification",
    lessons=("05.10",),
    chapters=(7, 8),
    module="5 Fewer bytes, fewer steps",
    vocabulary=("Tree", "TreeVerified"),
)
