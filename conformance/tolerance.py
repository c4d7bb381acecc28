"""The numerical tolerance rule of docs/design.md, in one place.

An implementation's output is compared to an *oracle* computed in float64. Its max abs error may
be at most ``factor`` times the error of the *reference run in the same low precision*, plus the
rounding floor of the dtype (FlashAttention's test rule: factor 2 for outputs, 3 for gradients).
A fixed ``atol=1e-2`` is never used: it is too loose for fp32 and too tight for long bf16 sums.

Before any number is compared, the output's kind is checked (:func:`check_kind`): a torch.Tensor
(not a numpy array), on the expected device (not ``meta``), of the expected dtype and shape.

The rounding floor follows FlashAttention's tests: two ulps of the dtype at the magnitude of the
values (plus 0.3, so that values near 0 still get a floor).
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import torch


def rounding_floor(oracle: torch.Tensor, dtype: torch.dtype) -> float:
    """Two ulps of ``dtype`` at the magnitude ``max|oracle| + 0.3`` (0 for float64).

    FlashAttention's tests measure this as ``((o + 0.3) - 0.3 - o).abs().max()`` in the low
    dtype; that is 0 when every value happens to be exactly representable (e.g. 0.625), so the
    ulp is computed directly: ``eps(dtype) * 2**floor(log2(x))``."""
    if dtype == torch.float64:
        return 0.0
    finite = oracle[torch.isfinite(oracle)]
    if finite.numel() == 0:
        return 0.0
    x = float(finite.abs().max()) + 0.3
    return 2.0 * torch.finfo(dtype).eps * 2.0 ** math.floor(math.log2(x))


def describe(value: Any) -> str:
    """Short description of an input for failure messages (shape/dtype for tensors)."""
    if isinstance(value, torch.Tensor):
        return f"tensor{tuple(value.shape)} {str(value.dtype).removeprefix('torch.')} on {value.device.type}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _max_err(x: torch.Tensor, oracle: torch.Tensor) -> tuple[float, tuple[int, ...] | None]:
    diff = (x.detach().to('cpu', torch.float64) - oracle.detach().to('cpu', torch.float64)).abs()
    diff = torch.where(torch.isfinite(oracle), diff, torch.zeros_like(diff))
    diff = torch.nan_to_num(diff, nan=float("inf"))
    if diff.numel() == 0:
        return 0.0, None
    flat = int(torch.argmax(diff))
    idx = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), diff.shape))
    return float(diff.reshape(-1)[flat]), idx


class ToleranceError(AssertionError):
    pass


def _kind(value: Any) -> str:
    t = type(value)
    module = t.__module__.split(".")[0]
    return t.__qualname__ if module == "builtins" else f"{module}.{t.__qualname__}"


def check_kind(actual: Any, expected: torch.Tensor, name: str = "output", ctx: str = "") -> None:
    """Before any numerical comparison: ``actual`` is a torch.Tensor on ``expected``'s device with
    its dtype and shape; each mismatch is named ("wrong device: got meta, expected cpu"), so that a
    numpy array, a meta tensor or a float64 result never fails deep inside a comparison."""
    tail = f"\n{ctx}" if ctx else ""
    if not isinstance(actual, torch.Tensor):
        hint = " (numpy instead of a tensor)" if type(actual).__module__.split(".")[0] == "numpy" else ""
        raise ToleranceError(f"{name}: wrong type: got {_kind(actual)}{hint}, expected torch.Tensor{tail}")
    if actual.device != expected.device:
        got = actual.device.type if actual.device.index is None else str(actual.device)
        want = expected.device.type if expected.device.index is None else str(expected.device)
        raise ToleranceError(f"{name}: wrong device: got {got}, expected {want}{tail}")
    if actual.dtype != expected.dtype:
        raise ToleranceError(f"{name}: wrong dtype: got {str(actual.dtype).removeprefix('torch.')}, "
                             f"expected {str(expected.dtype).removeprefix('torch.')}{tail}")
    if actual.shape != expected.shape:
        raise ToleranceError(f"{name}: wrong shape: got {tuple(actual.shape)}, expected {tuple(expected.shape)}{tail}")


def assert_close_to_oracle(
    actual: torch.Tensor,
    reference: torch.Tensor,
    oracle: torch.Tensor,
    *,
    factor: float = 2.0,
    name: str = "output",
    inputs: Mapping[str, Any] | None = None,
    floor_from: torch.Tensor | None = None,
) -> None:
    """Assert ``actual`` is as close to ``oracle`` as the tolerance rule allows.

    Args:
        actual: the implementation's output, in the low precision under test.
        reference: the reference implementation's output on the same low-precision inputs.
        oracle: the same quantity computed in float64 (its non-finite entries, e.g. ``lse = -inf``
            on fully masked rows, must be matched exactly).
        factor: 2 for forward outputs, 3 for gradients.
        name: what is compared, for the message.
        inputs: the inputs, shown (shapes and dtypes) on failure.
        floor_from: take the rounding floor at the magnitude of this float64 tensor instead of
            the oracle's. For gradients that are exactly 0 in exact arithmetic (a query that sees
            a single key has dq = 0) but are computed as a difference of float32 sums (FA-2's
            dP - delta): pass the oracle of all gradients of the same call.
    """
    inputs = inputs or {}
    ctx = "\n".join(f"    {k}: {describe(v)}" for k, v in inputs.items())
    check_kind(actual, reference, name, ctx)
    if actual.shape != oracle.shape:
        raise ToleranceError(f"{name}: wrong shape: got {tuple(actual.shape)}, expected {tuple(oracle.shape)}\n{ctx}")
    a64 = actual.detach().to("cpu", torch.float64)
    o64 = oracle.detach().to("cpu", torch.float64)
    r64 = reference.detach().to("cpu", torch.float64)
    nonfinite = ~torch.isfinite(o64)
    if nonfinite.any():
        same = (a64[nonfinite] == o64[nonfinite]) | (a64[nonfinite].isnan() & o64[nonfinite].isnan())
        if not bool(same.all()):
            bad = nonfinite.nonzero()[(~same).nonzero()[0, 0]].tolist()
            raise ToleranceError(
                f"{name}: at {tuple(bad)} expected {float(o64[tuple(bad)])} (non-finite, exact), "
                f"got {float(a64[tuple(bad)])}\n{ctx}")
    bad_nan = torch.isfinite(o64) & ~torch.isfinite(a64)
    if bad_nan.any():
        idx = tuple(bad_nan.nonzero()[0].tolist())
        raise ToleranceError(f"{name}: non-finite value {float(a64[idx])} at {idx} where the oracle is "
                             f"{float(o64[idx])}\n{ctx}")
    err_impl, worst = _max_err(a64, o64)
    err_ref, _ = _max_err(r64, o64)
    floor = rounding_floor(o64 if floor_from is None else floor_from.detach().to("cpu", torch.float64),
                           actual.dtype)
    bound = factor * err_ref + floor
    if err_impl > bound:
        raise ToleranceError(
            f"{name}: max abs error vs float64 oracle {err_impl:.3e} > bound {bound:.3e}\n"
            f"    = {factor:g} x reference's own {str(actual.dtype).removeprefix('torch.')} error {err_ref:.3e}"
            f" + rounding floor {floor:.3e}\n"
            f"    worst index {worst}: got {float(a64[worst]):.6g}, oracle {float(o64[worst]):.6g}, "
            f"reference {float(r64[worst]):.6g}\n"
            f"  inputs:\n{ctx}")


def assert_metamorphic(
    a: torch.Tensor,
    b: torch.Tensor,
    reference: torch.Tensor,
    oracle: torch.Tensor,
    *,
    factor: float = 4.0,
    name: str = "relation",
    inputs: Mapping[str, Any] | None = None,
) -> None:
    """Assert two low-precision results that must be equal in exact arithmetic (a metamorphic
    relation: permuted keys, GQA vs repeated heads, chunked vs whole) agree up to rounding.

    Each side may be ``2 x`` the reference's own error away from the truth, so by the triangle
    inequality ``|a - b| <= 4 x err_ref + floor``. The float64 ``oracle`` only sets that scale.
    """
    ctx = "\n".join(f"    {k}: {describe(v)}" for k, v in (inputs or {}).items())
    check_kind(a, reference, f"{name} (first side)", ctx)
    check_kind(b, reference, f"{name} (second side)", ctx)
    a64, b64 = a.detach().to("cpu", torch.float64), b.detach().to("cpu", torch.float64)
    o64 = oracle.detach().to("cpu", torch.float64)
    if not torch.equal(torch.isfinite(a64), torch.isfinite(b64)):
        raise ToleranceError(f"{name}: the two sides differ in where they are finite\n{ctx}")
    finite = torch.isfinite(a64)
    if not torch.equal(a64[~finite], b64[~finite]):
        raise ToleranceError(f"{name}: the two sides differ at non-finite entries\n{ctx}")
    err_ref, _ = _max_err(reference, o64)
    diff = torch.where(finite, (a64 - b64).abs(), torch.zeros_like(a64))
    floor = rounding_floor(o64, a.dtype)
    bound = factor * err_ref + floor
    worst = float(diff.max()) if diff.numel() else 0.0
    if worst > bound:
        idx = tuple(int(i) for i in torch.unravel_index(diff.argmax(), diff.shape))
        raise ToleranceError(
            f"{name}: the two sides differ by {worst:.3e} > bound {bound:.3e} "
            f"(= {factor:g} x reference's own error {err_ref:.3e} + floor {floor:.3e})\n"
            f"    worst index {idx}: {float(a64[idx]):.6g} vs {float(b64[idx]):.6g}\n  inputs:\n{ctx}")
