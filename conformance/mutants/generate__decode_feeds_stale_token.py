"""The decode loop feeds the model the token chosen one step earlier (the first decode step feeds
the last prompt token again): a stale variable in the loop. Each step then attends to a cache
holding a duplicated token and misses the newest one."""
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
    chunk = prefill_chunk_size or prompt_len
    for start in range(0, prompt_len, chunk):
        logits = model(prompt_tokens[:, start:start + chunk], cache=cache)
    step_logits, previous = logits[:, -1], prompt_tokens[:, -1]
    tokens, all_logits = [], []
    for step in range(max_new_tokens):
        token = _sample(sample_fn, step_logits, generator, model.config.vocab_size)
        tokens.append(token)
        all_logits.append(step_logits)
        if step + 1 < max_new_tokens:
            step_logits = model(previous[:, None], cache=cache)[:, -1]   # BUG: should feed `token`
        previous = token
    return torch.stack(tokens, dim=1), torch.stack(all_logits, dim=1)
