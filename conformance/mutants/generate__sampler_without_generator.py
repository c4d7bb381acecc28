"""The loop calls ``sample_fn(logits, None)``: the caller's seeded generator never reaches the
sampler, which then draws from the global RNG -- greedy output is unaffected, seeded sampling is
no longer reproducible."""
import torch

from reference import generate as _ref

TARGET = "generate"


def generate(model, prompt_tokens, max_new_tokens, *, sample_fn=None, generator=None, prefill_chunk_size=None):
    fn = None if sample_fn is None else (lambda logits, _generator: sample_fn(logits, None))
    return _ref.generate(model, prompt_tokens, max_new_tokens, sample_fn=fn, generator=generator,
                         prefill_chunk_size=prefill_chunk_size)


def generate_uncached(model, prompt_tokens, max_new_tokens, *, sample_fn=None, generator=None, prefill_chunk_size=None):
    fn = None if sample_fn is None else (lambda logits, _generator: sample_fn(logits, None))
    return _ref.generate_uncached(model, prompt_tokens, max_new_tokens, sample_fn=fn, generator=generator,
                                  prefill_chunk_size=prefill_chunk_size)
