"""Planted bugs of `generate` (each must make a generate test fail)."""
from conformance.declarations import Patch


MUTANTS = [
    Patch("decode_feeds_stale_token",
          "The decode loop feeds the model the token chosen one step earlier (the first decode step "
          "feeds the last prompt token again): a stale variable in the loop. Each step then attends "
          "to a cache holding a duplicated token and misses the newest one.",
          "            step_logits = model(token[:, None], cache=cache)[:, -1]\n",
          "            stale = tokens[-2] if len(tokens) > 1 else prompt_tokens[:, -1]\n"
          "            step_logits = model(stale[:, None], cache=cache)[:, -1]\n"),
    Patch("drops_last_prefill_token",
          "Prefill stops one token short (``prompt[:, :-1]``, as engines that \"decode the last "
          "prompt token\" do) but then samples from the prefill's last logits as if the whole prompt "
          "had been seen: the last prompt token never enters the cache or the first prediction.",
          "    chunk = prefill_chunk_size or prompt_len\n"
          "    for start in range(0, prompt_len, chunk):                          # prefill\n"
          "        logits = model(prompt_tokens[:, start:start + chunk], cache=cache)\n",
          "    prefill = prompt_tokens[:, :-1] if prompt_len > 1 else prompt_tokens\n"
          "    chunk = prefill_chunk_size or prefill.shape[1]\n"
          "    for start in range(0, prefill.shape[1], chunk):\n"
          "        logits = model(prefill[:, start:start + chunk], cache=cache)\n"),
    Patch("chunk_fresh_cache",
          "Chunked prefill that gives every chunk a fresh cache (the cache is created inside the "
          "chunk loop): each chunk sees only itself, with positions restarting at 0, and decode sees "
          "only the last chunk. Right whenever the prompt fits one chunk.",
          "    for start in range(0, prompt_len, chunk):                          # prefill\n",
          "    for start in range(0, prompt_len, chunk):                          # prefill\n"
          "        cache = model.new_cache(batch, prompt_len + max_new_tokens - 1)\n"),
    Patch("sampler_without_generator",
          "The loops call ``sample_fn(logits, None)``: the caller's seeded generator never reaches "
          "the sampler, which then draws from the global RNG -- greedy output is unaffected, seeded "
          "sampling is no longer reproducible.",
          "    tokens = sample_fn(logits, generator)\n",
          "    tokens = sample_fn(logits, None)\n"),
]

# Defaults and boundaries.
MUTANTS += [
    Patch("default_sampler_multinomial",
          "Without a sample_fn the cached loop samples from softmax(logits) (a loop written with "
          "sampling as its default) instead of the documented greedy argmax.",
          "    sample_fn = sample_fn or greedy\n    vocab = model.config.vocab_size\n",
          "    sample_fn = sample_fn or (lambda logits, g: torch.multinomial(torch.softmax(logits.float(), -1), 1, "
          "generator=g)[:, 0])\n    vocab = model.config.vocab_size\n"),
    Patch("greedy_ties_to_highest_id",
          "Greedy breaks exact ties toward the highest token id (a 'last maximum wins' scan, or an "
          "argmax over the reversed vocabulary) instead of the lowest.",
          "    return logits.argmax(dim=-1)\n",
          "    return logits.shape[-1] - 1 - logits.flip(-1).argmax(dim=-1)\n"),
    Patch("default_generator_seeded",
          "Without a generator the loop makes one seeded with 0 (\"for reproducibility\"), so "
          "sample_fn never receives the documented None and every unseeded run draws alike.",
          "    sample_fn = sample_fn or greedy\n    vocab = model.config.vocab_size\n",
          "    sample_fn = sample_fn or greedy\n    vocab = model.config.vocab_size\n"
          "    generator = generator if generator is not None else torch.Generator(device=prompt_tokens.device).manual_seed(0)\n"),
    Patch("drops_ragged_last_chunk",
          "Chunked prefill stops at the last full chunk (``range(0, prompt_len - chunk + 1, chunk)``): "
          "the tail of a prompt that is not a multiple of the chunk never enters the cache, and a "
          "chunk longer than the prompt prefills nothing.",
          "    for start in range(0, prompt_len, chunk):                          # prefill\n",
          "    for start in range(0, prompt_len - chunk + 1, chunk):              # prefill\n"),
    Patch("zero_new_tokens_rejected",
          "max_new_tokens must be >= 1: the legal boundary max_new_tokens = 0 (an empty "
          "generation) raises.",
          '    check_int("max_new_tokens", max_new_tokens, minimum=0)\n',
          '    check_int("max_new_tokens", max_new_tokens, minimum=1)\n'),
    Patch("full_context_rejected",
          "A generation that ends exactly at the model's max_seq_len is rejected (``>=`` for ``>``) "
          "-- forgetting that the last generated token is never fed to the model.",
          "    if prompt_len + max_new_tokens > model.config.max_seq_len:",
          "    if prompt_len + max_new_tokens >= model.config.max_seq_len:"),
    Patch("uncached_ignores_chunk_size",
          "generate_uncached does not validate prefill_chunk_size (it has no cache to fill, so the "
          "argument is dropped unchecked): prefill_chunk_size=0, -1, 2.0 or True is accepted by one "
          "loop and rejected by the other, so the two are not interchangeable.",
          "    no cache to fill in chunks), so the two loops are interchangeable.\"\"\"\n"
          "    batch, prompt_len = check_generate_inputs(model, prompt_tokens, max_new_tokens, sample_fn, prefill_chunk_size)\n",
          "    no cache to fill in chunks), so the two loops are interchangeable.\"\"\"\n"
          "    batch, prompt_len = check_generate_inputs(model, prompt_tokens, max_new_tokens, sample_fn)\n"),
]
