"""Argument checks and dtype rules shared by every reference module (not a concept).

Every contract function rejects malformed input with ``TypeError`` (wrong kind of value) or
``ValueError`` (right kind, illegal value), and the message starts with the argument's name, so a
caller can tell which argument was wrong. Checks run before any state changes.
"""
from __future__ import annotations

import math
from numbers import Real

import torch

# The floating dtypes a tensor argument may have, and the dtype arithmetic happens in:
# float64 stays float64, every lower precision accumulates in float32.
FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The accumulation dtype for inputs of ``dtype``: float64 for float64, else float32."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def is_int(value) -> bool:
    """A Python int that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_real(value) -> bool:
    """A real number (int, float, numpy scalar) that is not a bool."""
    return isinstance(value, Real) and not isinstance(value, bool)


def check_int(name: str, value, *, minimum: int | None = None, allow_none: bool = False) -> int | None:
    """``value`` as an int >= ``minimum``; ``TypeError`` / ``ValueError`` naming ``name``."""
    if value is None and allow_none:
        return None
    if not is_int(value):
        raise TypeError(f"{name} must be an int{' or None' if allow_none else ''}, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def check_real(name: str, value, *, minimum: float | None = None, maximum: float | None = None,
               allow_none: bool = False) -> float | None:
    """``value`` as a finite float in [minimum, maximum]; ``TypeError`` / ``ValueError`` naming it."""
    if value is None and allow_none:
        return None
    if not is_real(value):
        raise TypeError(f"{name} must be a real number{' or None' if allow_none else ''}, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        lo = "-inf" if minimum is None else f"{minimum:g}"
        hi = "inf" if maximum is None else f"{maximum:g}"
        raise ValueError(f"{name} must be in [{lo}, {hi}], got {value}")
    return value


def check_tensor(name: str, value, *, ndim: int | None = None, dims: str = "",
                 dtypes: tuple[torch.dtype, ...] | None = None) -> torch.Tensor:
    """``value`` is a tensor of rank ``ndim`` (``dims`` names its axes in the message) with a dtype
    in ``dtypes``; ``TypeError`` / ``ValueError`` naming ``name``."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if ndim is not None and value.dim() != ndim:
        axes = f" ({dims})" if dims else ""
        raise ValueError(f"{name} must have rank {ndim}{axes}, got shape {tuple(value.shape)}")
    if dtypes is not None and value.dtype not in dtypes:
        names = "/".join(str(d).removeprefix("torch.") for d in dtypes)
        raise TypeError(f"{name} must have dtype {names}, got {value.dtype}")
    return value


def check_as_planned(name: str, t, planned: tuple, dims: str = "") -> None:
    """A plan's run (plan once, run many): ``t`` has the planned ``(shape, dtype, device)``.
    TypeError (not a tensor, another dtype) or ValueError (another shape or device) naming
    ``name``; host-side metadata only, no value is read. ``dims`` names the shape's axes."""
    shape, dtype, device = planned
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype != dtype:
        raise TypeError(f"{name} must have the planned dtype {dtype}, got {t.dtype} (plan again)")
    if tuple(t.shape) != shape:
        named = f"({dims}) = {shape}" if dims else f"{shape}"
        raise ValueError(f"{name} must have the planned shape {named}, got {tuple(t.shape)} (plan again)")
    if t.device != device:
        raise ValueError(f"{name} must be on the planned device {device}, got {t.device} (plan again)")
