"""Hypothesis strategies for `kv_tiers`: KV blocks of every dtype with arbitrary bit patterns.

A block is random bytes viewed as the dtype, so every bit pattern can appear: NaNs with payloads
and either sign, -0.0, infinities, subnormals, bf16 and fp8 (E4M3, E5M2) codes a float32 round
trip would not keep (NaN payloads are canonicalised by conversions), every int8 / int64 value
(bools are 0 or 1). Shapes have 0 to 3 dims, 0 to 6 elements each (empty blocks included).
"""
from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

DTYPES = (torch.bfloat16, torch.float16, torch.float32, torch.float64, torch.float8_e4m3fn, torch.float8_e5m2,
          torch.int8, torch.uint8, torch.int64, torch.bool, torch.complex64)


def from_bytes(data: bytes, dtype: torch.dtype, shape: tuple) -> torch.Tensor:
    t = torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else torch.empty(0, dtype=torch.uint8)
    if dtype == torch.bool:
        t = t & 1
    return t.view(dtype).reshape(shape).clone()


@st.composite
def blocks(draw, dtypes=DTYPES, max_elements: int = 6) -> torch.Tensor:
    dtype = draw(st.sampled_from(dtypes))
    shape = tuple(draw(st.lists(st.integers(0, max_elements), max_size=3)))
    size = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    data = draw(st.binary(min_size=size, max_size=size))
    return from_bytes(data, dtype, shape)


def nan_payload_block(dtype: torch.dtype) -> torch.Tensor:
    """Bit patterns a float round trip changes: NaNs with payloads and a negative sign, -0.0, the
    largest and smallest codes (every one of the 256 codes of a one-byte float)."""
    size = torch.empty((), dtype=dtype).element_size()
    if size == 1:
        return torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dtype).clone()
    patterns = {2: [0x7FC1, 0xFFC1, 0x7E01, 0xFE01, 0x8000, 0x0001, 0x7F80, 0xFF80, 0x7BFF],
                4: [0x7FC00001, 0xFFC00001, 0x7F800001, 0x80000000, 0x00000001, 0x7F800000],
                8: [0x7FF8000000000001, 0xFFF0000000000001, 0x8000000000000000, 0x0000000000000001]}[size]
    data = b"".join(p.to_bytes(size, "little") for p in patterns)
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).view(dtype).clone()
