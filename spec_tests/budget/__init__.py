"""Concept `budget`: its specification (the forcer's state machine, exhaustive short streams, the
interplay with stopping, mutants). See docs/budget.md."""
from conformance.declarations import ConceptInfo

CONCEPT = ConceptInfo(
    title="Thinking-token budgets and budget forcing (end-of-thinking forcing, \u201cWait\u201d insertion)",
    lessons=("08.04",),
    chapters=(11,),
    module="8 Thinking costs tokens",
    vocabulary=("ThinkingBudget", "BudgetStep", "BudgetOutput"),
)
