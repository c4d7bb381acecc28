"""Planted bugs of `generate` (each must make a generate test fail)."""
from conformance.mutants import Patch

GENERATE = "reference/generate.py"

MUTANTS = [
    Patch("decode_feeds_stale_token",
          "The decode loop feeds the model the token chosen one step earlier (the first decode step "
          "feeds the last prompt token again): a stale variable in the loop. Each step then attends "
          "to a cache holding a duplicated token and misses the newest one.",
          GENERATE,
          "            step_logits = model(token[:, None], cache=cache)[:, -1]\n",
          "            stale = tokens[-2] if len(tokens) > 1 else prompt_tokens[:, -1]\n"
          "            step_logits = model(stale[:, None], cache=cache)[:, -1]\n"),
    Patch("drops_last_prefill_token",
          "Prefill stops one token short (``prompt[:, :-1]``, as engines that \"decode the last "
          "prompt token\" do) but then samples from the prefill's last logits as if the whole prompt "
          "had been seen: the last prompt token never enters the cache or the first prediction.",
          GENERATE,
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
          GENERATE,
          "    for start in range(0, prompt_len, chunk):                          # prefill\n",
          "    for start in range(0, prompt_len, chunk):                          # prefill\n"
          "        cache = model.new_cache(batch, prompt_len + max_new_tokens - 1)\n"),
    Patch("sampler_without_generator",
          "The loops call ``sample_fn(logits, None)``: the caller's seeded generator never reaches "
          "the sampler, which then draws from the global RNG -- greedy output is unaffected, seeded "
          "sampling is no longer reproducible.",
          GENERATE,
          "    tokens = sample_fn(logits, generator)\n",
          "    tokens = sample_fn(logits, None)\n"),
]
