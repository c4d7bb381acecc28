"""Concept `metrics`: its specification (tests, strategies, oracles, mutants). See docs/metrics.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="Serving metrics: TTFT, TPOT, ITL, throughput, goodput, percentiles",
    lessons=("01.11", "04.09", "04.10", "04.11", "04.12"),
    chapters=(),
    module="1 The generation loop",
    # the result records, and summarize's default percentiles (a template must import it)
    vocabulary=("RequestMetrics", "Distribution", "Summary", "DEFAULT_PERCENTILES"),
)
