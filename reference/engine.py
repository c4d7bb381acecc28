"""The serving engine: one loop that composes module 4 (course 04.01-04.05; chapters 4, 9).

An engine turns a stream of requests into a stream of tokens. Each call of :meth:`Engine.step`
is one *iteration* of continuous batching (04.02): the scheduler decides which requests run and
how many of their tokens are computed now; one forward pass computes them all; every request whose
computed tokens reached its full length samples one token; stopping decides who finished; the
scheduler learns the result. Requests join and leave between any two steps.

    step():
        plan    = scheduler.schedule()                 # who runs, how many tokens each, blocks
        for each scheduled request r:                  # running first, then newly admitted
            new_r   = (prompt_r + output_r)[computed_r : computed_r + n_r]
            cache_r = a paged view of r's blocks       # positions < computed_r already hold KV
        logits  = forward_batch(model, new, caches)    # one ragged forward, KV written in place
        for each r whose computed tokens reach len(prompt_r + output_r):
            token_r = sample(logits_r[-1], params_r, uniforms = r's own generator)
            stop_r  = stopping(token_r)                # stop token ids, max_tokens
        scheduler.update(plan, sampled, stopped)       # frees blocks of finished requests
        return one RequestOutput per request that produced a token

The parts, each its own concept:
    model       reference/model.py ``Transformer`` (its weights, through reference/batching.py's
                ``forward_batch``: all requests' tokens in one activation for the linear layers,
                attention per request over its own cache)
    scheduler   reference/scheduler.py ``Scheduler``: waiting/running queues, admission against
                the KV-block budget, the per-step token budget (chunked prefill), preemption by
                recompute, prefix caching. The engine owns no policy: it executes the plan.
    paged KV    one pool per layer, ``(num_blocks, block_size, kv_heads, head_dim)`` (the
                paged_attention concept's "NHD" layout); token position j of a request lives in
                slot j % block_size of block ``block_table[j // block_size]``. A request's
                :class:`PagedCacheView` gives ``forward_batch`` KVCache's interface over it.
    prefix hit  the scheduler reports ``num_computed_tokens > 0`` for a newly admitted request
                whose prompt prefix sits in cached blocks: the engine computes only the rest,
                reading the shared blocks' KV (RoPE positions start after the hit).
    preemption  the scheduler frees a preempted request's blocks and later reschedules it from
                computed 0: the engine recomputes prompt + the tokens it already generated (no
                token is drawn for them again), then samples the next one.
    sampling    reference/sampling.py ``sample`` with one float64 uniform per sampled token drawn
                from the request's own ``torch.Generator(seed)``: a request's draws never depend
                on which other requests share its batch, nor on preemption.
    stopping    reference/stopping.py ``StopChecker`` on token ids: a token in
                ``stop_token_ids`` ends the request (reason "stop", the token is returned), the
                ``max_tokens``-th token ends it (reason "length").

The law (what any engine must satisfy; spec_tests/engine/): every request's tokens equal the
request run alone (``reference.generate`` greedy, or the same engine with only that request), for
any arrival steps, batch composition, token budget, preemption and prefix hits -- bit for bit
where every float op's order is fixed, within the tolerance rule otherwise (a token may differ
only where the float64 logits of the two candidates are within rounding); the streamed tokens
concatenate to the final outputs and nothing is streamed after a request finished; a stop token
ends its request at once; the scheduled tokens of a step never exceed ``max_num_batched_tokens``
nor the running requests ``max_num_seqs``.

Choices the law leaves open (checked only at token-exact): the draw of a sampled token is the
sampling concept's reference draw, ``sample(logits, params, uniforms=u)`` with
``u = torch.rand(1, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)``
continued token after token (the same tokens as ``reference.generate`` with
``generator=torch.Generator().manual_seed(seed)`` and that sampler); which requests run in which
step is the scheduler's policy (vLLM v1's: running first, then waiting, preempt the newest).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from reference._checks import check_int, check_real, is_int, is_real
from reference.batching import forward_batch
from reference.sampling import SamplingParams, draw_uniforms, sample
from reference.scheduler import Scheduler
from reference.stopping import StopChecker, StopParams

__all__ = ["Engine", "RequestOutput"]  # the contract: what an implementation must provide
__optional__ = []  # checked when an implementation provides them


@dataclass(frozen=True)
class RequestOutput:
    """What one step streamed for one request: ``new_token_ids`` (the tokens it produced in this
    step, a list of ints: one token per step in this engine), ``finished`` (True on the request's
    last output, never again afterwards) and ``finish_reason`` ("stop" for a stop token, "length"
    for ``max_tokens``, None while running)."""

    request_id: object
    new_token_ids: list
    finished: bool
    finish_reason: str | None


@dataclass
class Request:
    """The engine's record of one request: its tokens so far and its sampler/stopper state."""

    prompt: list
    params: SamplingParams
    generator: torch.Generator
    stopper: StopChecker
    output: list = field(default_factory=list)
    num_streamed: int = 0
    finished: bool = False
    finish_reason: str | None = None

    @property
    def tokens(self) -> list:
        """Prompt then generated tokens: what the KV cache holds once fully computed."""
        return self.prompt + self.output


class PagedCacheView:
    """KVCache's interface (``append(layer, k, v)``, ``seq_len``) over one request's blocks of
    the engine's pools, for one forward pass.

    ``k_pool``/``v_pool`` are (layers, num_blocks, block_size, kv_heads, head_dim); position j
    lives in slot ``j % block_size`` of block ``block_table[j // block_size]``. The view starts
    with ``num_computed`` positions already written (by earlier steps, or by another request that
    shares the prefix blocks). ``append`` writes the new positions and returns every position's
    K/V of that layer, gathered in order, as (1, kv_heads, length, head_dim)."""

    def __init__(self, k_pool, v_pool, block_table: Sequence[int], block_size: int, num_computed: int):
        self.k_pool, self.v_pool, self.block_size = k_pool, v_pool, block_size
        self.table = torch.as_tensor(list(block_table), dtype=torch.long, device=k_pool.device)
        self.lengths = [num_computed] * k_pool.shape[0]

    @property
    def seq_len(self) -> int:
        return self.lengths[0]

    def slots(self, start: int, stop: int):
        """(block ids, slot indices) of positions start..stop-1."""
        positions = torch.arange(start, stop, device=self.table.device)
        return self.table[positions // self.block_size], positions % self.block_size

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        start, n = self.lengths[layer], k.shape[2]
        blocks, slots = self.slots(start, start + n)
        self.k_pool[layer, blocks, slots] = k[0].transpose(0, 1)        # (n, kv_heads, head_dim)
        self.v_pool[layer, blocks, slots] = v[0].transpose(0, 1)
        self.lengths[layer] = start + n
        blocks, slots = self.slots(0, start + n)
        return (self.k_pool[layer, blocks, slots].transpose(0, 1)[None],
                self.v_pool[layer, blocks, slots].transpose(0, 1)[None])


def check_prompt(prompt, vocab_size: int) -> list:
    """``prompt`` as a list of ints: a non-empty sequence of ints or a 1-d integer tensor, every id
    in [0, vocab_size); TypeError/ValueError naming ``prompt``."""
    if isinstance(prompt, torch.Tensor):
        if prompt.dtype.is_floating_point or prompt.dtype.is_complex or prompt.dtype == torch.bool:
            raise TypeError(f"prompt must hold integer token ids, got a {prompt.dtype} tensor")
        if prompt.dim() != 1:
            raise ValueError(f"prompt must be 1-d, got shape {tuple(prompt.shape)}")
        prompt = prompt.tolist()
    if isinstance(prompt, (str, bytes)) or not isinstance(prompt, Sequence):
        raise TypeError(f"prompt must be a sequence of int token ids, got {type(prompt).__name__}")
    if not all(is_int(t) for t in prompt):
        raise TypeError(f"prompt must hold int token ids, got {list(prompt)[:8]!r}")
    if len(prompt) == 0:
        raise ValueError("prompt must hold at least one token")
    if min(prompt) < 0 or max(prompt) >= vocab_size:
        raise ValueError(f"prompt: token ids must be in [0, {vocab_size}), got values in "
                         f"[{min(prompt)}, {max(prompt)}]")
    return list(prompt)


class Engine:
    """A continuous-batching engine over ``model`` with a paged KV cache (module doc).

    ``Engine(model, *, num_blocks, block_size, max_num_batched_tokens, max_num_seqs,
    enable_chunked_prefill=True, enable_prefix_caching=False)``: ``model`` a reference
    ``Transformer`` (its ``config`` and weights are what the engine runs); the KV pool holds
    ``num_blocks`` blocks of ``block_size`` token slots per layer; a step computes at most
    ``max_num_batched_tokens`` tokens of at most ``max_num_seqs`` requests;
    ``enable_chunked_prefill`` lets a prompt be computed over several steps (off: a prompt is
    admitted only when it fits the step's token budget whole); ``enable_prefix_caching`` reuses
    the KV of full blocks whose tokens (and every token before them) equal an earlier request's.
    The sizes are ints >= 1 (TypeError/ValueError naming them), the flags bools (TypeError).

    Streaming: :meth:`step` returns a ``RequestOutput`` for every request that produced a token in
    that step (a request whose prompt is still being computed in chunks, or that was preempted,
    produces none); a finished request's last output has ``finished=True`` and it never appears
    again. :attr:`outputs` maps every request ever added to its generated tokens so far.
    :attr:`last_schedule` maps the requests of the last step to the tokens computed for each.
    """

    def __init__(self, model, *, num_blocks: int, block_size: int, max_num_batched_tokens: int,
                 max_num_seqs: int, enable_chunked_prefill: bool = True, enable_prefix_caching: bool = False):
        for name, value in (("num_blocks", num_blocks), ("block_size", block_size),
                            ("max_num_batched_tokens", max_num_batched_tokens), ("max_num_seqs", max_num_seqs)):
            check_int(name, value, minimum=1)
        for name, value in (("enable_chunked_prefill", enable_chunked_prefill),
                            ("enable_prefix_caching", enable_prefix_caching)):
            if not isinstance(value, bool):
                raise TypeError(f"{name} must be a bool, got {value!r}")
        config = getattr(model, "config", None)
        if config is None or not callable(model):
            raise TypeError(f"model must be a Transformer (a callable with a config), got {type(model).__name__}")
        self.model, self.config = model, config
        self.block_size, self.num_blocks = block_size, num_blocks
        self.scheduler = Scheduler(num_blocks, block_size, max_num_batched_tokens, max_num_seqs,
                                   enable_chunked_prefill=enable_chunked_prefill,
                                   enable_prefix_caching=enable_prefix_caching)
        weight = next(iter(model.parameters()))
        shape = (config.n_layers, num_blocks, block_size, config.n_kv_heads, config.head_dim)
        self.k_pool = torch.zeros(shape, dtype=weight.dtype, device=weight.device)
        self.v_pool = torch.zeros(shape, dtype=weight.dtype, device=weight.device)
        self.requests: dict = {}
        self.last_schedule: dict = {}
        self.num_steps = 0

    # --- requests ---------------------------------------------------------------------------
    def add_request(self, request_id, prompt, *, max_tokens: int, temperature: float = 0.0,
                    top_k: int = 0, top_p: float = 1.0, seed: int = 0, stop_token_ids=()) -> None:
        """Queue a request; it is scheduled from the next :meth:`step` on.

        ``request_id`` a str or int not used before in this engine; ``prompt`` a non-empty
        sequence of int token ids (or a 1-d integer tensor) in [0, vocab_size); ``max_tokens`` an
        int >= 1, with ``len(prompt) + max_tokens <= model.config.max_seq_len`` and the request's
        blocks (``ceil((len(prompt) + max_tokens - 1) / block_size)``: the last token is never fed)
        within ``num_blocks``; ``temperature`` a finite real >= 0 (0: greedy, ties to the lowest
        id); ``top_k`` an int >= 0 (0: off); ``top_p`` in (0, 1]; ``seed`` an int (the request's
        own generator: ``torch.Generator().manual_seed(seed)``); ``stop_token_ids`` a sequence of
        token ids in [0, vocab_size) (a generated one ends the request, reason "stop", and is
        returned). Bad input raises TypeError/ValueError naming the argument, and the engine is
        unchanged.
        """
        c = self.config
        if not (is_int(request_id) or isinstance(request_id, str)):
            raise TypeError(f"request_id must be a str or an int, got {type(request_id).__name__}")
        if request_id in self.requests:
            raise ValueError(f"request_id {request_id!r} is already in use")
        prompt = check_prompt(prompt, c.vocab_size)
        check_int("max_tokens", max_tokens, minimum=1)
        if len(prompt) + max_tokens > c.max_seq_len:
            raise ValueError(f"max_tokens: prompt ({len(prompt)}) + max_tokens ({max_tokens}) exceeds the "
                             f"model's max_seq_len={c.max_seq_len}")
        need = -(-(len(prompt) + max_tokens - 1) // self.block_size)
        if need > self.num_blocks:
            raise ValueError(f"max_tokens: prompt ({len(prompt)}) + max_tokens ({max_tokens}) needs {need} "
                             f"blocks, more than the pool's num_blocks={self.num_blocks}")
        check_real("temperature", temperature, minimum=0.0)
        check_int("top_k", top_k, minimum=0)
        if check_real("top_p", top_p, maximum=1.0) <= 0:
            raise ValueError(f"top_p must be in (0, 1], got {top_p}")
        check_int("seed", seed)
        if isinstance(stop_token_ids, (str, bytes)) or not isinstance(stop_token_ids, Sequence):
            raise TypeError(f"stop_token_ids must be a sequence of int token ids, got {stop_token_ids!r}")
        for t in stop_token_ids:
            check_int("stop_token_ids", t, minimum=0)
            if t >= c.vocab_size:
                raise ValueError(f"stop_token_ids: id {t} is outside [0, {c.vocab_size})")
        stopper = StopChecker(StopParams(max_tokens=max_tokens, stop_token_ids=tuple(stop_token_ids)),
                              [b""] * c.vocab_size)
        params = SamplingParams(temperature=float(temperature), top_k=top_k, top_p=float(top_p))
        self.scheduler.add_request(request_id, prompt, max_tokens)    # may still refuse: nothing changed
        self.requests[request_id] = Request(prompt, params, torch.Generator().manual_seed(seed), stopper)

    def has_unfinished_requests(self) -> bool:
        """True while any added request has not finished."""
        return any(not r.finished for r in self.requests.values())

    @property
    def outputs(self) -> dict:
        """request_id -> the list of tokens it generated so far (finished or not), in add order."""
        return {rid: list(r.output) for rid, r in self.requests.items()}

    # --- the loop ---------------------------------------------------------------------------
    @torch.no_grad()
    def step(self) -> list[RequestOutput]:
        """One iteration: schedule, one forward over every scheduled token, sample, stop (module
        doc). Returns the outputs of the requests that produced a token, in schedule order; an
        idle engine returns [] (and still counts the step)."""
        self.num_steps += 1
        plan = self.scheduler.schedule()
        self.last_schedule = dict(plan.num_scheduled_tokens)
        if not plan.num_scheduled_tokens:
            self.scheduler.update(plan, {}, ())
            return []
        ids, new_tokens, caches = [], [], []
        for rid, n in plan.num_scheduled_tokens.items():
            start = plan.num_computed_tokens[rid]              # > 0: earlier chunks, or a prefix hit
            new = self.requests[rid].tokens[start:start + n]   # after a preemption: prompt + output again
            ids.append(rid)
            new_tokens.append(torch.tensor(new, dtype=torch.long, device=self.k_pool.device))
            caches.append(PagedCacheView(self.k_pool, self.v_pool, plan.block_tables[rid], self.block_size, start))
        logits = forward_batch(self.model, new_tokens, caches)
        sampled, stopped, outputs = {}, [], []
        for rid, lg, cache in zip(ids, logits, caches):
            request = self.requests[rid]
            if cache.seq_len < len(request.tokens):        # a prompt chunk (or recompute) mid-way
                continue
            u = draw_uniforms(request.generator, 1, "cpu").to(lg.device)   # a host generator: any device
            token = int(sample(lg[-1:], request.params, uniforms=u)[0])
            request.output.append(token)
            sampled[rid] = token
            verdict = request.stopper.append(token)
            if verdict.finished:
                request.finished, request.finish_reason = True, verdict.reason
                stopped.append(rid)
            outputs.append(RequestOutput(rid, request.output[request.num_streamed:], request.finished,
                                         request.finish_reason))
            request.num_streamed = len(request.output)
        self.scheduler.update(plan, sampled, stopped)
        return outputs

    def generate(self, requests: Sequence[dict], arrivals: Sequence[int] | None = None) -> dict:
        """Run ``requests`` to completion and return ``{request_id: generated tokens}``.

        ``requests``: a sequence of dicts of :meth:`add_request`'s arguments (``request_id``,
        ``prompt``, ``max_tokens``, optionally the rest). ``arrivals[i]`` (an int >= 0; default
        all 0) is the step number at which request i is added: it is added just before this
        engine's step number ``arrivals[i]`` runs (steps count from 0 at construction; an idle
        engine keeps stepping until the next arrival). Requests arriving at the same step are
        added in ``requests`` order. A bad request raises as ``add_request`` does, when it
        arrives. ``arrivals`` not of ``requests``' length: ValueError naming ``arrivals``."""
        if isinstance(requests, (str, bytes, dict)) or not isinstance(requests, Sequence):
            raise TypeError(f"requests must be a sequence of dicts, got {type(requests).__name__}")
        arrivals = [0] * len(requests) if arrivals is None else list(arrivals)
        if len(arrivals) != len(requests):
            raise ValueError(f"arrivals has {len(arrivals)} entries for {len(requests)} requests")
        for a in arrivals:
            check_int("arrivals", a, minimum=0)
        pending = sorted(range(len(requests)), key=lambda i: (arrivals[i], i))
        while pending or self.has_unfinished_requests():
            while pending and arrivals[pending[0]] <= self.num_steps:
                self.add_request(**requests[pending.pop(0)])
            self.step()
        return {r["request_id"]: list(self.requests[r["request_id"]].output) for r in requests}
