"""The decode loop feeds the model the token chosen one step earlier (the first decode step feeds
the last prompt token again): a stale variable in the loop. Each step then attends to a cache
holding a duplicated token and misses the newest one."""
from conformance.mutants._source_mutant import plant

TARGET = "generate"

globals().update({k: v for k, v in vars(plant(
    "reference/generate.py",
    '            step_logits = model(token[:, None], cache=cache)[:, -1]\n    return',
    '            step_logits = model((tokens[-2] if len(tokens) > 1 else prompt_tokens[:, -1])[:, None], cache=cache)[:, -1]\n    return',
    "generate__decode_feeds_stale_token")).items() if not k.startswith("__")})
