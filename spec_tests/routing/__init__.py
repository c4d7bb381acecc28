"""Concept `routing`: its specification (tests, traces, mutants). See docs/routing.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="Routing across replicas: round-robin, least-loaded, session affinity, cache-aware with a load cap",
    lessons=("06.07", "07.02", "07.03"),
    chapters=(6,),
    module="6 The Fleet",
    vocabulary=("ServiceCost",),
)
