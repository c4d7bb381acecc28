"""Static and continuous (iteration-level) batching (course 04.01-04.03; chapter 4).

Decoding is memory-bound: one decode step of one request reads every weight to multiply a single
row. Batching B requests reads the weights once for B rows, so throughput grows almost linearly
in B until the step becomes compute-bound (04.01). How the batch is formed is the whole question:

    static batching      B requests start together and the batch runs until the LONGEST is
                         done: a request that stops early keeps its slot, idle, until then.
    continuous batching  (Orca's iteration-level scheduling, 04.02) the batch is re-formed at
                         EVERY step: a finished request leaves at once and a waiting one takes
                         its slot; a new request's prefill rides in the same forward pass as the
                         others' decodes, so the batch is ragged (04.03).

The idle fraction of static batching. A static batch of B requests with output lengths
L_1..L_B runs max L steps on B slots, of which sum L are useful, so the fraction of slots wasted is

    idle(L_1..L_B) = 1 - sum_i L_i / (B * max_i L_i),

and over many batches of iid lengths (ratio of expectations, the long-run fraction)

    idle_B = 1 - E[L] / E[max(L_1..L_B)],   E[max] = sum_{k>=1} (1 - F(k-1)^B).

Closed forms (:func:`expected_idle_fraction`, exact ``Fraction``s):
    constant c       E[max] = c: idle 0 (static batching wastes nothing when lengths are equal);
    uniform {1..n}   E[L] = (n+1)/2, E[max] = n - sum_{j=0}^{n-1} (j/n)^B;
    geometric(p)     P(L >= k) = q^(k-1), q = 1-p: E[L] = 1/p and, by inclusion-exclusion over
                     which of the B exceed k,  E[max] = sum_{j=1}^{B} (-1)^(j+1) C(B,j) / (1 - q^j).

Forward pass of a ragged batch (:func:`forward_batch`): the requests' new tokens (a prefill of
many tokens, a decode of one) are concatenated into ONE (1, total, dim) activation for every
linear layer and norm (that is what batching buys, and where the batch composition can change the
bits of a row: a GEMM's reduction order may depend on its M), while RoPE positions and attention
are per request: request i's tokens sit at positions ``caches[i].seq_len ...`` and attend
causally (bottom-right aligned) to its own cache only. So every request's logits equal its logits
run alone -- bit for bit when the kernels are batch-invariant (``reference.batch_invariant``'s
``invariant_mode()``), within the tolerance rule otherwise.

Requests (:class:`Request`): a prompt, ``max_new_tokens`` (the request stops after exactly that
many; there is no EOS here), an ``arrival`` step, and greedy decoding (``temperature`` 0) or
seeded sampling with the request's own ``torch.Generator(seed)``, so a request's draws never
depend on the other requests in its batch.

Choices the law leaves open:
- FCFS order is (arrival, index in the list): among requests arriving at the same step the earlier
  in the list is admitted (or batched) first; ``timeline[t]`` lists the requests holding a slot at
  step t in admission order.
- Static batching forms batches of ``batch_size`` consecutive requests in FCFS order and starts a
  batch when the previous batch has ended and all its requests have arrived; prompts are
  left-padded with token 0 (the padding is masked out of attention, never attended).
- A sampled token is ``torch.multinomial(softmax(logits / temperature) in float64, 1, generator)``
  with one generator per request seeded by its ``seed``; greedy is argmax (ties to the lowest id).
- ``simulate_idle_fraction`` draws its lengths with ``torch`` from the given generator: uniform by
  ``torch.randint``, geometric by inversion of float64 uniforms.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from fractions import Fraction

import torch

from reference._checks import check_int, check_real, is_int
from reference.attention import attention as reference_attention
from reference.model import apply_rope, rope_cos_sin

__all__ = ["forward_batch", "run_alone", "run_static", "run_continuous", "schedule_static", "schedule_continuous", "idle_fraction",
           "mean_length", "expected_max_length", "expected_idle_fraction", "simulate_idle_fraction"]  # the contract
__optional__ = []  # checked when an implementation provides them


# --- requests and results -----------------------------------------------------------------------
@dataclass(frozen=True)
class Request:
    """One request: ``prompt`` (a non-empty sequence of int token ids >= 0), ``max_new_tokens``
    (int >= 1: it produces exactly that many tokens), ``arrival`` (int >= 0: the first step at which
    it may be scheduled), ``temperature`` (real >= 0; 0 = greedy) and ``seed`` (int: its own
    generator's seed, used only when temperature > 0). Bad values raise TypeError/ValueError
    naming the field (token ids above the vocabulary are checked by the run that gets the model)."""

    prompt: tuple = ()
    max_new_tokens: int = 1
    arrival: int = 0
    temperature: float = 0.0
    seed: int = 0

    def __post_init__(self):
        if isinstance(self.prompt, torch.Tensor):
            if self.prompt.dim() != 1 or self.prompt.dtype.is_floating_point or self.prompt.dtype.is_complex \
                    or self.prompt.dtype == torch.bool:
                raise TypeError(f"prompt must be a 1-d integer tensor or a sequence of ints, got {self.prompt!r}")
            object.__setattr__(self, "prompt", tuple(int(t) for t in self.prompt.tolist()))
        if isinstance(self.prompt, (str, bytes)) or not hasattr(self.prompt, "__iter__"):
            raise TypeError(f"prompt must be a sequence of ints, got {type(self.prompt).__name__}")
        prompt = tuple(self.prompt)
        if not prompt:
            raise ValueError("prompt must hold at least one token")
        for t in prompt:
            if not is_int(t):
                raise TypeError(f"prompt must hold ints, got {t!r}")
            if t < 0:
                raise ValueError(f"prompt: token ids must be >= 0, got {t}")
        object.__setattr__(self, "prompt", tuple(int(t) for t in prompt))
        check_int("max_new_tokens", self.max_new_tokens, minimum=1)
        check_int("arrival", self.arrival, minimum=0)
        check_real("temperature", self.temperature, minimum=0)
        check_int("seed", self.seed)


@dataclass
class BatchRun:
    """What a run returns. ``tokens[i]``: request i's generated token ids (a list of
    ``max_new_tokens`` ints); ``logits[i]``: the (max_new_tokens, vocab) logits each of them was
    picked from; ``timeline[t]``: the indices of the requests holding a slot at step t (in
    admission order; empty where no request holds one); ``start[i]``/``finish[i]``: the step of
    request i's prefill and the step after its last token."""

    tokens: list = field(default_factory=list)
    logits: list = field(default_factory=list)
    timeline: list = field(default_factory=list)
    start: list = field(default_factory=list)
    finish: list = field(default_factory=list)


# --- one forward pass of a ragged batch ---------------------------------------------------------
def _check_batch(model, tokens_list, caches) -> list[int]:
    """Validate forward_batch's arguments; return each request's first new position."""
    vocab, max_len = model.config.vocab_size, model.config.max_seq_len
    if not isinstance(tokens_list, (list, tuple)):
        raise TypeError(f"tokens_list must be a list of 1-d integer tensors, got {type(tokens_list).__name__}")
    if not isinstance(caches, (list, tuple)):
        raise TypeError(f"caches must be a list of KV caches, got {type(caches).__name__}")
    if len(caches) != len(tokens_list):
        raise ValueError(f"caches: {len(caches)} caches for {len(tokens_list)} requests in tokens_list")
    if len({id(c) for c in caches}) != len(caches):
        raise ValueError("caches: the same cache object appears twice (each request needs its own)")
    starts = []
    for i, (t, cache) in enumerate(zip(tokens_list, caches)):
        if not isinstance(t, torch.Tensor) or t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool:
            raise TypeError(f"tokens_list[{i}] must be an integer torch.Tensor, got {getattr(t, 'dtype', type(t).__name__)}")
        if t.dim() != 1 or t.numel() == 0:
            raise ValueError(f"tokens_list[{i}] must be a non-empty 1-d tensor, got shape {tuple(t.shape)}")
        lo, hi = int(t.min()), int(t.max())
        if lo < 0 or hi >= vocab:
            raise ValueError(f"tokens_list[{i}]: ids must be in [0, {vocab}), got values in [{lo}, {hi}]")
        if not callable(getattr(cache, "append", None)) or not is_int(getattr(cache, "seq_len", None)):
            raise TypeError(f"caches[{i}] must have append(layer, k, v) and an int seq_len, got {type(cache).__name__}")
        k = getattr(cache, "k", None)
        c = model.config
        if isinstance(k, torch.Tensor) and k.dim() == 5 and (k.shape[0], k.shape[1], k.shape[2], k.shape[4]) != (
                c.n_layers, 1, c.n_kv_heads, c.head_dim):
            raise ValueError(f"caches[{i}]: (layers, batch, kv_heads, head_dim) = "
                             f"{(k.shape[0], k.shape[1], k.shape[2], k.shape[4])}, expected "
                             f"{(c.n_layers, 1, c.n_kv_heads, c.head_dim)}")
        if cache.seq_len + t.numel() > max_len:
            raise ValueError(f"caches[{i}]: {t.numel()} new tokens after {cache.seq_len} cached exceed "
                             f"max_seq_len={max_len}")
        starts.append(cache.seq_len)
    return starts


def _rope_tables(model, positions: list) -> tuple:
    """RoPE's cos/sin tables for each request's positions, computed request by request (as the
    request alone computes them: a vectorised cos may round an element differently by where it
    falls in the vector) and concatenated along the sequence."""
    c = model.config
    tables = [rope_cos_sin(p, c.head_dim, c.rope_theta, model.dtype) for p in positions]
    return torch.cat([t[0] for t in tables]), torch.cat([t[1] for t in tables])


def _ragged_attention(attn, x, cos, sin, caches, lengths, layer, attention_fn):
    """One layer's self-attention over the concatenated batch x (1, total, dim): the projections
    on all rows at once, then RoPE and attention request by request against its own cache."""
    total = x.shape[1]
    q = attn.q_proj(x).view(1, total, attn.n_heads, attn.head_dim).transpose(1, 2)
    k = attn.k_proj(x).view(1, total, attn.n_kv_heads, attn.head_dim).transpose(1, 2)
    v = attn.v_proj(x).view(1, total, attn.n_kv_heads, attn.head_dim).transpose(1, 2)
    q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    outs, a = [], 0
    for cache, n in zip(caches, lengths):
        kk, vv = cache.append(layer, k[:, :, a:a + n], v[:, :, a:a + n])
        outs.append(attention_fn(q[:, :, a:a + n], kk, vv, causal=True, window=None, scale=None))
        a += n
    out = torch.cat(outs, dim=2)
    return attn.o_proj(out.transpose(1, 2).reshape(1, total, attn.n_heads * attn.head_dim))


@torch.no_grad()
def forward_batch(model, tokens_list, caches) -> list:
    """One forward pass of ``model`` (the reference ``Transformer``: its weights, norms, RoPE and
    attention callable) over a ragged batch. ``tokens_list[i]``: request i's new tokens, a
    non-empty 1-d integer tensor (a whole prompt, a chunk of one, or one decode token);
    ``caches[i]``: its own KV cache, any object with KVCache's interface (``append(layer, k, v)``
    with k/v (1, kv_heads, n, head_dim) returning all cached K/V of that layer, and ``seq_len``);
    the new K/V are appended to it. Returns a list of logits tensors (n_i, vocab_size) in the
    model's dtype.

    All requests' tokens form one (1, total, dim) activation for every linear layer and norm;
    request i's RoPE positions start at ``caches[i].seq_len`` and it attends causally (bottom-right
    aligned) to its own cache only. Each request's logits equal ``model(tokens[None], cache)`` of
    that request alone (tolerance rule; bit for bit under a batch-invariant mode).

    An empty ``tokens_list`` (with empty ``caches``) returns ``[]``. Bad input raises before any
    cache changes: TypeError/ValueError naming ``tokens_list`` (not a list; an entry not a
    non-empty 1-d integer tensor; ids outside [0, vocab_size)) or ``caches`` (not a list; another
    length; the same object twice; an entry without append/seq_len; a KVCache of another shape or
    batch != 1; seq_len + n_i > max_seq_len).
    """
    starts = _check_batch(model, tokens_list, caches)
    if not tokens_list:
        return []
    lengths = [t.numel() for t in tokens_list]
    device = model.model.embed_tokens.weight.device
    tokens = torch.cat([t.to(device=device, dtype=torch.long) for t in tokens_list])[None]
    cos, sin = _rope_tables(model, [torch.arange(s, s + n, device=device) for s, n in zip(starts, lengths)])
    attention_fn = getattr(model, "attention_fn", None) or reference_attention
    h = model.model.embed_tokens(tokens)
    for i, layer in enumerate(model.model.layers):
        h = h + _ragged_attention(layer.self_attn, layer.input_layernorm(h), cos, sin, caches, lengths, i,
                                  attention_fn)
        h = h + layer.mlp(layer.post_attention_layernorm(h))
    logits = model.lm_head(model.model.norm(h))[0]
    return list(logits.split(lengths))


# --- the schedules (bookkeeping only: which request holds a slot at each step) -------------------
def _check_pattern(arrivals, lengths) -> tuple[list[int], list[int]]:
    if not isinstance(arrivals, (list, tuple)) or not isinstance(lengths, (list, tuple)):
        raise TypeError(f"arrivals and lengths must be lists of ints, got {type(arrivals).__name__} "
                        f"and {type(lengths).__name__}")
    if len(arrivals) != len(lengths):
        raise ValueError(f"arrivals ({len(arrivals)}) and lengths ({len(lengths)}) differ in length")
    for a in arrivals:
        check_int("arrivals", a, minimum=0)
    for n in lengths:
        check_int("lengths", n, minimum=1)
    return list(arrivals), list(lengths)


def fcfs_order(arrivals) -> list[int]:
    """Request indices in first-come-first-served order: by arrival, then by index."""
    return sorted(range(len(arrivals)), key=lambda i: (arrivals[i], i))


def schedule_static(arrivals, lengths, batch_size: int) -> list[tuple]:
    """Static batching's timeline: ``timeline[t]`` = the requests holding a slot at step t.
    Batches are ``batch_size`` consecutive requests in FCFS order (the last may be smaller); a
    batch starts when the previous one has ended and all its requests have arrived, and holds all
    its slots for max L steps of its members (a request that finished early keeps its slot, idle).
    Steps where no batch runs are empty tuples. ``arrivals`` ints >= 0 and ``lengths`` ints >= 1 of
    one length, ``batch_size`` an int >= 1 (TypeError/ValueError naming them). With every arrival
    0 the number of steps is sum over batches of max L."""
    arrivals, lengths = _check_pattern(arrivals, lengths)
    check_int("batch_size", batch_size, minimum=1)
    order, timeline = fcfs_order(arrivals), []
    for b in range(0, len(order), batch_size):
        batch = tuple(order[b:b + batch_size])
        begin = max(len(timeline), max(arrivals[i] for i in batch))
        timeline.extend([()] * (begin - len(timeline)))
        timeline.extend([batch] * max(lengths[i] for i in batch))
    return timeline


def schedule_continuous(arrivals, lengths, max_batch: int) -> list[tuple]:
    """Continuous (iteration-level) batching's timeline: ``timeline[t]`` = the requests that run
    at step t. At every step, first the requests that finished at the previous step leave, then
    waiting requests that have arrived (arrival <= t) are admitted in FCFS order while fewer than
    ``max_batch`` run; every running request produces one token per step (its prefill step
    produces the first), so request i runs exactly ``lengths[i]`` consecutive steps. Steps where
    none runs are empty tuples. Arguments as :func:`schedule_static` (``max_batch`` int >= 1)."""
    arrivals, lengths = _check_pattern(arrivals, lengths)
    check_int("max_batch", max_batch, minimum=1)
    waiting, running, left, timeline = deque(fcfs_order(arrivals)), [], list(lengths), []
    while waiting or running:
        t = len(timeline)
        while waiting and len(running) < max_batch and arrivals[waiting[0]] <= t:
            running.append(waiting.popleft())
        timeline.append(tuple(running))
        for i in running:
            left[i] -= 1
        running = [i for i in running if left[i] > 0]
    return timeline


# --- runs on the model ----------------------------------------------------------------------------
def _check_request(model, r, name: str):
    """A Request that fits the model, else TypeError/ValueError naming ``name``."""
    c = model.config
    if not all(hasattr(r, a) for a in ("prompt", "max_new_tokens", "arrival", "temperature", "seed")):
        raise TypeError(f"{name} must be a Request, got {type(r).__name__}")
    if max(r.prompt) >= c.vocab_size:
        raise ValueError(f"{name}: prompt ids must be < vocab_size={c.vocab_size}, got {max(r.prompt)}")
    if len(r.prompt) + r.max_new_tokens > c.max_seq_len:
        raise ValueError(f"{name}: prompt ({len(r.prompt)}) + max_new_tokens ({r.max_new_tokens}) "
                         f"exceeds max_seq_len={c.max_seq_len}")
    return r


def _check_run(model, requests) -> list:
    if not isinstance(requests, (list, tuple)):
        raise TypeError(f"requests must be a non-empty list of Request, got {type(requests).__name__}")
    if not requests:
        raise ValueError("requests must be a non-empty list of Request, got an empty one")
    return [_check_request(model, r, f"requests ({i})") for i, r in enumerate(requests)]


def _pick(logits: torch.Tensor, request, generator) -> int:
    """The next token of ``request`` from its logits (vocab,): argmax at temperature 0, else a draw
    from softmax(logits / temperature) with the request's own generator."""
    if request.temperature == 0:
        return int(logits.argmax())
    probs = torch.softmax(logits.double().cpu() / request.temperature, dim=-1)
    return int(torch.multinomial(probs, 1, generator=generator))


def _generators(requests) -> list:
    return [torch.Generator().manual_seed(r.seed) for r in requests]


def _result(requests, timeline, tokens, logits) -> BatchRun:
    start = [min(t for t, step in enumerate(timeline) if i in step) for i in range(len(requests))]
    finish = [max(t for t, step in enumerate(timeline) if i in step) + 1 for i in range(len(requests))]
    return BatchRun(tokens=tokens, logits=[torch.stack(x) for x in logits], timeline=timeline,
                    start=start, finish=finish)


@torch.no_grad()
def run_alone(model, request) -> BatchRun:
    """``request`` run by itself (arrival ignored: it starts at step 0): a prefill of its prompt,
    then one decode step per token, on a fresh KV cache. The oracle of the batched runs.
    TypeError/ValueError naming ``request`` (not a Request; a prompt id >= vocab_size; prompt +
    max_new_tokens > max_seq_len)."""
    request = _check_request(model, request, "request")
    cache, g = model.new_cache(1), _generators([request])[0]
    device = model.model.embed_tokens.weight.device
    new = torch.tensor(request.prompt, dtype=torch.long, device=device)
    tokens, logits = [], []
    for _ in range(request.max_new_tokens):
        last = model(new[None], cache)[0, -1]
        logits.append(last)
        tokens.append(_pick(last, request, g))
        new = torch.tensor([tokens[-1]], dtype=torch.long, device=device)
    return _result([request], [(0,)] * request.max_new_tokens, [tokens], [logits])


@torch.no_grad()
def run_continuous(model, requests, max_batch: int) -> BatchRun:
    """Continuous batching of ``requests`` (a non-empty list of :class:`Request`) with at most
    ``max_batch`` running at once, on the schedule of :func:`schedule_continuous` for their
    arrivals and ``max_new_tokens``: at each step one :func:`forward_batch` runs the newly admitted
    requests' prompts and the others' last tokens together, and each request picks its next token.
    Every request's tokens equal :func:`run_alone`'s. Bad input: TypeError/ValueError naming
    ``requests`` (not a non-empty list of Request; a prompt id >= vocab_size; prompt +
    max_new_tokens > max_seq_len) or ``max_batch``."""
    requests = _check_run(model, requests)
    timeline = schedule_continuous([r.arrival for r in requests], [r.max_new_tokens for r in requests], max_batch)
    device = model.model.embed_tokens.weight.device
    caches = [model.new_cache(1) for _ in requests]
    gens = _generators(requests)
    tokens, logits = [[] for _ in requests], [[] for _ in requests]
    for step in timeline:
        if not step:
            continue
        new = [torch.tensor(requests[i].prompt if not tokens[i] else tokens[i][-1:], dtype=torch.long, device=device)
               for i in step]
        out = forward_batch(model, new, [caches[i] for i in step])
        for i, lg in zip(step, out):
            logits[i].append(lg[-1])
            tokens[i].append(_pick(lg[-1], requests[i], gens[i]))
    return _result(requests, timeline, tokens, logits)


def _pad_rows(table, firsts, n, fill) -> torch.Tensor:
    """Per-row tables (rows concatenated, row b holding n - firsts[b] entries) as (B, 1, n, D),
    left-filled with ``fill``."""
    rows, a = [], 0
    for f in firsts:
        row = table[a:a + n - f]
        rows.append(torch.cat([row.new_full((f, table.shape[1]), fill), row]))
        a += n - f
    return torch.stack(rows)[:, None]


def _forward_padded(model, tokens, cache, pads) -> torch.Tensor:
    """The model on a left-padded rectangular batch ``tokens`` (B, n) with a shared KV cache of
    batch B: row b's first ``pads[b]`` cache positions are padding. Row b's RoPE positions count
    from its first real token, and its real queries attend only to its real keys (padding never
    attended; padded query rows give 0 before o_proj). Returns logits (B, n, vocab)."""
    c, start = model.config, cache.seq_len
    batch, n = tokens.shape
    firsts = [max(0, p - start) for p in pads]                 # each row's first real query
    cos, sin = _rope_tables(model, [torch.arange(start + f - p, start + n - p, device=tokens.device)
                                    for f, p in zip(firsts, pads)])
    cos, sin = _pad_rows(cos, firsts, n, 1.0), _pad_rows(sin, firsts, n, 0.0)  # identity on padding
    attention_fn = getattr(model, "attention_fn", None) or reference_attention
    h = model.model.embed_tokens(tokens)
    for layer_index, layer in enumerate(model.model.layers):
        attn, x = layer.self_attn, layer.input_layernorm(h)
        q = attn.q_proj(x).view(batch, n, attn.n_heads, attn.head_dim).transpose(1, 2)
        k = attn.k_proj(x).view(batch, n, attn.n_kv_heads, attn.head_dim).transpose(1, 2)
        v = attn.v_proj(x).view(batch, n, attn.n_kv_heads, attn.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        kk, vv = cache.append(layer_index, k, v)
        out = torch.zeros_like(q)
        for b, (p, first) in enumerate(zip(pads, firsts)):
            if first < n:
                out[b:b + 1, :, first:] = attention_fn(q[b:b + 1, :, first:], kk[b:b + 1, :, p:], vv[b:b + 1, :, p:],
                                                      causal=True, window=None, scale=None)
        h = h + attn.o_proj(out.transpose(1, 2).reshape(batch, n, attn.n_heads * attn.head_dim))
        h = h + layer.mlp(layer.post_attention_layernorm(h))
    return model.lm_head(model.model.norm(h))


@torch.no_grad()
def run_static(model, requests, batch_size: int) -> BatchRun:
    """Static batching of ``requests`` in batches of ``batch_size`` on the schedule of
    :func:`schedule_static`: each batch is one rectangular forward per step over a shared KV cache,
    prompts left-padded with token 0 to the batch's longest; a request that finished keeps its
    slot (its row runs on, its outputs discarded) until the batch's longest is done. Every
    request's tokens equal :func:`run_alone`'s (padding must not leak into real tokens). Bad input
    as :func:`run_continuous` (``batch_size`` int >= 1)."""
    requests = _check_run(model, requests)
    timeline = schedule_static([r.arrival for r in requests], [r.max_new_tokens for r in requests], batch_size)
    device = model.model.embed_tokens.weight.device
    gens = _generators(requests)
    tokens, logits = [[] for _ in requests], [[] for _ in requests]
    t = 0
    while t < len(timeline):
        batch = timeline[t]
        if not batch:
            t += 1
            continue
        steps = max(requests[i].max_new_tokens for i in batch)
        width = max(len(requests[i].prompt) for i in batch)
        pads = [width - len(requests[i].prompt) for i in batch]
        cache = model.new_cache(len(batch), width + steps)
        new = torch.tensor([[0] * p + list(requests[i].prompt) for p, i in zip(pads, batch)], device=device)
        for _ in range(steps):
            last = _forward_padded(model, new, cache, pads)[:, -1]
            picked = []
            for row, i in enumerate(batch):
                if len(tokens[i]) < requests[i].max_new_tokens:
                    logits[i].append(last[row])
                    tokens[i].append(_pick(last[row], requests[i], gens[i]))
                picked.append(tokens[i][-1])
            new = torch.tensor(picked, device=device)[:, None]
        t += steps
    return _result(requests, timeline, tokens, logits)


# --- the idle fraction of static batching ----------------------------------------------------------
def idle_fraction(lengths) -> Fraction:
    """The fraction of slots a static batch wastes: 1 - sum L / (B * max L) for the output lengths
    ``lengths`` (a non-empty list of ints >= 1; TypeError/ValueError naming ``lengths``), exact."""
    if not isinstance(lengths, (list, tuple)) or not lengths:
        raise (TypeError if not isinstance(lengths, (list, tuple)) else ValueError)(
            f"lengths must be a non-empty list of ints, got {lengths!r}")
    for n in lengths:
        check_int("lengths", n, minimum=1)
    return 1 - Fraction(sum(lengths), len(lengths) * max(lengths))


@dataclass(frozen=True)
class LengthDistribution:
    """A distribution of output lengths on {1, 2, ...}: ``kind`` "constant" (``param`` c, an int
    >= 1), "uniform" (on {1..n}, ``param`` n an int >= 1) or "geometric" (stop probability
    ``param`` p in (0, 1], a Fraction, int or float -- a float is taken at its exact binary value:
    P(L = k) = (1-p)^(k-1) p). Bad values raise TypeError/ValueError naming ``kind``/``param``."""

    kind: str
    param: object

    def __post_init__(self):
        if self.kind not in ("constant", "uniform", "geometric"):
            raise ValueError(f"kind must be 'constant', 'uniform' or 'geometric', got {self.kind!r}")
        if self.kind == "geometric":
            if isinstance(self.param, bool) or not isinstance(self.param, (int, float, Fraction)):
                raise TypeError(f"param must be a probability (Fraction, int or float), got {self.param!r}")
            if isinstance(self.param, float) and not math.isfinite(self.param):
                raise ValueError(f"param must be finite, got {self.param}")
            p = Fraction(self.param)
            if not 0 < p <= 1:
                raise ValueError(f"param (stop probability p) must be in (0, 1], got {self.param}")
        else:
            check_int("param", self.param, minimum=1)


def _check_distribution(distribution):
    if not all(hasattr(distribution, a) for a in ("kind", "param")) or distribution.kind not in (
            "constant", "uniform", "geometric"):
        raise TypeError(f"distribution must be a LengthDistribution, got {distribution!r}")
    return distribution


def mean_length(distribution: LengthDistribution) -> Fraction:
    """E[L] of ``distribution``, exact: c, (n+1)/2 or 1/p. TypeError naming ``distribution`` if it
    is not a LengthDistribution."""
    d = _check_distribution(distribution)
    if d.kind == "constant":
        return Fraction(d.param)
    if d.kind == "uniform":
        return Fraction(d.param + 1, 2)
    return 1 / Fraction(d.param)


def expected_max_length(distribution: LengthDistribution, batch_size: int) -> Fraction:
    """E[max(L_1..L_B)] of ``batch_size`` iid lengths of ``distribution``, exact (module doc):
    c; n - sum_{j<n} (j/n)^B; sum_{j=1}^{B} (-1)^(j+1) C(B,j) / (1 - (1-p)^j). TypeError/ValueError
    naming ``distribution`` or ``batch_size`` (an int >= 1)."""
    d = _check_distribution(distribution)
    b = check_int("batch_size", batch_size, minimum=1)
    if d.kind == "constant":
        return Fraction(d.param)
    if d.kind == "uniform":
        n = d.param
        return n - sum(Fraction(j, n) ** b for j in range(n))
    q = 1 - Fraction(d.param)
    return sum((-1) ** (j + 1) * math.comb(b, j) / (1 - q ** j) for j in range(1, b + 1))


def _sample_lengths(d: LengthDistribution, size: int, generator: torch.Generator) -> torch.Tensor:
    """``size`` iid lengths (int64) drawn with ``generator``: uniform by ``torch.randint``,
    geometric by inversion, floor(log(U) / log(1-p)) + 1 with U uniform in (0, 1] float64."""
    if d.kind == "constant":
        return torch.full((size,), d.param, dtype=torch.long)
    if d.kind == "uniform":
        return torch.randint(1, d.param + 1, (size,), generator=generator)
    p = float(d.param)
    if p == 1.0:
        return torch.ones(size, dtype=torch.long)
    u = 1.0 - torch.rand(size, dtype=torch.float64, generator=generator)        # (0, 1]
    return (torch.log(u) / math.log1p(-p)).floor().long() + 1


def expected_idle_fraction(distribution: LengthDistribution, batch_size: int) -> Fraction:
    """The long-run idle slot fraction of static batching with ``batch_size`` iid lengths of
    ``distribution``: 1 - E[L] / E[max(L_1..L_B)], exact (0 for constant lengths and for B = 1).
    TypeError/ValueError naming ``distribution`` (not a LengthDistribution) or ``batch_size``."""
    return 1 - mean_length(distribution) / expected_max_length(distribution, batch_size)


def simulate_idle_fraction(distribution: LengthDistribution, batch_size: int, num_batches: int,
                           generator: torch.Generator) -> float:
    """The idle fraction measured over ``num_batches`` simulated static batches of ``batch_size``
    lengths drawn from ``distribution`` with ``generator``: 1 - sum of all L / (B * sum of each
    batch's max L). Converges to :func:`expected_idle_fraction` as num_batches grows.
    TypeError/ValueError naming the bad argument (``generator`` must be a torch.Generator)."""
    _check_distribution(distribution)
    check_int("batch_size", batch_size, minimum=1)
    check_int("num_batches", num_batches, minimum=1)
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    lengths = _sample_lengths(distribution, num_batches * batch_size, generator).view(num_batches, batch_size)
    useful = int(lengths.sum())
    held = batch_size * int(lengths.max(dim=1).values.sum())
    return 1.0 - useful / held
