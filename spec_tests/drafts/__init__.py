"""Concept `drafts`: draft proposers, the speculative decoding loop and its closed forms (tests,
strategies, mutants). See docs/drafts.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="Speculative decoding drafts: prompt lookup, the draft-model loop, expected speedup",
    lessons=("05.08", "05.09", "05.10", "05.11"),
    chapters=(7, 8),
    module="5 Fewer bytes, fewer steps",
    vocabulary=(),
)
