"""KV-cache quantisation, fast: paged decode that reads FP8/INT8 blocks and dequantises in registers.

The contract is reference/kv_quant.py's (formats, per-token-head float32 scales, the paged layout
of codes plus a parallel scale pool read through one block table, the error bound).

``quantized_paged_attention`` runs the split-KV decode kernel of optimized/paged_attention.py with
its quantised path (``QUANT``, a compile-time flag, so the float path's code is unchanged): each
tile of BLOCK_N keys loads the one-byte codes of K and V and the float32 scale of each key, converts
the codes to float16 in registers (exact: every E4M3 and every int8 value is a float16; on sm_89+
one conversion instruction per two E4M3 codes, where codes -> bfloat16 takes several, which held
the first version of this kernel to 0.77x the bf16 decode's speed on an H100), runs both dots in
float16 with float32 accumulation, and folds the scales where they cost least -- one multiply per
score and per probability instead of one per element:

    q . (c_j s_j) = (q . c_j) s_j            sum_j p_j (c_j s_j) = s_max sum_j (p_j s_j / s_max) c_j

Each row of q is scaled by a power of two into float16's range before the first dot (exact:
bfloat16's 8 significant bits fit float16's 11) and its scores scaled back; the weights
p_j s_j / s_max of the second lie in [0, 1] (s_max the tile's largest V scale), float16's range,
rounded to 11 bits where the bfloat16 weights of a bfloat16 dot keep 8. The bytes a decode step reads are ``quantized_kv_bytes``: head_dim + 4 per token-head (132 at
head_dim 128) against bf16's 2 x head_dim (256). Dispatch is paged_attention's (``kernel_supports``:
float16/bfloat16 q on a GPU, or the Triton interpreter on CPU; float8 codes need compute
capability >= 8.9), elsewhere the reference's dequantize-then-attend. ``quantize_kv``, ``dequantize_kv`` and ``quantized_kv_bytes`` are the
reference's (vectorised torch already: an engine quantises one token per step).
"""
from __future__ import annotations

import math

import torch

from optimized._device import shared_memory_per_block
from optimized.paged_attention import _paged_decode, decode_config, kernel_supports
from reference.kv_quant import check_quantized_cache, dequantize_kv, quantize_kv, quantized_kv_bytes
from reference.kv_quant import quantized_paged_attention as _reference_quantized_paged_attention
from reference.paged_attention import check_paged_attention_inputs

__all__ = ["quantize_kv", "dequantize_kv", "quantized_paged_attention", "quantized_kv_bytes"]


def quant_decode_config(head_dim: int, device: torch.device) -> dict:
    """Tiles and splits of the quantised decode. One-byte codes halve a tile's bytes, so the tile
    holds twice the keys of the bf16 decode's: 128 keys, 4 warps, 3 stages (the H100 tile sweep of
    bench/cases/kv_quant.py, ``--tag tiles``, 2026-12-07: 0.56 ms at 64 x 8192 against 1.03 ms with
    the bf16 decode's 64 / 4 / 2, bf16 itself 0.70 ms; docs/kv_quant.md), where the GPU has the
    shared memory for three stages of 128-key K and V code tiles plus the kernel's own (an Ada GPU,
    about 100 KB a block, and head_dim > 128 keep paged_attention's decode_config); the interpreter
    keeps paged_attention's small test tiles."""
    cfg = decode_config(head_dim, device)
    if device.type == "cuda" and head_dim <= 128 and shared_memory_per_block(device) >= 160 * 1024:
        cfg.update(BLOCK_N=128, num_warps=4, num_stages=3)
    return cfg


def quant_kernel_supports(q: torch.Tensor, k_cache: torch.Tensor) -> bool:
    """paged_attention's ``kernel_supports``, and for float8 codes on a GPU compute capability
    >= 8.9 (Triton converts float8e4nv on Ada/Hopper and later; an A100 takes the reference path)."""
    if not kernel_supports(q, k_cache):
        return False
    if k_cache.dtype == torch.float8_e4m3fn and q.device.type == "cuda":
        return torch.cuda.get_device_capability(q.device) >= (8, 9)
    return True


def quantized_paged_attention_unchecked(q, k_cache, v_cache, k_scale, v_scale, block_tables, seq_lens, *,
                                        lens: list[int], scale: float | None = None, window: int | None = None,
                                        config: dict | None = None, splits: int | None = None,
                                        return_lse: bool = False):
    """The kernels alone on inputs checked once already (``lens``: the host copy of ``seq_lens``),
    where ``kernel_supports(q, k_cache)``: what an engine replays in a CUDA graph and what
    bench/cases/kv_quant.py times. ``config``/``splits`` as paged_attention_unchecked's."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    decode = q.dim() == 3
    config = config or quant_decode_config(q.shape[-1], q.device)
    out, lse = _paged_decode(q.unsqueeze(1) if decode else q, k_cache, v_cache, block_tables, seq_lens, lens,
                             scale, window, config=config, splits=splits, k_scale=k_scale, v_scale=v_scale)
    if decode:
        out, lse = out[:, 0], lse[:, 0]
    return (out, lse) if return_lse else out


def quantized_paged_attention(q, k_cache, v_cache, k_scale, v_scale, block_tables, seq_lens, *,
                              scale: float | None = None, window: int | None = None, return_lse: bool = False):
    """reference.kv_quant.quantized_paged_attention, computed by the split-KV kernels (module doc)."""
    check_quantized_cache(q, k_cache, v_cache, k_scale, v_scale)
    # paged_attention's checks of q, tables, lengths, window and scale, on a stand-in cache of q's
    # dtype with the codes' shape (the checks read shapes only; expand allocates nothing)
    stand_in = q.new_zeros(()).expand(k_cache.shape)
    lens = check_paged_attention_inputs(q, stand_in, stand_in, block_tables, seq_lens, window, scale)
    if not quant_kernel_supports(q, k_cache) or q.numel() == 0:
        return _reference_quantized_paged_attention(q, k_cache, v_cache, k_scale, v_scale, block_tables, seq_lens,
                                                    scale=scale, window=window, return_lse=return_lse)
    return quantized_paged_attention_unchecked(q, k_cache, v_cache, k_scale, v_scale, block_tables, seq_lens,
                                               lens=lens, scale=scale, window=window, return_lse=return_lse)
