"""Concept `pipeline_parallel`: its specification (schedules, the step-timed simulation, the forward on
the gloo pool, mutants). See docs/pipeline_parallel.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="Pipeline parallelism: stages, micro-batches, the bubble",
    lessons=("06.03",),
    chapters=(),
    module="6 The Fleet",
    vocabulary=(),
)
