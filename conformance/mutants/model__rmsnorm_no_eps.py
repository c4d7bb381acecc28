"""RMSNorm that adds eps outside the square root (x / (sqrt(mean(x^2)) + eps)) -- a common slip
when porting from LayerNorm-style code; off by about eps/2 relative, visible in float64 and with
a large eps."""
import torch

from reference.model import ModelConfig, RMSNorm, Transformer as _Ref, load_weights, save_weights  # noqa: F401

TARGET = "model"


class _RMSNorm(RMSNorm):
    def forward(self, x):
        xf = x.to(torch.float64 if x.dtype == torch.float64 else torch.float32)
        normed = xf / (xf.pow(2).mean(dim=-1, keepdim=True).sqrt() + self.eps)
        return self.weight * normed.to(x.dtype)


class Transformer(_Ref):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for module in self.modules():
            if isinstance(module, RMSNorm):
                module.__class__ = _RMSNorm
