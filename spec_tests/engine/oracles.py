"""What the engine tests compare against: a driver that runs an engine on a case and records
everything it streams, each request run alone through ``reference.generate``, and the
tolerance-aware comparison of two token sequences.

Tolerance rule for tokens (docs/design.md): two runs of the same request may pick different
tokens only at a genuine near-tie. Where two sequences first differ (same prefix before it), the
float64 logits of that prefix (``reference.generate`` in float64, teacher-forced) must give the
two candidates values within ``2 x bound`` of each other, ``bound`` being the tolerance rule's
bound of the model's dtype: ``2 x`` the error of the reference alone in that dtype plus its
rounding floor; for a float64 model, where the reference *is* the oracle, the rounding of a
float64 sum of the logits' size (``64 eps |logit|``). After a divergence the two sequences are
continuations of different prefixes and are not compared further.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from conformance.tolerance import rounding_floor
from spec_tests.engine.strategies import EngineCase, Req

MAX_STEPS = 2000


@dataclass
class Run:
    """Everything a driven engine streamed: ``steps[s]`` the outputs of step s as
    (request_id, tokens, finished, finish_reason) tuples; ``schedules[s]`` its ``last_schedule``."""

    steps: list = field(default_factory=list)
    schedules: list = field(default_factory=list)
    streams: dict = field(default_factory=dict)
    reasons: dict = field(default_factory=dict)
    outputs: dict = field(default_factory=dict)


def model(reference, case: EngineCase, dtype=None, device="cpu"):
    cfg = case.config(reference.of("model").get("ModelConfig"), dtype)
    return reference.of("model").get("Transformer")(cfg, seed=case.seed).to(device)


def request_kwargs(i: int, r: Req, stop_ids: tuple) -> dict:
    return dict(request_id=i, prompt=list(r.prompt), max_tokens=r.max_tokens, temperature=r.temperature,
                top_k=r.top_k, top_p=r.top_p, seed=r.seed, stop_token_ids=stop_ids)


def drive(engine, case: EngineCase, stop_ids: dict, only=None) -> Run:
    """Run ``engine`` on ``case``'s requests (only those of ``only``, all at step 0, when given),
    each added just before the step numbered by its arrival; check on the way that nothing is
    streamed for a request after its finished output."""
    order = sorted(range(len(case.requests)) if only is None else only,
                   key=lambda i: (case.arrivals[i] if only is None else 0, i))
    arrival = {i: (case.arrivals[i] if only is None else 0) for i in order}
    run = Run(streams={i: [] for i in order})
    step = 0
    while order or engine.has_unfinished_requests():
        while order and arrival[order[0]] <= step:
            i = order.pop(0)
            engine.add_request(**request_kwargs(i, case.requests[i], stop_ids.get(i, ())))
        outs = [(o.request_id, list(o.new_token_ids), bool(o.finished), o.finish_reason) for o in engine.step()]
        step += 1
        assert step <= MAX_STEPS, f"the engine made no progress in {MAX_STEPS} steps\n  case: {case!r}"
        run.steps.append(outs)
        run.schedules.append(dict(engine.last_schedule))
        for rid, tokens, finished, reason in outs:
            assert rid not in run.reasons, (f"step {step - 1}: request {rid} streamed {tokens} after its "
                                            f"finished output\n  case: {case!r}")
            run.streams[rid].extend(tokens)
            if finished:
                run.reasons[rid] = reason
    run.outputs = {rid: list(tokens) for rid, tokens in engine.outputs.items()}
    return run


def alone_greedy(reference, m, r: Req) -> list[int]:
    """The request's greedy tokens run alone (``reference.generate``), max_tokens of them."""
    tokens, _ = reference.of("generate").get("generate")(m, torch.tensor([r.prompt], device=m.device), r.max_tokens)
    return tokens[0].tolist()


def stop_ids_of(reference, m, case: EngineCase) -> dict:
    """Each greedy request with ``stop_at``: its own alone token at that index, as its stop id."""
    out = {}
    for i, r in enumerate(case.requests):
        if r.stop_at is not None and r.temperature == 0:
            out[i] = (alone_greedy(reference, m, r)[r.stop_at],)
    return out


def truncate(tokens: list, stop_ids: tuple) -> list:
    """``tokens`` up to and including the first stop token."""
    for j, t in enumerate(tokens):
        if t in stop_ids:
            return tokens[:j + 1]
    return tokens


def _replay(tokens: list):
    step = iter(range(len(tokens)))
    return lambda logits, generator: torch.tensor([tokens[next(step)]], device=logits.device)


def near_tie(reference, case: EngineCase, r: Req, prefix: list, a: int, b: int) -> tuple[bool, str]:
    """Whether tokens ``a`` and ``b`` after ``prompt + prefix`` are a genuine near-tie (module doc)."""
    gen = reference.of("generate").get("generate")
    prompt = torch.tensor([r.prompt])
    n = len(prefix) + 1
    _, oracle = gen(model(reference, case, torch.float64), prompt, n, sample_fn=_replay(prefix + [a]))
    oracle = oracle[0, -1]
    dtype = getattr(torch, case.dtype)
    if dtype == torch.float64:
        bound = 64 * torch.finfo(torch.float64).eps * (float(oracle.abs().max()) + 0.3)
    else:
        _, low = gen(model(reference, case), prompt, n, sample_fn=_replay(prefix + [a]))
        bound = 2 * float((low[0, -1].double() - oracle).abs().max()) + rounding_floor(oracle, dtype)
    gap = abs(float(oracle[a] - oracle[b]))
    return gap <= 2 * bound, f"float64 logits {float(oracle[a]):.6g} vs {float(oracle[b]):.6g} (gap {gap:.3e}, allowed {2 * bound:.3e})"


def assert_same_tokens(reference, case: EngineCase, i: int, got: list, want: list, what: str) -> bool:
    """``got == want`` for request ``i`` up to a genuine near-tie (module doc); True if equal."""
    if got == want:
        return True
    d = next((j for j, (x, y) in enumerate(zip(got, want)) if x != y), None)
    assert d is not None, (f"request {i}: {what}: {got} vs {want} (one is a strict prefix of the other: "
                           f"a stop or length decision differs)\n  case: {case!r}")
    ok, why = near_tie(reference, case, case.requests[i], got[:d], got[d], want[d])
    assert ok, (f"request {i}: {what}: tokens differ at index {d}: {got} vs {want}, where the {why}: "
                f"not a near-tie\n  case: {case!r}")
    return False
