"""Planted bugs of `chunked_prefill` (each must make a chunked_prefill test fail)."""
from conformance.declarations import Patch

_DECODES = ("    for rid in decodes:                          # 1. decode-first: never stalled by a prefill\n"
            "        if budget == 0:\n            break\n        plan[rid] = 1\n        budget -= 1\n")
_PREFILLS = ("    for rid, remaining in pairs:                 # 2. prefill chunks, first come first served\n"
             "        if budget == 0:\n            break\n        n = min(remaining, budget)\n"
             "        if chunk_size is not None:\n            n = min(n, chunk_size)\n"
             "        if n > 0:\n            plan[rid] = n\n            budget -= n\n")


# The model level.
MUTANTS = [
    Patch("drops_ragged_last_chunk",
          "The chunk loop stops at the last full chunk (``range(0, n - chunk_size + 1, chunk_size)``): "
          "the tail of a prompt that is not a multiple of the chunk never enters the cache, and a chunk "
          "longer than the prompt prefills nothing.",
          "    for begin in range(0, n, chunk_size):\n",
          "    for begin in range(0, n - chunk_size + 1, chunk_size):\n"),
    Patch("chunk_positions_restart_at_zero",
          "Every chunk is prefilled as a prompt of its own -- a scratch cache per chunk, whose K/V are "
          "then copied into the request's cache: RoPE positions restart at 0 in every chunk instead of "
          "continuing from the cache's length, and a chunk attends only to itself. Right when the "
          "prompt fits one chunk and nothing is cached before it.",
          "        logits.append(model(chunk, cache=cache))     # positions cache.seq_len, ...\n",
          "        scratch = model.new_cache(tokens.shape[0])\n"
          "        logits.append(model(chunk, cache=scratch))\n"
          "        for layer in range(len(cache.lengths)):\n"
          "            cache.append(layer, scratch.k[layer, :, :, :chunk.shape[1]], scratch.v[layer, :, :, :chunk.shape[1]])\n"),
    Patch("checks_tokens_chunk_by_chunk",
          "The prompt is not checked up front: each chunk's forward checks its own tokens, so a bad id "
          "in a later chunk is rejected after the earlier chunks were appended -- the error is right, "
          "the cache is left half-filled.",
          "    check_prompt(model, tokens, cache)\n    if cache is None:\n",
          "    if cache is None:\n"),
]

# The step level.
MUTANTS += [
    Patch("prefill_before_decodes",
          "The plan serves the prefill chunks first and gives the decodes what is left: a long prompt "
          "takes the whole budget and the running streams stall (prefill-prioritizing scheduling, "
          "vLLM's before chunked prefill).",
          _DECODES + _PREFILLS, _PREFILLS + _DECODES),
    Patch("budget_off_by_one",
          "The prefill fill checks the budget one token late (``budget + 1`` left for the chunk): a "
          "step runs one token more than token_budget whenever the prefills could use it.",
          "        n = min(remaining, budget)\n",
          "        n = min(remaining, budget + 1)\n"),
    Patch("shortest_prefill_first",
          "Prefills are served shortest-remaining-first (a 'finish the almost-done prompt' heuristic) "
          "instead of first come first served: a long old prompt waits behind every shorter new one.",
          "    for rid, remaining in pairs:                 # 2. prefill chunks, first come first served\n",
          "    for rid, remaining in sorted(pairs, key=lambda p: p[1]):\n"),
    Patch("chunk_cap_ignored",
          "chunk_size is validated but never applied: one prefill takes the whole budget left.",
          "        if chunk_size is not None:\n            n = min(n, chunk_size)\n",
          ""),
    Patch("first_token_a_step_late",
          "The simulation emits a request's first token in the step after its last prompt chunk (as if "
          "the prompt's last position did not already give the first token's logits): every TTFT is "
          "one decode step too long.",
          "                times[i].append(now)\n                if requests[i][2] > 1:\n"
          "                    decoding.append(i)\n",
          "                decoding.append(i)\n"),
]
