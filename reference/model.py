"""A tiny Llama-style decoder: the specification (course 01.01, 01.04; chapter 1).

    h_0   = embed_tokens[tokens]                                       (batch, seq, dim)
    h'    = h   + o_proj(attention(rope(q_proj(n1(h))), rope(k_proj(n1(h))), v_proj(n1(h))))
    h_out = h'  + down_proj(silu(gate_proj(n2(h'))) * up_proj(n2(h')))  for each layer
    logits = lm_head(norm(h_L))                                        (batch, seq, vocab)

RMSNorm   n(x) = weight * x / sqrt(mean(x^2) + eps), computed in float32 (float64 for float64
          activations) and cast back before the weight multiplies it (HF's LlamaRMSNorm).
RoPE      half-split pairing (HF's ``rotate_half``): feature i is rotated with feature
          i + head_dim/2 by the angle pos * theta^(-2i/head_dim), i < head_dim/2. Positions start
          at the KV cache's current length. The cos/sin table -- the positions, the frequencies,
          their product and its cos/sin -- is computed in float32 for every activation dtype but
          float64 (the convention of HF, Meta and vLLM; float64 models compute it in float64 so
          that their run is the oracle of the exact formula), then cast to the activation dtype.
          Rounding any of them to a 16-bit dtype first is wrong in a way that grows with the
          position: bfloat16 holds integers exactly only up to 256 and float16 up to 2048, and an
          angle of a few thousand radians in bfloat16 is off by up to 16.
GQA       ``n_heads`` query heads share ``n_kv_heads`` K/V heads (query head h reads KV head
          h // (n_heads / n_kv_heads)). K/V go to the attention callable *un-repeated*.
SwiGLU    down_proj(silu(gate_proj(x)) * up_proj(x)).
Attention a pluggable callable with the signature of :func:`reference.attention.attention`
          (q, k, v, *, causal, window, scale) in (batch, heads, seq, head_dim) layout; the model
          calls it with ``causal=True, window=None, scale=None`` (scale 1/sqrt(head_dim)). The
          FlashAttention ``nn.Module`` is a drop-in.

Parameter names are HF ``LlamaForCausalLM``'s (``model.embed_tokens.weight``,
``model.layers.N.self_attn.q_proj.weight``, ..., ``model.norm.weight``, ``lm_head.weight``; no
biases, untied embeddings), so ``state_dict()`` loads into HF and back, and safetensors files are
interchangeable with HF's ``save_pretrained``.

Initialisation is seeded and deterministic: every parameter is drawn in float32 from one explicit
``torch.Generator(seed)`` in ``state_dict`` order, then cast to ``config.dtype`` (so the float64
and bfloat16 models of one seed hold the same float32 weights, rounded). The global RNG is never
touched. Scales keep activations O(1): embeddings N(0, 1), projections N(0, 1/fan_in), norm
weights 1 + N(0, 0.1^2) (not all-ones, so a forgotten norm weight shows). These weights of a
seed are the reference's choice, not the law: the spec's numerical tests load the reference's
weights into an implementation by their names, and hold ``Transformer(config, seed)`` to exactly
these weights only at token-exact (an implementation declaring ``TOKEN_EXACT = True``). The law
is that a seed gives the same weights every time, another seed other weights, the global RNG
untouched.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from reference._checks import FLOAT_DTYPES, check_int, check_real, check_tensor, compute_dtype
from reference.attention import attention as reference_attention
from reference.kv_bytes import KVCache

__all__ = ["ModelConfig", "Transformer", "save_weights", "load_weights"]  # the contract: what an implementation must provide
__optional__ = []  # checked when an implementation provides them


@dataclass(frozen=True)
class ModelConfig:
    """Shape of the model. Every field has a default (the values below); ``head_dim`` defaults to
    ``dim // n_heads``; ``hidden_dim`` (the SwiGLU width) to 8/3 x dim rounded up to a multiple of
    16 (Llama's rule: ``16 * ceil(8 * dim / 48)``, 176 for dim 64). Invalid values raise
    ValueError/TypeError naming the field: sizes must be ints >= 1 (``head_dim`` even,
    ``n_kv_heads`` dividing ``n_heads``, ``dim`` a multiple of ``n_heads`` unless ``head_dim`` is
    given), ``rope_theta`` a finite real > 1, ``norm_eps`` a finite real >= 0 (0 is legal),
    ``dtype`` one of float16/bfloat16/float32/float64."""

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
            check_int(name, getattr(self, name), minimum=1)
        if self.head_dim is None:
            if self.dim % self.n_heads:
                raise ValueError(f"head_dim: dim ({self.dim}) is not a multiple of n_heads "
                                 f"({self.n_heads}); give head_dim explicitly")
            object.__setattr__(self, "head_dim", self.dim // self.n_heads)
        check_int("head_dim", self.head_dim, minimum=1)
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even (RoPE rotates pairs), got {self.head_dim}")
        if self.hidden_dim is None:
            object.__setattr__(self, "hidden_dim", 16 * math.ceil(8 * self.dim / 3 / 16))
        check_int("hidden_dim", self.hidden_dim, minimum=1)
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_kv_heads ({self.n_kv_heads}) must divide n_heads ({self.n_heads})")
        if check_real("rope_theta", self.rope_theta) <= 1:
            raise ValueError(f"rope_theta must be > 1, got {self.rope_theta}")
        check_real("norm_eps", self.norm_eps, minimum=0)
        if self.dtype not in FLOAT_DTYPES:
            raise TypeError(f"dtype must be one of {FLOAT_DTYPES}, got {self.dtype!r}")

    def replace(self, **changes) -> "ModelConfig":
        """A copy with ``changes`` (``head_dim``/``hidden_dim`` are kept unless changed)."""
        return dataclasses.replace(self, **changes)


# --- building blocks ---------------------------------------------------------------------------
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """weight * x / sqrt(mean(x^2, last dim) + eps), in float32 (float64 for float64 x)."""
    xf = x.to(compute_dtype(x.dtype))
    normed = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return weight * normed.to(x.dtype)


def rope_cos_sin(positions: torch.Tensor, head_dim: int, theta: float, dtype: torch.dtype):
    """cos and sin tables (len(positions), head_dim) for half-split RoPE: column i and
    i + head_dim/2 both hold the angle pos * theta^(-2i/head_dim). Computed in float32 (float64 for
    float64 models), returned in ``dtype``."""
    acc = compute_dtype(dtype)
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=acc, device=positions.device) / head_dim))
    angles = positions.to(acc)[:, None] * inv_freq[None, :]
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) -> (-x2, x1) on the two halves of the last dimension."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate x (batch, heads, seq, head_dim) by the tables (seq, head_dim)."""
    return x * cos + rotate_half(x) * sin


class Linear(nn.Module):
    """y = x @ weight.T, no bias. (torch's nn.Linear would draw its init from the global RNG.)"""

    def __init__(self, in_features: int, out_features: int, dtype: torch.dtype):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features, dtype=dtype))

    def forward(self, x):
        return F.linear(x, self.weight)


class Embedding(nn.Module):
    def __init__(self, vocab_size: int, dim: int, dtype: torch.dtype):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab_size, dim, dtype=dtype))

    def forward(self, tokens):
        return F.embedding(tokens, self.weight)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float, dtype: torch.dtype):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.empty(dim, dtype=dtype))

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)


class Attention(nn.Module):
    """Self-attention with RoPE and GQA; K/V of the new positions are appended to the cache."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        c, dt = config, config.dtype
        self.n_heads, self.n_kv_heads, self.head_dim = c.n_heads, c.n_kv_heads, c.head_dim
        self.q_proj = Linear(c.dim, c.n_heads * c.head_dim, dt)
        self.k_proj = Linear(c.dim, c.n_kv_heads * c.head_dim, dt)
        self.v_proj = Linear(c.dim, c.n_kv_heads * c.head_dim, dt)
        self.o_proj = Linear(c.n_heads * c.head_dim, c.dim, dt)

    def forward(self, x, cos, sin, cache: KVCache | None, layer: int, attention_fn: Callable):
        batch, seq, _ = x.shape
        q = self.q_proj(x).view(batch, seq, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(batch, seq, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(batch, seq, self.n_kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if cache is not None:
            k, v = cache.append(layer, k, v)            # all cached positions of this layer
        out = attention_fn(q, k, v, causal=True, window=None, scale=None)
        return self.o_proj(out.transpose(1, 2).reshape(batch, seq, self.n_heads * self.head_dim))


class MLP(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        c, dt = config, config.dtype
        self.gate_proj = Linear(c.dim, c.hidden_dim, dt)
        self.up_proj = Linear(c.dim, c.hidden_dim, dt)
        self.down_proj = Linear(c.hidden_dim, c.dim, dt)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.self_attn = Attention(config)
        self.mlp = MLP(config)
        self.input_layernorm = RMSNorm(config.dim, config.norm_eps, config.dtype)
        self.post_attention_layernorm = RMSNorm(config.dim, config.norm_eps, config.dtype)

    def forward(self, x, cos, sin, cache, layer, attention_fn):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, cache, layer, attention_fn)
        return x + self.mlp(self.post_attention_layernorm(x))


class Backbone(nn.Module):
    """HF's ``LlamaModel``: the embedding, the layers and the final norm (named ``model``)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.embed_tokens = Embedding(config.vocab_size, config.dim, config.dtype)
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.n_layers))
        self.norm = RMSNorm(config.dim, config.norm_eps, config.dtype)


# --- the model ---------------------------------------------------------------------------------
@torch.no_grad()
def seeded_weights(model: nn.Module, seed: int) -> None:
    """The weight recipe of the module doc, for any module with this model's parameter names (the
    reference and the Hugging Face oracle draw the same weights): every parameter, in
    ``named_parameters()`` order, from ``torch.Generator().manual_seed(seed)`` in float32, then cast
    to its dtype; norm weights 1 + 0.1 N(0, 1), the embedding N(0, 1), every projection
    N(0, 1) / sqrt(fan_in)."""
    g = torch.Generator().manual_seed(seed)
    for name, p in model.named_parameters():
        draw = torch.randn(p.shape, generator=g, dtype=torch.float32)
        if name.endswith("norm.weight"):
            value = 1.0 + 0.1 * draw
        elif name == "model.embed_tokens.weight":
            value = draw
        else:
            value = draw / math.sqrt(p.shape[1])
        p.copy_(value.to(p.dtype))


class Transformer(nn.Module):
    """The decoder with seeded weights, an ``nn.Module``: ``forward(tokens, cache=None)`` -> logits
    (batch, seq, vocab_size); ``new_cache(batch, max_seq_len=None)`` -> an empty KV cache.

    ``forward(tokens, cache=None)``: ``tokens`` int (batch, seq) with ids in [0, vocab_size);
    returns float logits (batch, seq, vocab_size) in the model's dtype. With a ``cache`` (from
    :meth:`new_cache`), the new positions' K/V are appended to it and attend to everything
    cached before them; their RoPE positions start at ``cache.seq_len``. Without a cache the
    positions are 0..seq-1. Raises ValueError/TypeError naming ``tokens`` (not a 2-d integer
    tensor, empty, ids out of range, positions past ``max_seq_len``: that message names
    ``max_seq_len`` too) or ``cache`` (wrong shape or dtype, or too full for ``tokens``), leaving
    the cache unchanged.

    ``seed`` (default 0): the weights' seed (module doc); an int, else TypeError.
    ``attention``: any callable ``(q, k, v, *, causal, window, scale) -> out`` with the layout of
    :func:`reference.attention.attention`; None (the default) means that function (an
    implementation may compute it its own way: it must give its logits). It is kept out of the
    module tree, so ``state_dict()`` holds exactly HF's parameter names. A ``config`` that is not
    a ModelConfig or a non-callable ``attention`` raises TypeError naming it.
    """

    def __init__(self, config: ModelConfig, *, seed: int = 0, attention: Callable | None = None):
        super().__init__()
        if not isinstance(config, ModelConfig):
            raise TypeError(f"config must be a ModelConfig, got {type(config).__name__}")
        check_int("seed", seed)
        if attention is not None and not callable(attention):
            raise TypeError(f"attention must be callable, got {type(attention).__name__}")
        self.config = config
        self.model = Backbone(config)
        self.lm_head = Linear(config.dim, config.vocab_size, config.dtype)
        object.__setattr__(self, "attention_fn", attention or reference_attention)
        self.init_weights(seed)

    @torch.no_grad()
    def init_weights(self, seed: int) -> None:
        """Redraw every parameter from ``torch.Generator().manual_seed(seed)`` (module doc)."""
        seeded_weights(self, seed)

    @property
    def dtype(self) -> torch.dtype:
        return self.model.embed_tokens.weight.dtype

    @property
    def device(self) -> torch.device:
        return self.model.embed_tokens.weight.device

    def new_cache(self, batch: int, max_seq_len: int | None = None) -> KVCache:
        """An empty KV cache for ``batch`` sequences of up to ``max_seq_len`` (default: this
        model's ``config.max_seq_len``) tokens, in the model's dtype and device. ``batch`` and
        ``max_seq_len`` must be ints >= 1 (TypeError/ValueError naming them)."""
        c = self.config
        check_int("batch", batch, minimum=1)
        max_seq_len = c.max_seq_len if max_seq_len is None else check_int("max_seq_len", max_seq_len, minimum=1)
        return KVCache(layers=c.n_layers, batch=batch, kv_heads=c.n_kv_heads, head_dim=c.head_dim,
                       max_seq_len=max_seq_len, dtype=self.dtype, device=self.device)

    def check_inputs(self, tokens, cache) -> int:
        """Validate ``tokens`` and ``cache``; return the first new position."""
        return check_tokens_and_cache(tokens, cache, self.config, self.dtype, self.config.n_kv_heads)

    def forward(self, tokens: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        start = self.check_inputs(tokens, cache)
        positions = torch.arange(start, start + tokens.shape[1], device=tokens.device)
        cos, sin = rope_cos_sin(positions, self.config.head_dim, self.config.rope_theta, self.dtype)
        h = self.model.embed_tokens(tokens)
        for i, layer in enumerate(self.model.layers):
            h = layer(h, cos, sin, cache, i, self.attention_fn)
        return self.lm_head(self.model.norm(h))


# --- weights on disk ---------------------------------------------------------------------------
def save_weights(model: nn.Module, path) -> None:
    """Write ``model.state_dict()`` (HF names) to a safetensors file at ``path``."""
    from safetensors.torch import save_file
    tensors = {name: t.detach().contiguous().cpu() for name, t in model.state_dict().items()}
    save_file(tensors, str(path), metadata={"format": "pt"})


def load_weights(model: nn.Module, path) -> nn.Module:
    """Load a safetensors file (ours or HF ``save_pretrained``'s ``model.safetensors``) into
    ``model``, casting to its dtype. The file must hold exactly the model's parameter names with
    their shapes, else ValueError naming ``path`` and the offending names; the model is then
    unchanged. Returns ``model``."""
    from safetensors.torch import load_file
    tensors = load_file(str(path))
    own = model.state_dict()
    missing, unexpected = sorted(set(own) - set(tensors)), sorted(set(tensors) - set(own))
    if missing or unexpected:
        raise ValueError(f"path {path}: missing {missing[:5]}, unexpected {unexpected[:5]}")
    bad = [n for n in own if tuple(tensors[n].shape) != tuple(own[n].shape)]
    if bad:
        raise ValueError(f"path {path}: shape mismatch for {bad[:5]} "
                         f"(e.g. {tuple(tensors[bad[0]].shape)} vs {tuple(own[bad[0]].shape)})")
    with torch.no_grad():
        for name, t in own.items():
            t.copy_(tensors[name].to(t.dtype))
    return model


def check_tokens_and_cache(tokens, cache, c: ModelConfig, dtype: torch.dtype, kv_heads: int, whose: str = "") -> int:
    """A forward's input checks: ``tokens`` a non-empty (batch, seq) integer tensor of ids in
    [0, vocab_size); ``cache`` None or a KVCache of ``c.n_layers`` layers, the batch, ``kv_heads``
    heads (``whose`` says whose, in the message), ``c.head_dim`` and ``dtype``, one length in all
    layers and room for the tokens; the positions within ``c.max_seq_len``. Returns the first new
    position (the cache's length, or 0). TypeError / ValueError naming the argument."""
    check_tensor("tokens", tokens, ndim=2, dims="batch, seq")
    if tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:
        raise TypeError(f"tokens must be an integer tensor, got {tokens.dtype}")
    if tokens.numel() == 0:
        raise ValueError(f"tokens must be non-empty, got shape {tuple(tokens.shape)}")
    lo, hi = int(tokens.min()), int(tokens.max())
    if lo < 0 or hi >= c.vocab_size:
        raise ValueError(f"tokens: ids must be in [0, {c.vocab_size}), got values in [{lo}, {hi}]")
    start = 0
    if cache is not None:
        if not isinstance(cache, KVCache):
            raise TypeError(f"cache must be a KVCache (see new_cache), got {type(cache).__name__}")
        want = (c.n_layers, tokens.shape[0], kv_heads, c.head_dim)
        have = (cache.k.shape[0], cache.k.shape[1], cache.k.shape[2], cache.k.shape[4])
        if have != want:
            raise ValueError(f"cache: (layers, batch, kv_heads, head_dim) = {have}, expected {want}{whose}")
        if cache.k.dtype != dtype:
            raise ValueError(f"cache dtype {cache.k.dtype} != model dtype {dtype}")
        if len(set(cache.lengths)) != 1:
            raise ValueError(f"cache: layers hold different lengths {cache.lengths}")
        start = cache.seq_len
        if start + tokens.shape[1] > cache.max_seq_len:
            raise ValueError(f"cache: {tokens.shape[1]} new tokens after {start} cached exceed its "
                             f"max_seq_len={cache.max_seq_len}")
    if start + tokens.shape[1] > c.max_seq_len:
        raise ValueError(f"tokens: positions up to {start + tokens.shape[1] - 1} exceed "
                         f"max_seq_len={c.max_seq_len}")
    return start
