"""Bad input of every contract name: the error type and the argument its message names; a
rejected call changes none of its tensors."""
from __future__ import annotations

import math

import torch

from conformance.badinput import Bad, assert_rejects, bad_cases, set_entry

X = torch.tensor([0.5, -1.0, 3.0])

ENCODE_VALID = dict(x=X, fmt="fp8_e4m3")
ENCODE_BAD = [
    Bad("x is a list", dict(x=[0.5, 1.0]), TypeError, ("x",)),
    Bad("x is a float", dict(x=0.5), TypeError, ("x",)),
    Bad("x is int32", dict(x=torch.tensor([1, 2], dtype=torch.int32)), TypeError, ("x",)),
    Bad("x is bool", dict(x=torch.tensor([True])), TypeError, ("x",)),
    Bad("x is complex", dict(x=torch.tensor([1j])), TypeError, ("x",)),
    Bad("x is float8", dict(x=X.to(torch.float8_e4m3fn)), TypeError, ("x",)),
    Bad("NaN into int8", dict(x=torch.tensor([1.0, math.nan]), fmt="int8"), ValueError, ("x",)),
    Bad("NaN into int4", dict(x=torch.tensor([math.nan]), fmt="int4"), ValueError, ("x",)),
    Bad("NaN into fp4_e2m1", dict(x=torch.tensor([0.0, 1.0, -math.nan]), fmt="fp4_e2m1"), ValueError, ("x",)),
    Bad("NaN into fp4 saturating", dict(x=torch.tensor([math.nan]), fmt="fp4_e2m1", saturate=True), ValueError, ("x",)),
    Bad("fmt None", dict(fmt=None), TypeError, ("fmt",)),
    Bad("fmt torch dtype", dict(fmt=torch.float8_e4m3fn), TypeError, ("fmt",)),
    Bad("fmt unknown", dict(fmt="fp8"), ValueError, ("fmt",)),
    Bad("fmt e4m3fnuz", dict(fmt="fp8_e4m3fnuz"), ValueError, ("fmt",)),
    Bad("fmt block format", dict(fmt="mxfp4"), ValueError, ("fmt",)),
    Bad("fmt upper case", dict(fmt="BF16"), ValueError, ("fmt",)),
    Bad("saturate int", dict(saturate=1), TypeError, ("saturate",)),
    Bad("saturate None", dict(saturate=None), TypeError, ("saturate",)),
    Bad("saturate str", dict(saturate="yes"), TypeError, ("saturate",)),
]


@bad_cases(ENCODE_BAD)
def test_encode_rejects_bad_input(impl, bad):
    assert_rejects(impl.get("encode"), ENCODE_VALID, bad)


CODES = torch.tensor([0, 7, 255], dtype=torch.uint8)
DECODE_VALID = dict(codes=CODES, fmt="fp8_e4m3")
DECODE_BAD = [
    Bad("codes is a list", dict(codes=[0, 1]), TypeError, ("codes",)),
    Bad("codes float", dict(codes=torch.tensor([0.0, 1.0])), TypeError, ("codes",)),
    Bad("codes bool", dict(codes=torch.tensor([True, False])), TypeError, ("codes",)),
    Bad("code 256 for fp8", dict(codes=torch.tensor([0, 256])), ValueError, ("codes",)),
    Bad("negative code", dict(codes=torch.tensor([-1, 3])), ValueError, ("codes",)),
    Bad("negative int8 code", dict(codes=torch.tensor([5, -128], dtype=torch.int8)), ValueError, ("codes",)),
    Bad("code 16 for fp4", dict(codes=torch.tensor([3, 16]), fmt="fp4_e2m1"), ValueError, ("codes",)),
    Bad("code 16 uint8 for int4", dict(codes=torch.tensor([16], dtype=torch.uint8), fmt="int4"), ValueError, ("codes",)),
    Bad("code 65536 for bf16", dict(codes=torch.tensor([65536]), fmt="bf16"), ValueError, ("codes",)),
    Bad("fmt unknown", dict(fmt="fp8_e3m4"), ValueError, ("fmt",)),
    Bad("fmt int", dict(fmt=8), TypeError, ("fmt",)),
    Bad("dtype float16", dict(dtype=torch.float16), ValueError, ("dtype",)),
    Bad("dtype bfloat16", dict(dtype=torch.bfloat16), ValueError, ("dtype",)),
    Bad("dtype int64", dict(dtype=torch.int64), ValueError, ("dtype",)),
    Bad("dtype str", dict(dtype="float64"), TypeError, ("dtype",)),
]


@bad_cases(DECODE_BAD)
def test_decode_rejects_bad_input(impl, bad):
    assert_rejects(impl.get("decode"), DECODE_VALID, bad)


REPR_BAD = [
    Bad("fmt unknown", dict(fmt="fp6_e3m2"), ValueError, ("fmt",)),
    Bad("fmt block format", dict(fmt="nvfp4"), ValueError, ("fmt",)),
    Bad("fmt None", dict(fmt=None), TypeError, ("fmt",)),
]


@bad_cases(REPR_BAD)
def test_representable_rejects_bad_input(impl, bad):
    assert_rejects(impl.get("representable"), dict(fmt="fp4_e2m1"), bad)


XB = torch.linspace(-3, 3, 64).reshape(2, 32)
QB_VALID = dict(x=XB, fmt="mxfp4")
QB_BAD = [
    Bad("x is a list", dict(x=[[1.0] * 32]), TypeError, ("x",)),
    Bad("x int", dict(x=torch.ones(1, 32, dtype=torch.int32)), TypeError, ("x",)),
    Bad("x 0-d", dict(x=torch.tensor(1.0)), ValueError, ("x",)),
    Bad("x last dim 31", dict(x=torch.ones(2, 31)), ValueError, ("x",)),
    Bad("x last dim 48 for mx", dict(x=torch.ones(48)), ValueError, ("x",)),
    Bad("x last dim 8 for nvfp4", dict(x=torch.ones(8), fmt="nvfp4"), ValueError, ("x",)),
    Bad("x last dim 33 for nvfp4", dict(x=torch.ones(3, 33), fmt="nvfp4"), ValueError, ("x",)),
    Bad("NaN for nvfp4", dict(x=torch.ones(16).index_fill(0, torch.tensor([3]), math.nan), fmt="nvfp4"), ValueError, ("x",)),
    Bad("Inf for nvfp4", dict(x=torch.ones(16).index_fill(0, torch.tensor([15]), -math.inf), fmt="nvfp4"), ValueError, ("x",)),
    Bad("float64 amax beyond a float32 scale", dict(x=torch.full((16,), 1e300, dtype=torch.float64), fmt="nvfp4"), ValueError, ("x",)),
    Bad("fmt element format", dict(fmt="fp4_e2m1"), ValueError, ("fmt",)),
    Bad("fmt unknown", dict(fmt="mxfp6"), ValueError, ("fmt",)),
    Bad("fmt None", dict(fmt=None), TypeError, ("fmt",)),
    Bad("tensor_scale for mx", dict(tensor_scale=1.0), ValueError, ("tensor_scale",)),
    Bad("tensor_scale zero", dict(fmt="nvfp4", x=torch.ones(16), tensor_scale=0.0), ValueError, ("tensor_scale",)),
    Bad("tensor_scale negative", dict(fmt="nvfp4", x=torch.ones(16), tensor_scale=-1.0), ValueError, ("tensor_scale",)),
    Bad("tensor_scale inf", dict(fmt="nvfp4", x=torch.ones(16), tensor_scale=math.inf), ValueError, ("tensor_scale",)),
    Bad("tensor_scale nan", dict(fmt="nvfp4", x=torch.ones(16), tensor_scale=math.nan), ValueError, ("tensor_scale",)),
    Bad("tensor_scale underflows float32", dict(fmt="nvfp4", x=torch.ones(16), tensor_scale=1e-50), ValueError, ("tensor_scale",)),
    Bad("tensor_scale overflows float32", dict(fmt="nvfp4", x=torch.ones(16), tensor_scale=1e39), ValueError, ("tensor_scale",)),
    Bad("tensor_scale str", dict(fmt="nvfp4", x=torch.ones(16), tensor_scale="1"), TypeError, ("tensor_scale",)),
    Bad("tensor_scale bool", dict(fmt="nvfp4", x=torch.ones(16), tensor_scale=True), TypeError, ("tensor_scale",)),
]


@bad_cases(QB_BAD)
def test_quantize_blocks_rejects_bad_input(impl, bad):
    assert_rejects(impl.get("quantize_blocks"), QB_VALID, bad)


DQ_VALID = lambda: dict(codes=torch.zeros(2, 32, dtype=torch.uint8), scales=torch.full((2, 1), 127, dtype=torch.uint8),  # noqa: E731
                        tensor_scale=1.0, fmt="mxfp4")
DQ_BAD = [
    Bad("codes float", dict(codes=torch.zeros(2, 32)), TypeError, ("codes",)),
    Bad("codes out of range for fp4", set_entry("codes", (0, 3), 16), ValueError, ("codes",)),
    Bad("codes last dim 31", dict(codes=torch.zeros(2, 31, dtype=torch.uint8)), ValueError, ("codes",)),
    Bad("codes 0-d", dict(codes=torch.tensor(0, dtype=torch.uint8), scales=torch.tensor(127, dtype=torch.uint8)), ValueError, ("codes",)),
    Bad("scales float", dict(scales=torch.ones(2, 1)), TypeError, ("scales",)),
    Bad("scales negative", dict(scales=torch.tensor([[127], [-1]])), ValueError, ("scales",)),
    Bad("scales too many blocks", dict(scales=torch.full((2, 2), 127, dtype=torch.uint8)), ValueError, ("scales",)),
    Bad("scales wrong rank", dict(scales=torch.full((2,), 127, dtype=torch.uint8)), ValueError, ("scales",)),
    Bad("scales list", dict(scales=[[127], [127]]), TypeError, ("scales",)),
    Bad("tensor_scale zero", dict(tensor_scale=0.0), ValueError, ("tensor_scale",)),
    Bad("tensor_scale negative", dict(tensor_scale=-2.0), ValueError, ("tensor_scale",)),
    Bad("tensor_scale nan", dict(tensor_scale=math.nan), ValueError, ("tensor_scale",)),
    Bad("tensor_scale inf", dict(tensor_scale=math.inf), ValueError, ("tensor_scale",)),
    Bad("tensor_scale None", dict(tensor_scale=None), TypeError, ("tensor_scale",)),
    Bad("tensor_scale 1-d tensor", dict(tensor_scale=torch.ones(1)), TypeError, ("tensor_scale",)),
    Bad("tensor_scale int tensor", dict(tensor_scale=torch.tensor(1)), TypeError, ("tensor_scale",)),
    Bad("fmt element format", dict(fmt="fp8_e4m3"), ValueError, ("fmt",)),
    Bad("fmt None", dict(fmt=None), TypeError, ("fmt",)),
    Bad("dtype float16", dict(dtype=torch.float16), ValueError, ("dtype",)),
    Bad("dtype str", dict(dtype="float32"), TypeError, ("dtype",)),
]


@bad_cases(DQ_BAD)
def test_dequantize_blocks_rejects_bad_input(impl, bad):
    assert_rejects(impl.get("dequantize_blocks"), DQ_VALID, bad)
