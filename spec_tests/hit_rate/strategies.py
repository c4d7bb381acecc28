"""Traces for hit-rate accounting: agent-like (a long shared system prompt, then conversations
that grow turn by turn, interleaved) and random (a tiny vocabulary and a few shared stems, so
prompts share prefixes often and at every alignment)."""
from __future__ import annotations

import random

from hypothesis import strategies as st

BLOCK_SIZES = st.integers(1, 4)
STEMS = ((1, 2, 1, 2, 1, 2, 1, 2), (3, 3, 3, 3), (1, 2, 3, 4, 1, 2, 3, 4), ())


@st.composite
def prompts(draw, max_tail: int = 8):
    """A stem (often shared with other prompts) followed by a few tokens of a vocabulary of 5."""
    stem = draw(st.sampled_from(STEMS))
    cut = draw(st.integers(0, len(stem)))
    tail = draw(st.lists(st.integers(0, 4), max_size=max_tail))
    tokens = list(stem[:cut]) + tail
    return tokens or [draw(st.integers(0, 4))]


random_traces = st.lists(prompts(), max_size=12)


def agent_trace(*, agents: int, turns: int, system: int, turn_tokens: int, seed: int = 0,
                interleave: bool = True) -> list[list[int]]:
    """``agents`` conversations sharing one ``system``-token system prompt; turn ``k`` of an agent
    sends its whole history: system prompt + ``k`` chunks of ``turn_tokens`` tokens (the user's
    message and the model's previous answer). Turns are interleaved round robin across agents
    (``interleave``) or each agent's turns come together. The system prompt's token ids are drawn
    from ``seed`` (in [1000, 30000)); every chunk's ids are new (from 30000 up), so two agents'
    prompts share exactly the system prompt."""
    rng = random.Random(seed)
    sys_prompt = [rng.randrange(1000, 30000) for _ in range(system)]
    fresh = iter(range(30000, 2**32))
    history = [list(sys_prompt) for _ in range(agents)]
    out_by_agent = [[] for _ in range(agents)]
    for _ in range(turns):
        for a in range(agents):
            history[a] = history[a] + [next(fresh) for _ in range(turn_tokens)]
            out_by_agent[a].append(list(history[a]))
    if interleave:
        return [out_by_agent[a][t] for t in range(turns) for a in range(agents)]
    return [p for a in range(agents) for p in out_by_agent[a]]


@st.composite
def agent_traces(draw):
    """Small agent-like traces: a shared system prompt and growing conversations."""
    return agent_trace(agents=draw(st.integers(1, 3)), turns=draw(st.integers(1, 4)),
                       system=draw(st.integers(0, 6)), turn_tokens=draw(st.integers(1, 4)),
                       seed=draw(st.integers(0, 2**16)), interleave=draw(st.booleans()))


traces = st.one_of(random_traces, agent_traces())
capacities = st.one_of(st.none(), st.integers(0, 40))
