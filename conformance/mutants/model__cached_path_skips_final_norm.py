"""The cached path (forward with a KV cache) forgets the final RMSNorm before lm_head, so cached
logits differ from uncached ones -- a mismatch between two code paths that should be one."""
import torch

from reference.model import ModelConfig, Transformer as _Ref, load_weights, rope_cos_sin, save_weights  # noqa: F401

TARGET = "model"


class Transformer(_Ref):
    def forward(self, tokens, cache=None):
        start = self.check_inputs(tokens, cache)
        positions = torch.arange(start, start + tokens.shape[1], device=tokens.device)
        cos, sin = rope_cos_sin(positions, self.config.head_dim, self.config.rope_theta, self.dtype)
        h = self.model.embed_tokens(tokens)
        for i, layer in enumerate(self.model.layers):
            h = layer(h, cos, sin, cache, i, self.attention_fn)
        return self.lm_head(h if cache is not None else self.model.norm(h))
