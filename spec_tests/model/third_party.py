"""A third-party "must pass" submission for `model`: Hugging Face transformers' ``LlamaForCausalLM``.

``Transformer`` is an ``nn.Module`` whose two children are HF's own ``LlamaForCausalLM.model`` (a
``LlamaModel``: embedding, decoder layers, rotary table, final norm) and ``.lm_head``, so
``state_dict()`` holds exactly HF's names; ``forward`` calls HF's ``LlamaForCausalLM.forward`` and
returns its logits, with an HF ``DynamicCache`` as the KV cache. Everything numerical is HF's: the
RMSNorm, the rotary table (``position_ids.float() * inv_freq``), ``rotate_half``, GQA, the MLP and,
when no ``attention`` is given, HF's own SDPA attention. The code of this file only translates the
contract's interface to HF's, and adds what HF does not do:

- ``ModelConfig`` is written here: HF's ``LlamaConfig`` has other field names, no ``max_seq_len``
  or ``dtype`` checks, and rejects ``dim`` not a multiple of ``n_heads`` even with an explicit
  ``head_dim`` (which the contract allows and HF's modelling code handles: see
  ``oracles.hf_llama_config``).
- Argument checks (the contract's bad-input rules; HF checks none of them) and the KV cache's
  bookkeeping (``seq_len``, its capacity).
- Seeded initialisation: HF initialises from the global RNG; the contract draws every parameter
  from ``torch.Generator(seed)`` (the recipe is ``reference.model.seeded_weights``, imported:
  it is written once), and HF's own init is run inside ``torch.random.fork_rng`` so the global RNG is untouched.
- ``attention=``: a callable with the contract's signature is registered as an HF attention
  function (``AttentionInterface``); HF hands it the rotated q and the un-repeated, cached K/V.
  HF's mask is not built (the callable's ``causal=True`` is the mask: no padding here).
- float64 models: HF computes RMSNorm and the rotary table in float32 for every dtype; the
  contract says float64 models compute them in float64, so exactly those two forwards are patched
  (``oracles.hf_in_float64``, the same patch the float64 HF oracle uses). Lower precisions run
  HF unchanged. The model is built with ``_from_config(dtype=...)`` (as ``from_pretrained`` does):
  ``LlamaForCausalLM(config).to(torch.bfloat16)`` would also cast the ``inv_freq`` buffer to
  bfloat16, which test_long_range_positions_in_low_precision catches.

Run: ``pytest spec_tests/model --impl spec_tests/model/third_party.py`` (test_third_party.py
requires it to pass). Needs ``transformers`` (the ``test`` extra).
"""
from __future__ import annotations

import dataclasses
import inspect
import math
from dataclasses import dataclass
from numbers import Real
from typing import Callable

import torch
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import AttentionInterface, DynamicCache, LlamaForCausalLM
from transformers.masking_utils import AttentionMaskInterface

from reference.model import seeded_weights
from spec_tests.model.oracles import hf_in_float64, hf_llama_config

__all__ = ["ModelConfig", "Transformer", "save_weights", "load_weights"]

_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_ATTN = "inferspec_callable"
# transformers >= 5.2x names the cache argument ``cache`` (``past_key_values`` before).
_CACHE_ARG = "cache" if "cache" in inspect.signature(LlamaForCausalLM.forward).parameters else "past_key_values"


def _int(name, value, minimum=1):
    if type(value) is not int:
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return value


def _real(name, value):
    if not isinstance(value, Real) or isinstance(value, bool):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return float(value)


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = 128
    dim: int = 64
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int = 2
    head_dim: int | None = None
    hidden_dim: int | None = None
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    max_seq_len: int = 128
    dtype: torch.dtype = torch.float32

    def __post_init__(self):
        for name in ("vocab_size", "dim", "n_layers", "n_heads", "n_kv_heads", "max_seq_len"):
            _int(name, getattr(self, name))
        if self.head_dim is None:
            if self.dim % self.n_heads:
                raise ValueError(f"head_dim: give it, dim {self.dim} is not a multiple of n_heads {self.n_heads}")
            object.__setattr__(self, "head_dim", self.dim // self.n_heads)
        if _int("head_dim", self.head_dim) % 2:
            raise ValueError(f"head_dim must be even, got {self.head_dim}")
        if self.hidden_dim is None:   # Llama's 8/3 x dim, rounded up to a multiple of 16
            object.__setattr__(self, "hidden_dim", 16 * -(-8 * self.dim // 48))
        _int("hidden_dim", self.hidden_dim)
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_kv_heads {self.n_kv_heads} must divide n_heads {self.n_heads}")
        if _real("rope_theta", self.rope_theta) <= 1:
            raise ValueError(f"rope_theta must be > 1, got {self.rope_theta}")
        if _real("norm_eps", self.norm_eps) < 0:
            raise ValueError(f"norm_eps must be >= 0, got {self.norm_eps}")
        if self.dtype not in _FLOATS:
            raise TypeError(f"dtype must be a floating torch dtype, got {self.dtype!r}")

    def replace(self, **changes) -> "ModelConfig":
        return dataclasses.replace(self, **changes)


def _callable_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                        inferspec_attention=None, **kwargs):
    """HF attention function -> the contract's callable: q (batch, heads, q_len, d), K/V
    un-repeated (batch, kv_heads, kv_len, d); HF wants (batch, q_len, heads, d) back."""
    out = inferspec_attention(query, key, value, causal=True, window=None, scale=scaling)
    return out.transpose(1, 2).contiguous(), None


AttentionInterface.register(_ATTN, _callable_attention)
AttentionMaskInterface.register(_ATTN, lambda *args, **kwargs: None)   # the callable masks


class Cache:
    """The contract's KV cache: an HF ``DynamicCache`` plus its capacity and owner's shape."""

    def __init__(self, hf_config, batch: int, max_seq_len: int, shape: tuple, dtype: torch.dtype):
        self.hf = DynamicCache(config=hf_config)
        self.batch, self.max_seq_len, self.shape, self.dtype = batch, max_seq_len, shape, dtype

    @property
    def seq_len(self) -> int:
        return int(self.hf.get_seq_length())


class Transformer(nn.Module):
    def __init__(self, config: ModelConfig, *, seed: int = 0, attention: Callable | None = None):
        super().__init__()
        if not isinstance(config, ModelConfig):
            raise TypeError(f"config must be a ModelConfig, got {type(config).__name__}")
        _int("seed", seed, minimum=-(2**63))
        if attention is not None and not callable(attention):
            raise TypeError(f"attention must be callable, got {type(attention).__name__}")
        self.config = config
        hf_config = hf_llama_config(config, "sdpa" if attention is None else _ATTN)
        with torch.random.fork_rng(devices=[]):     # HF's own init draws from the global RNG
            hf = LlamaForCausalLM._from_config(hf_config, dtype=config.dtype,
                                               attn_implementation=hf_config._attn_implementation).eval()
        if config.dtype == torch.float64:
            hf = hf_in_float64(hf)
        self.model, self.lm_head = hf.model, hf.lm_head            # HF's names in state_dict
        object.__setattr__(self, "hf", hf)                          # not a child: no "hf." prefix
        object.__setattr__(self, "attention_kwargs", {} if attention is None else {"inferspec_attention": attention})
        self.init_weights(seed)

    def init_weights(self, seed: int) -> None:
        seeded_weights(self, seed)   # the reference's recipe, imported: one place

    @property
    def dtype(self) -> torch.dtype:
        return self.lm_head.weight.dtype

    def new_cache(self, batch: int, max_seq_len: int | None = None) -> Cache:
        _int("batch", batch)
        max_seq_len = self.config.max_seq_len if max_seq_len is None else _int("max_seq_len", max_seq_len)
        c = self.config
        return Cache(self.hf.config, batch, max_seq_len, (c.n_layers, c.n_kv_heads, c.head_dim), self.dtype)

    def _check(self, tokens, cache) -> None:
        c = self.config
        if not isinstance(tokens, torch.Tensor):
            raise TypeError(f"tokens must be a tensor, got {type(tokens).__name__}")
        if tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:
            raise TypeError(f"tokens must hold integer ids, got {tokens.dtype}")
        if tokens.dim() != 2:
            raise ValueError(f"tokens must have rank 2 (batch, seq), got shape {tuple(tokens.shape)}")
        if tokens.numel() == 0:
            raise ValueError(f"tokens must be non-empty, got shape {tuple(tokens.shape)}")
        if int(tokens.min()) < 0 or int(tokens.max()) >= c.vocab_size:
            raise ValueError(f"tokens: ids must be in [0, {c.vocab_size})")
        start = 0
        if cache is not None:
            if not isinstance(cache, Cache):
                raise TypeError(f"cache must come from new_cache, got {type(cache).__name__}")
            if cache.shape != (c.n_layers, c.n_kv_heads, c.head_dim) or cache.batch != tokens.shape[0]:
                raise ValueError(f"cache is for batch {cache.batch} and (layers, kv_heads, head_dim) {cache.shape}")
            if cache.dtype != self.dtype:
                raise ValueError(f"cache dtype {cache.dtype} != model dtype {self.dtype}")
            start = cache.seq_len
            if start + tokens.shape[1] > cache.max_seq_len:
                raise ValueError(f"cache holds {start} of {cache.max_seq_len}: no room for {tokens.shape[1]}")
        if start + tokens.shape[1] > c.max_seq_len:
            raise ValueError(f"tokens: positions up to {start + tokens.shape[1] - 1} exceed max_seq_len={c.max_seq_len}")

    def forward(self, tokens: torch.Tensor, cache: Cache | None = None) -> torch.Tensor:
        self._check(tokens, cache)
        out = self.hf(input_ids=tokens, use_cache=cache is not None, **self.attention_kwargs,
                      **{_CACHE_ARG: None if cache is None else cache.hf})
        return out.logits


def save_weights(model: nn.Module, path) -> None:
    save_file({n: t.detach().contiguous().cpu() for n, t in model.state_dict().items()}, str(path),
              metadata={"format": "pt"})


def load_weights(model: nn.Module, path) -> nn.Module:
    tensors = load_file(str(path))
    own = model.state_dict()
    wrong = sorted(set(own) ^ set(tensors)) + [n for n in own if n in tensors and tensors[n].shape != own[n].shape]
    if wrong:
        raise ValueError(f"path {path}: names missing, unexpected or of another shape: {wrong[:5]}")
    model.load_state_dict({n: t.to(own[n].dtype) for n, t in tensors.items()}, strict=True)
    return model
