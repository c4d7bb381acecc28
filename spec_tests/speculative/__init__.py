"""Concept `speculative`: the verifier of speculative decoding (tests, strategies, oracles,
mutants). See docs/speculative.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="Speculative decoding verifier: lossless rejection sampling, greedy verification",
    lessons=("05.08", "05.09", "05.10", "05.11"),
    chapters=(7, 8),
    module="5 Fewer bytes, fewer steps",
    vocabulary=("Verified", "PAD"),
)
