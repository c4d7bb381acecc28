"""With a non-empty KV cache, the new tokens' RoPE positions start at cache length - 1 instead of
the cache length (the first decode token gets the last prompt token's position). A whole-sequence
forward is right; only prefill-then-decode is wrong."""
from conformance.mutants._source_mutant import plant

TARGET = "model"

globals().update({k: v for k, v in vars(plant(
    "reference/model.py",
    '        positions = torch.arange(start, start + tokens.shape[1], device=tokens.device)',
    '        start = max(start - 1, 0)\n        positions = torch.arange(start, start + tokens.shape[1], device=tokens.device)',
    "model__decode_position_off_by_one")).items() if not k.startswith("__")})
