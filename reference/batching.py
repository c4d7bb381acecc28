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

__all__ = ["Request", "BatchRun", "LengthDistribution", "forward_batch", "run_alone", "run_static",
           "run_continuous", "schedule_static", "schedule_continuous", "idle_fraction",
           "expected_idle_fraction", "simulate_idle_fraction"]  # the contract
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
    positions = torch.cat([torch.arange(s, s + n, device=device) for s, n in zip(starts, lengths)])
    cos, sin = rope_cos_sin(positions, model.config.head_dim, model.config.rope_theta, model.dtype)
    attention_fn = getattr(model, "attention_fn", None) or reference_attention
    h = model.model.embed_tokens(tokens)
    for i, layer in enumerate(model.model.layers):
        h = h + _ragged_attention(layer.self_attn, layer.input_layernorm(h), cos, sin, caches, lengths, i,
                                  attention_fn)
        h = h + layer.mlp(layer.post_attention_layernorm(h))
    logits = model.lm_head(model.model.norm(h))[0]
    return list(logits.split(lengths))
