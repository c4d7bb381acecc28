"""Strategies for chunked prefill. Every case is a frozen dataclass whose repr is valid Python
(``from spec_tests.chunked_prefill.strategies import PrefillCase, PlanCase, WorkloadCase``;
``from spec_tests.model.strategies import ModelCase``), so every failure replays.
"""
from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from spec_tests.model.strategies import ModelCase, model_cases


@dataclass(frozen=True)
class PrefillCase:
    """``model.seq_len`` tokens per row (``model.tokens()``): the first ``prefix`` are already in
    the cache (one whole forward), the rest are the prompt, prefilled in chunks of ``chunk_size``."""

    model: ModelCase
    chunk_size: int
    prefix: int = 0


@st.composite
def prefill_cases(draw, *, dtypes=("float32",), max_seq: int = 12, max_batch: int = 2):
    """Prompts of 1..max_seq tokens, after a cached prefix half of the time; chunks of 1 up to 2
    more than the prompt (a chunk longer than the prompt is one forward), so both chunk sizes that
    divide the prompt and ragged last chunks come up."""
    model = draw(model_cases(dtypes=dtypes, max_seq=max_seq, max_batch=max_batch))
    prefix = draw(st.one_of(st.just(0), st.integers(0, model.seq_len - 1)))
    chunk = draw(st.integers(1, model.seq_len - prefix + 2))
    return PrefillCase(model=model, chunk_size=chunk, prefix=prefix)


@dataclass(frozen=True)
class PlanCase:
    """One step to plan: ``decodes`` ids, ``prefills`` (id, remaining) pairs in FCFS order."""

    decodes: tuple
    prefills: tuple
    token_budget: int
    chunk_size: int | None = None


@st.composite
def plan_cases(draw, *, max_decodes: int = 12, max_prefills: int = 6, max_remaining: int = 40,
               max_budget: int = 48):
    """Up to ``max_decodes`` decodes and ``max_prefills`` prefills (ints or strs as ids, shuffled so
    the FCFS order is not the id order), budgets from 1 (below the decode count too), chunk caps
    half of the time."""
    n_dec = draw(st.integers(0, max_decodes))
    n_pre = draw(st.integers(0, max_prefills))
    ids = draw(st.permutations(list(range(n_dec + n_pre))))
    as_str = draw(st.booleans())
    ids = [f"r{i}" if as_str else i for i in ids]
    decodes = tuple(ids[:n_dec])
    prefills = tuple((rid, draw(st.integers(0, max_remaining))) for rid in ids[n_dec:])
    budget = draw(st.integers(1, max_budget))
    chunk = draw(st.one_of(st.none(), st.integers(1, max_remaining + 2)))
    return PlanCase(decodes, prefills, budget, chunk)


@dataclass(frozen=True)
class WorkloadCase:
    """``requests``: (arrival, prompt_len, output_len) triples; a budget, a cap, a cost."""

    requests: tuple
    token_budget: int
    chunk_size: int | None
    weights: float
    per_token: float
    overhead: float


@st.composite
def workload_cases(draw, *, max_requests: int = 6, max_prompt: int = 40, max_output: int = 8,
                   max_budget: int = 48):
    """Small workloads: arrivals on a coarse grid (simultaneous arrivals come up), prompts of
    1..max_prompt, outputs of 1..max_output; costs where the weights, the tokens or the overhead
    dominate (dyadic values, every step > 0 s so step ends are distinct)."""
    n = draw(st.integers(1, max_requests))
    requests = tuple((draw(st.integers(0, 40)) / 8, draw(st.integers(1, max_prompt)), draw(st.integers(1, max_output)))
                     for _ in range(n))
    return WorkloadCase(requests, draw(st.integers(1, max_budget)),
                        draw(st.one_of(st.none(), st.integers(1, max_prompt))),
                        draw(st.sampled_from([0.0, 0.25, 1.0, 4.0])), draw(st.sampled_from([0.0625, 0.125, 0.5])),
                        draw(st.sampled_from([0.0, 0.5])))
