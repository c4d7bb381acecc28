"""Hypothesis strategies of `budget`: legal thinking budgets over the small token universe
{0: x, 1: E (end of thinking), 2: W, 3: w, 4: A, 5: B, 6: e (EOS in the loop tests)}."""
from __future__ import annotations

from hypothesis import strategies as st

from reference.budget import ThinkingBudget

E = 1
OTHER = [0, 2, 3, 4, 5]          # every id but E: the Waits and the answer prefix draw from them


@st.composite
def budgets(draw, max_ceiling: int = 8) -> ThinkingBudget:
    ceiling = draw(st.one_of(st.none(), st.integers(0, max_ceiling)), label="max_thinking_tokens")
    wait = tuple(draw(st.lists(st.sampled_from(OTHER), min_size=1, max_size=3), label="wait_ids"))
    top = 4 if ceiling is None else min(4, ceiling - len(wait) + 1)
    floor = draw(st.integers(0, max(0, top)), label="min_thinking_tokens")
    if floor == 0 and draw(st.booleans(), label="no wait_ids"):
        wait = ()
    max_waits = draw(st.one_of(st.none(), st.integers(0, 3)), label="max_waits")
    prefix = tuple(draw(st.lists(st.sampled_from(OTHER + [E]), max_size=3), label="answer_prefix_ids"))
    return ThinkingBudget(E, ceiling, floor, wait, max_waits, prefix)


proposals = st.lists(st.sampled_from([0, 0, 1, 1, 2, 4]), min_size=0, max_size=20)
