"""Concept `scheduler`: its specification (tests, the toy engine, mutants). See docs/scheduler.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="Scheduler: waiting/running queues, KV-block admission, token budget, preemption by recompute (vLLM v1)",
    lessons=("04.04",),
    chapters=(4,),
    module="4 The batch",
    vocabulary=("SchedulerOutput",),
)
