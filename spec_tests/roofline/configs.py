"""Real model shapes for `roofline` (each checkpoint's config.json), in bfloat16.

Qwen2.5's q/k/v projections carry biases, which the reference transformer does not model (so they
are not counted: 128 x (28 + 4 + 4) x 28 = 129,024 parameters of Qwen2.5-7B, 128 x (64 + 8 + 8) x 80
= 819,200 of Qwen2.5-72B); everything else is the published shape.
"""
from __future__ import annotations

import torch

from reference.model import ModelConfig

LLAMA3_8B = ModelConfig(vocab_size=128256, dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, hidden_dim=14336,
                        rope_theta=500000.0, max_seq_len=8192, dtype=torch.bfloat16)
LLAMA3_70B = ModelConfig(vocab_size=128256, dim=8192, n_layers=80, n_heads=64, n_kv_heads=8, hidden_dim=28672,
                         rope_theta=500000.0, max_seq_len=8192, dtype=torch.bfloat16)
QWEN2_5_7B = ModelConfig(vocab_size=152064, dim=3584, n_layers=28, n_heads=28, n_kv_heads=4, hidden_dim=18944,
                         rope_theta=1000000.0, max_seq_len=32768, dtype=torch.bfloat16)
QWEN2_5_72B = ModelConfig(vocab_size=152064, dim=8192, n_layers=80, n_heads=64, n_kv_heads=8, hidden_dim=29568,
                          rope_theta=1000000.0, max_seq_len=32768, dtype=torch.bfloat16)
REAL = {"Llama-3-8B": LLAMA3_8B, "Llama-3-70B": LLAMA3_70B, "Qwen2.5-7B": QWEN2_5_7B, "Qwen2.5-72B": QWEN2_5_72B}
