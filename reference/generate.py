"""The generation loop: prefill + decode with a KV cache (course 01.02, 01.03, 03.01, 03.02).

    uncached (nanoGPT's ``generate``)            cached (what every engine does)
    for each new token:                          prefill: run the prompt once, filling the cache
        logits = model(all tokens so far)        for each new token:
        token  = sample(logits[:, -1])               token  = sample(last logits)
        append token                                 logits = model(token, cache)   # 1 position

Both compute the same function: at every step the logits of the next token given the prompt and
the tokens generated so far. The uncached loop recomputes the keys and values of the whole prefix
at each step (O(L^2) token-positions for L output tokens); the cached loop computes each position
once and stores its K/V (03.02: keys and values, never queries, because a past position's query is
never needed again). A short generation is dominated by the prefill both share, so caching only
pays off as the output grows (03.01).

Contract of the ``model`` argument (the reference :class:`reference.model.Transformer` has it):
``model.config.vocab_size`` and ``.max_seq_len``, ``model(tokens, cache=None) -> logits``
(batch, seq, vocab) with RoPE positions starting at the cache's length, and
``model.new_cache(batch, max_seq_len)``.

``sample_fn(logits, generator) -> tokens``: ``logits`` (batch, vocab) of one step, returns int
token ids (batch,). The default, :func:`greedy`, is argmax (the lowest id among exact ties, as
``torch.argmax``). The same ``generator`` is passed at every step, so a seeded sampler makes the
cached and uncached loops draw the same tokens.
"""
from __future__ import annotations

from typing import Callable

import torch

from reference._checks import check_int, check_tensor

__all__ = ["generate", "generate_uncached"]  # the contract: what an implementation must provide
__optional__ = []  # checked when an implementation provides them


def greedy(logits: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """argmax over the last dimension; exact ties go to the lowest token id."""
    return logits.argmax(dim=-1)


def check_generate_inputs(model, prompt_tokens, max_new_tokens, sample_fn, prefill_chunk_size=None):
    """Raise TypeError/ValueError naming the bad argument; return (batch, prompt_len)."""
    check_tensor("prompt_tokens", prompt_tokens, ndim=2, dims="batch, prompt_len")
    if prompt_tokens.dtype.is_floating_point or prompt_tokens.dtype.is_complex or prompt_tokens.dtype == torch.bool:
        raise TypeError(f"prompt_tokens must be an integer tensor, got {prompt_tokens.dtype}")
    batch, prompt_len = prompt_tokens.shape
    if batch == 0 or prompt_len == 0:
        raise ValueError(f"prompt_tokens must be non-empty (at least one token per row), got shape {tuple(prompt_tokens.shape)}")
    vocab = model.config.vocab_size
    lo, hi = int(prompt_tokens.min()), int(prompt_tokens.max())
    if lo < 0 or hi >= vocab:
        raise ValueError(f"prompt_tokens: ids must be in [0, {vocab}), got values in [{lo}, {hi}]")
    check_int("max_new_tokens", max_new_tokens, minimum=0)
    if prompt_len + max_new_tokens > model.config.max_seq_len:
        raise ValueError(f"max_new_tokens: prompt ({prompt_len}) + max_new_tokens ({max_new_tokens}) exceeds "
                         f"the model's max_seq_len={model.config.max_seq_len}")
    if sample_fn is not None and not callable(sample_fn):
        raise TypeError(f"sample_fn must be callable, got {type(sample_fn).__name__}")
    check_int("prefill_chunk_size", prefill_chunk_size, minimum=1, allow_none=True)
    return batch, prompt_len


def _sample(sample_fn, logits, generator, vocab):
    tokens = sample_fn(logits, generator)
    if not isinstance(tokens, torch.Tensor) or tokens.shape != logits.shape[:1] or tokens.dtype.is_floating_point:
        raise ValueError(f"sample_fn must return integer token ids of shape {tuple(logits.shape[:1])}, "
                         f"got {getattr(tokens, 'shape', tokens)!r}")
    if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= vocab):
        raise ValueError(f"sample_fn returned token ids outside [0, {vocab})")
    return tokens.to(torch.long)


def _empty(prompt_tokens, model, batch):
    logits = torch.empty(batch, 0, model.config.vocab_size, device=prompt_tokens.device,
                         dtype=next(iter(model.parameters())).dtype)
    return torch.empty(batch, 0, dtype=torch.long, device=prompt_tokens.device), logits


@torch.no_grad()
def generate(model, prompt_tokens: torch.Tensor, max_new_tokens: int, *,
             sample_fn: Callable | None = None, generator: torch.Generator | None = None,
             prefill_chunk_size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Prefill the prompt into a KV cache, then decode one token per step.

    Args:
        model: see the module doc (a :class:`reference.model.Transformer`).
        prompt_tokens: int (batch, prompt_len), prompt_len >= 1; not modified.
        max_new_tokens: >= 0; prompt_len + max_new_tokens must fit in ``model.config.max_seq_len``.
        sample_fn: ``(logits (batch, vocab), generator) -> (batch,)`` token ids; default (None)
            :func:`greedy`: argmax, exact ties to the lowest id.
        generator: passed to ``sample_fn`` at every step, as is; default None (``sample_fn``
            then receives None: no generator is made up).
        prefill_chunk_size: prefill the prompt in chunks of this many tokens (chunked prefill;
            the last chunk may be shorter, and a chunk longer than the prompt is one prefill);
            default None: the prompt in one forward. An int >= 1.

    Returns:
        ``(tokens, logits)``: the generated tokens, int64 (batch, max_new_tokens) (the prompt is
        not included), and ``logits`` (batch, max_new_tokens, vocab) in the model's dtype, where
        ``logits[:, t]`` is the distribution token ``t`` was sampled from.

    Raises ValueError/TypeError naming the argument for malformed input: ``prompt_tokens`` not a
    2-d integer tensor, with no row or no column, or ids outside ``[0, vocab_size)``;
    ``max_new_tokens`` not an int >= 0, or prompt_len + max_new_tokens > ``max_seq_len`` (equal
    is legal: the last generated token is returned, never fed); ``sample_fn`` not callable, or
    returning anything but integer ids of shape (batch,) in the vocabulary; ``prefill_chunk_size``
    not None or an int >= 1.
    """
    batch, prompt_len = check_generate_inputs(model, prompt_tokens, max_new_tokens, sample_fn, prefill_chunk_size)
    if max_new_tokens == 0:
        return _empty(prompt_tokens, model, batch)
    sample_fn = sample_fn or greedy
    vocab = model.config.vocab_size
    cache = model.new_cache(batch, prompt_len + max_new_tokens - 1)   # the last token is never fed
    chunk = prefill_chunk_size or prompt_len
    for start in range(0, prompt_len, chunk):                          # prefill
        logits = model(prompt_tokens[:, start:start + chunk], cache=cache)
    step_logits = logits[:, -1]
    tokens, all_logits = [], []
    for step in range(max_new_tokens):                                 # decode
        token = _sample(sample_fn, step_logits, generator, vocab)
        tokens.append(token)
        all_logits.append(step_logits)
        if step + 1 < max_new_tokens:
            step_logits = model(token[:, None], cache=cache)[:, -1]
    return torch.stack(tokens, dim=1), torch.stack(all_logits, dim=1)


@torch.no_grad()
def generate_uncached(model, prompt_tokens: torch.Tensor, max_new_tokens: int, *,
                      sample_fn: Callable | None = None, generator: torch.Generator | None = None,
                      prefill_chunk_size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The same function as :func:`generate` without a cache: every step runs the model over the
    whole sequence so far (prompt + generated tokens) and keeps the last position's logits.
    Same arguments and return; ``prefill_chunk_size`` is validated but has no effect (there is
    no cache to fill in chunks), so the two loops are interchangeable."""
    batch, prompt_len = check_generate_inputs(model, prompt_tokens, max_new_tokens, sample_fn, prefill_chunk_size)
    if max_new_tokens == 0:
        return _empty(prompt_tokens, model, batch)
    sample_fn = sample_fn or greedy
    sequence = prompt_tokens
    tokens, all_logits = [], []
    for _ in range(max_new_tokens):
        step_logits = model(sequence)[:, -1]
        token = _sample(sample_fn, step_logits, generator, model.config.vocab_size)
        tokens.append(token)
        all_logits.append(step_logits)
        sequence = torch.cat([sequence, token[:, None].to(sequence.dtype)], dim=1)
    return torch.stack(tokens, dim=1), torch.stack(all_logits, dim=1)
