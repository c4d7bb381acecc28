"""With a non-empty KV cache, the new tokens' RoPE positions start at cache length - 1 instead of
the cache length (the first decode token gets the last prompt token's position). A whole-sequence
forward is right; only prefill-then-decode is wrong."""
import torch

from reference.model import ModelConfig, Transformer as _Ref, load_weights, rope_cos_sin, save_weights  # noqa: F401

TARGET = "model"


class Transformer(_Ref):
    def forward(self, tokens, cache=None):
        start = self.check_inputs(tokens, cache)
        start = max(start - 1, 0)
        positions = torch.arange(start, start + tokens.shape[1], device=tokens.device)
        cos, sin = rope_cos_sin(positions, self.config.head_dim, self.config.rope_theta, self.dtype)
        h = self.model.embed_tokens(tokens)
        for i, layer in enumerate(self.model.layers):
            h = layer(h, cos, sin, cache, i, self.attention_fn)
        return self.lm_head(self.model.norm(h))
