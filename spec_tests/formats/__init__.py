"""Concept `formats`: its specification (tests, oracles, mutants). See docs/formats.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="Number formats: encode, decode, block scaling",
    lessons=("02.08", "05.02"),
    chapters=(2, 5),
    module="5 Fewer bytes, fewer steps",
    vocabulary=(),
)
