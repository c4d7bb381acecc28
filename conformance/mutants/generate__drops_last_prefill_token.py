"""Prefill stops one token short (``prompt[:, :-1]``, as engines that "decode the last prompt
token" do) but then samples from the prefill's last logits as if the whole prompt had been seen:
the last prompt token never enters the cache or the first prediction."""
import torch

from reference.generate import _sample, check_generate_inputs, generate_uncached, greedy  # noqa: F401

TARGET = "generate"


@torch.no_grad()
def generate(model, prompt_tokens, max_new_tokens, *, sample_fn=None, generator=None, prefill_chunk_size=None):
    batch, prompt_len = check_generate_inputs(model, prompt_tokens, max_new_tokens, sample_fn, prefill_chunk_size)
    if max_new_tokens == 0:
        return generate_uncached(model, prompt_tokens, 0)
    sample_fn = sample_fn or greedy
    cache = model.new_cache(batch, prompt_len + max_new_tokens - 1)
    prefill = prompt_tokens[:, :-1] if prompt_len > 1 else prompt_tokens     # BUG
    chunk = prefill_chunk_size or prefill.shape[1]
    for start in range(0, prefill.shape[1], chunk):
        logits = model(prefill[:, start:start + chunk], cache=cache)
    step_logits = logits[:, -1]
    tokens, all_logits = [], []
    for step in range(max_new_tokens):
        token = _sample(sample_fn, step_logits, generator, model.config.vocab_size)
        tokens.append(token)
        all_logits.append(step_logits)
        if step + 1 < max_new_tokens:
            step_logits = model(token[:, None], cache=cache)[:, -1]
    return torch.stack(tokens, dim=1), torch.stack(all_logits, dim=1)
