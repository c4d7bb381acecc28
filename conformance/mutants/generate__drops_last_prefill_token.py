"""Prefill stops one token short (``prompt[:, :-1]``, as engines that "decode the last prompt
token" do) but then samples from the prefill's last logits as if the whole prompt had been seen:
the last prompt token never enters the cache or the first prediction."""
from conformance.mutants._source_mutant import plant

TARGET = "generate"

globals().update({k: v for k, v in vars(plant(
    "reference/generate.py",
    '    chunk = prefill_chunk_size or prompt_len\n    for start in range(0, prompt_len, chunk):                          # prefill\n        logits = model(prompt_tokens[:, start:start + chunk], cache=cache)',
    '    prefill = prompt_tokens[:, :-1] if prompt_len > 1 else prompt_tokens\n    chunk = prefill_chunk_size or prefill.shape[1]\n    for start in range(0, prefill.shape[1], chunk):\n        logits = model(prefill[:, start:start + chunk], cache=cache)',
    "generate__drops_last_prefill_token")).items() if not k.startswith("__")})
