"""Fixes to Triton 3.6's CPU interpreter, applied once by the harness when it is active
(``TRITON_INTERPRET=1``, set by the pytest plugin when there is no GPU), so that kernel modules
contain kernels only. Both are idempotent and touch only the interpreter: native GPU runs never
see them.
"""
from __future__ import annotations

import numpy as np


def apply() -> None:
    """Install every patch (no-op without Triton)."""
    try:
        import triton  # noqa: F401
    except ImportError:  # pragma: no cover - triton is a dependency on linux x86-64
        return
    _patch_interpreter_bf16_dot()
    _patch_interpreter_nested_calls()


def _patch_interpreter_bf16_dot() -> None:
    """Triton 3.6's interpreter stores bfloat16 as raw uint16 and its ``tl.dot`` multiplies those
    integers. Widen bfloat16 tiles to float32 first (exact, as the tensor cores do), so CPU runs
    of the kernel compute what the GPU computes. Idempotent; touches only the interpreter."""
    import triton.language as tl
    from triton.runtime import interpreter as interp
    builder = interp.InterpreterBuilder
    if getattr(builder.create_dot, "_bf16_widened", False):
        return
    original = builder.create_dot

    def widen(t):
        if t.dtype.scalar != tl.bfloat16:
            return t
        data = interp._convert_float(t.data, tl.bfloat16, tl.float32, None).view(np.float32)
        return interp.TensorHandle(data, tl.float32)

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        return original(self, widen(a), widen(b), d, input_precision, max_num_imprecise_acc)

    create_dot._bf16_widened = True
    builder.create_dot = create_dot


def _patch_interpreter_nested_calls() -> None:
    """Triton 3.6's interpreter re-patches the whole ``triton.language`` namespace (an
    ``inspect.getmembers`` sweep, ~2.5 ms) on *every* call of a @triton.jit helper, although the
    launch that is running already patched it for the same globals. Skip that redundant work for
    helpers defined next to the running kernel: about a third of the interpreter's time here.
    Semantics are unchanged (the launch's own patch is the one in force and is restored by it)."""
    from triton.runtime import interpreter as interp
    if getattr(interp.GridExecutor.__call__, "_tracks_globals", False):
        return
    active: list = []
    launch = interp.GridExecutor.__call__
    device_call = interp.InterpretedFunction.__call__

    def grid_call(self, *args, **kwargs):
        active.append(self.fn.__globals__)
        try:
            return launch(self, *args, **kwargs)
        finally:
            active.pop()

    def helper_call(self, *args, **kwargs):
        if not active or self.fn.__globals__ is not active[-1]:
            return device_call(self, *args, **kwargs)
        try:
            return self.rewrite()(*args, **kwargs)
        except Exception as e:
            raise interp.InterpreterError(repr(e)) from e

    grid_call._tracks_globals = True
    interp.GridExecutor.__call__ = grid_call
    interp.InterpretedFunction.__call__ = helper_call
