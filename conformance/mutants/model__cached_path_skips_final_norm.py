"""The cached path (forward with a KV cache) forgets the final RMSNorm before lm_head, so cached
logits differ from uncached ones -- a mismatch between two code paths that should be one."""
from conformance.mutants._source_mutant import plant

TARGET = "model"

globals().update({k: v for k, v in vars(plant(
    "reference/model.py",
    '        return self.lm_head(self.model.norm(h))',
    '        return self.lm_head(h if cache is not None else self.model.norm(h))',
    "model__cached_path_skips_final_norm")).items() if not k.startswith("__")})
