"""Chunked prefill that gives every chunk a fresh cache (the cache is created inside the chunk
loop): each chunk sees only itself, with positions restarting at 0, and decode sees only the last
chunk. Right whenever the prompt fits one chunk."""
from conformance.mutants._source_mutant import plant

TARGET = "generate"

globals().update({k: v for k, v in vars(plant(
    "reference/generate.py",
    '    for start in range(0, prompt_len, chunk):                          # prefill\n',
    '    for start in range(0, prompt_len, chunk):                          # prefill\n        cache = model.new_cache(batch, prompt_len + max_new_tokens - 1)\n',
    "generate__chunk_fresh_cache")).items() if not k.startswith("__")})
