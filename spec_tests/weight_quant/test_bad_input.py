"""Bad input: every contract function rejects malformed arguments with TypeError (wrong kind) or
ValueError (illegal value) whose message names the argument, before computing anything and without
modifying an argument (conformance/badinput.py)."""
from __future__ import annotations

import math

import pytest
import torch

from conformance.badinput import Bad, assert_rejects, assert_rejects_without_data, bad_cases, set_entry


def _w():
    return torch.randn(4, 64, generator=torch.Generator().manual_seed(0))


def _set(t, index, value):
    t = t.clone()
    t[index] = value
    return t


def _with(**changes):
    return lambda kw: {**kw, **{k: f(kw) for k, f in changes.items()}}


QUANTIZE_BAD = [
    Bad("w not a tensor", _with(w=lambda kw: kw["w"].tolist()), TypeError, ("w",)),
    Bad("w rank 1", _with(w=lambda kw: kw["w"][0]), ValueError, ("w",)),
    Bad("w rank 3", _with(w=lambda kw: kw["w"][None]), ValueError, ("w",)),
    Bad("integer w", _with(w=lambda kw: kw["w"].long()), TypeError, ("w",)),
    Bad("NaN in w", set_entry("w", (1, 5), math.nan), ValueError, ("w",)),
    Bad("inf in w", set_entry("w", (3, 63), -math.inf), ValueError, ("w",)),
    Bad("one weight past float32", _with(w=lambda kw: _set(kw["w"].double(), (2, 9), 1e300)), ValueError, ("w",)),
    Bad("no columns", _with(w=lambda kw: kw["w"][:, :0]), ValueError, ("w",)),
    Bad("bits 3", dict(bits=3), ValueError, ("bits",)),
    Bad("bits 16", dict(bits=16), ValueError, ("bits",)),
    Bad("float bits", dict(bits=4.0), TypeError, ("bits",)),
    Bad("bool bits", dict(bits=True), TypeError, ("bits",)),
    Bad("group_size 0", dict(group_size=0), ValueError, ("group_size",)),
    Bad("negative group_size", dict(group_size=-1), ValueError, ("group_size",)),
    Bad("group_size does not divide", dict(group_size=24), ValueError, ("group_size",)),
    Bad("group_size larger than in_features", dict(group_size=128), ValueError, ("group_size",)),
    Bad("float group_size", dict(group_size=32.0), TypeError, ("group_size",)),
    Bad("symmetric not a bool", dict(symmetric=1), TypeError, ("symmetric",)),
]


@bad_cases(QUANTIZE_BAD)
def test_quantize_rejects_bad_input(impl, bad):
    """quantize: w a finite float (out, in) tensor with a column, bits 4 or 8, group_size a
    positive int dividing in_features (or None), symmetric a bool."""
    assert_rejects(impl.get("quantize"), lambda: dict(w=_w(), bits=4, group_size=32, symmetric=True), bad)


GPTQ_BAD = [b for b in QUANTIZE_BAD if b.id in ("w rank 1", "integer w", "NaN in w", "bits 3", "group_size 0",
                                                "group_size does not divide", "symmetric not a bool")] + [
    Bad("x not a tensor", _with(x=lambda kw: kw["x"].tolist()), TypeError, ("x",)),
    Bad("integer x", _with(x=lambda kw: kw["x"].long()), TypeError, ("x",)),
    Bad("x rank 1", _with(x=lambda kw: kw["x"][0]), ValueError, ("x",)),
    Bad("x in_features differ", _with(x=lambda kw: kw["x"][:, :32]), ValueError, ("x",)),
    Bad("NaN in x", set_entry("x", (2, 7), math.nan), ValueError, ("x",)),
    Bad("negative damp", dict(damp=-0.01), ValueError, ("damp",)),
    Bad("nan damp", dict(damp=math.nan), ValueError, ("damp",)),
    Bad("string damp", dict(damp="0.01"), TypeError, ("damp",)),
    Bad("damp 0, fewer inputs than columns", _with(x=lambda kw: kw["x"][:8], damp=lambda kw: 0.0), ValueError,
        ("damp",)),
]


@bad_cases(GPTQ_BAD)
def test_gptq_rejects_bad_input(impl, bad):
    """gptq: quantize's checks, x float (..., in_features) finite, damp a real >= 0 that makes
    H + λI positive definite (damp 0 with 8 inputs for 64 columns does not)."""
    def valid():
        return dict(w=_w(), x=torch.randn(32, 64, generator=torch.Generator().manual_seed(1)), bits=4,
                    group_size=32, symmetric=True, damp=0.01)
    assert_rejects(impl.get("gptq"), valid, bad)


def _q():
    g = torch.Generator().manual_seed(2)
    codes = torch.randint(0, 16, (4, 64), generator=g).to(torch.uint8)
    return dict(codes=codes, scales=torch.rand(4, 2, generator=g) + 0.1,
                zeros=torch.randint(0, 16, (4, 2), generator=g).to(torch.uint8))


DEQUANTIZE_BAD = [
    Bad("int32 codes", _with(codes=lambda kw: kw["codes"].int()), TypeError, ("codes",)),
    Bad("codes rank 1", _with(codes=lambda kw: kw["codes"][0]), ValueError, ("codes",)),
    Bad("integer scales", _with(scales=lambda kw: kw["scales"].long()), TypeError, ("scales",)),
    Bad("float zeros", _with(zeros=lambda kw: kw["zeros"].float()), TypeError, ("zeros",)),
    Bad("scales rows differ", _with(scales=lambda kw: kw["scales"][:3], zeros=lambda kw: kw["zeros"][:3]),
        ValueError, ("scales",)),
    Bad("zeros shape differs", _with(zeros=lambda kw: kw["zeros"][:, :1]), ValueError, ("zeros",)),
    Bad("groups do not divide", _with(scales=lambda kw: torch.ones(4, 3), zeros=lambda kw: torch.zeros(4, 3, dtype=torch.uint8)),
        ValueError, ("scales",)),
    Bad("no groups", _with(scales=lambda kw: kw["scales"][:, :0], zeros=lambda kw: kw["zeros"][:, :0]),
        ValueError, ("scales",)),
]


@bad_cases(DEQUANTIZE_BAD)
def test_dequantize_rejects_bad_input(impl, bad):
    """dequantize: codes and zeros uint8, scales floating, (out, groups) shapes, groups dividing in."""
    assert_rejects(impl.get("dequantize"), _q, bad)


PACK_BAD = [
    Bad("codes not a tensor", dict(codes=[1, 2]), TypeError, ("codes",)),
    Bad("int64 codes", dict(codes=torch.tensor([1, 2])), TypeError, ("codes",)),
    Bad("odd last dimension", dict(codes=torch.zeros(2, 3, dtype=torch.uint8)), ValueError, ("codes",)),
    Bad("rank 0", dict(codes=torch.tensor(3, dtype=torch.uint8)), ValueError, ("codes",)),
    Bad("a code of 16", dict(codes=torch.tensor([[1, 16]], dtype=torch.uint8)), ValueError, ("codes",)),
]


@bad_cases(PACK_BAD)
def test_pack_rejects_bad_input(impl, bad):
    """pack_int4: uint8 codes, rank >= 1, an even last dimension, every value <= 15."""
    assert_rejects(impl.get("pack_int4"), dict(codes=torch.zeros(2, 4, dtype=torch.uint8)), bad)


UNPACK_BAD = [
    Bad("packed not a tensor", dict(packed=[1, 2]), TypeError, ("packed",)),
    Bad("int32 packed", dict(packed=torch.tensor([1, 2], dtype=torch.int32)), TypeError, ("packed",)),
    Bad("rank 0", dict(packed=torch.tensor(3, dtype=torch.uint8)), ValueError, ("packed",)),
]


@bad_cases(UNPACK_BAD)
def test_unpack_rejects_bad_input(impl, bad):
    """unpack_int4: uint8 of rank >= 1."""
    assert_rejects(impl.get("unpack_int4"), dict(packed=torch.zeros(2, 4, dtype=torch.uint8)), bad)


def _mm():
    q = _q()
    return dict(x=torch.randn(3, 64, generator=torch.Generator().manual_seed(4)).to(torch.bfloat16),
                qweight=q["codes"][:, :32].contiguous(), scales=q["scales"], zeros=q["zeros"])


MATMUL_BAD = [
    Bad("x not a tensor", _with(x=lambda kw: kw["x"].tolist()), TypeError, ("x",)),
    Bad("integer x", _with(x=lambda kw: kw["x"].long()), TypeError, ("x",)),
    Bad("x rank 0", _with(x=lambda kw: kw["x"][0, 0]), ValueError, ("x",)),
    Bad("x in_features != 2 x packed", _with(x=lambda kw: kw["x"][:, :32]), ValueError, ("x", "qweight")),
    Bad("int32 qweight", _with(qweight=lambda kw: kw["qweight"].int()), TypeError, ("qweight",)),
    Bad("qweight rank 1", _with(qweight=lambda kw: kw["qweight"][0]), ValueError, ("qweight",)),
    Bad("integer scales", _with(scales=lambda kw: kw["scales"].long()), TypeError, ("scales",)),
    Bad("scales rank 1", _with(scales=lambda kw: kw["scales"][0]), ValueError, ("scales",)),
    Bad("float zeros", _with(zeros=lambda kw: kw["zeros"].float()), TypeError, ("zeros",)),
    Bad("scales rows != out_features", _with(scales=lambda kw: kw["scales"][:2], zeros=lambda kw: kw["zeros"][:2]),
        ValueError, ("scales",)),
    Bad("zeros shape differs", _with(zeros=lambda kw: kw["zeros"][:, :1]), ValueError, ("zeros",)),
    Bad("groups do not divide in_features", _with(scales=lambda kw: torch.ones(4, 3),
                                                  zeros=lambda kw: torch.zeros(4, 3, dtype=torch.uint8)),
        ValueError, ("scales",)),
]


@bad_cases(MATMUL_BAD)
def test_w4a16_matmul_rejects_bad_input(impl, bad):
    """w4a16_matmul: x float (..., in), qweight uint8 (out, in / 2), scales float and zeros uint8
    (out, groups), groups dividing in."""
    assert_rejects(impl.get("w4a16_matmul"), _mm, bad)


ANOTHER_DEVICE = [
    Bad("qweight on another device", _with(qweight=lambda kw: kw["qweight"].to("meta")), ValueError, ("qweight",)),
    Bad("scales on another device", _with(scales=lambda kw: kw["scales"].to("meta")), ValueError, ("scales",)),
    Bad("zeros on another device", _with(zeros=lambda kw: kw["zeros"].to("meta")), ValueError, ("zeros",)),
]


# Not a "bad" table: its rows hold meta tensors, which assert_rejects' no-change check cannot read
# (conformance/docs.py CALLS names its call, as for paged_attention's).
@pytest.mark.parametrize("moved", ANOTHER_DEVICE, ids=[b.id for b in ANOTHER_DEVICE])
def test_w4a16_rejects_arguments_on_another_device(impl, moved):
    """qweight, scales or zeros on another device than x ("meta": no data) raise ValueError naming it."""
    assert_rejects_without_data(impl.get("w4a16_matmul"), moved.apply(_mm()), moved)
