"""RoPE applied to interleaved pairs (x[2i], x[2i+1]) -- Meta's complex-number layout -- on
weights laid out for HF's half-split pairs (x[i], x[i + head_dim/2]): the classic bug of loading
an HF checkpoint into Meta-style rotary code without permuting q_proj/k_proj."""
from conformance.mutants._source_mutant import plant

TARGET = "model"

globals().update({k: v for k, v in vars(plant(
    "reference/model.py",
    '    return x * cos + rotate_half(x) * sin',
    '    half = x.shape[-1] // 2\n    cos, sin = cos[..., :half].repeat_interleave(2, -1), sin[..., :half].repeat_interleave(2, -1)\n    pairs = x.unflatten(-1, (half, 2))\n    return x * cos + torch.stack([-pairs[..., 1], pairs[..., 0]], dim=-1).flatten(-2) * sin',
    "model__rope_interleaved")).items() if not k.startswith("__")})
