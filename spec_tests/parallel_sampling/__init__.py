"""Concept `parallel_sampling`: its specification (tests, block model, exhaustive exploration, mutants). See docs/parallel_sampling.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="Parallel sampling: n branches sharing a prompt's KV through copy-on-write",
    lessons=("08.06",),
    chapters=(11,),
    module="8 Thinking costs tokens",
    vocabulary=(),
)
