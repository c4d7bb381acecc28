"""RMSNorm that adds eps outside the square root (x / (sqrt(mean(x^2)) + eps)) -- a common slip
when porting from LayerNorm-style code; off by about eps/2 relative, visible in float64 and with
a large eps."""
from conformance.mutants._source_mutant import plant

TARGET = "model"

globals().update({k: v for k, v in vars(plant(
    "reference/model.py",
    '    normed = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)',
    '    normed = xf / (xf.pow(2).mean(dim=-1, keepdim=True).sqrt() + eps)',
    "model__rmsnorm_no_eps")).items() if not k.startswith("__")})
