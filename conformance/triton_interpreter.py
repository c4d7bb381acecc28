"""Fixes to Triton 3.6's CPU interpreter, applied once by the harness when it is active
(``TRITON_INTERPRET=1``, set by the pytest plugin when there is no GPU), so that kernel modules
contain kernels only. All are idempotent and touch only the interpreter: native GPU runs never
see them (the plugin applies them only under ``TRITON_INTERPRET=1``, and a compiled kernel never
calls the interpreter's builder).

* ``tl.dot`` (:func:`_patch_interpreter_dot`): a fixed-order dot instead of the interpreter's
  ``np.matmul``, so a kernel's bits on the CPU do not depend on the CPU's instruction set, the
  tile shape or a row's position in the tile; bfloat16 tiles widened to float32.
* nested ``@triton.jit`` calls (:func:`_patch_interpreter_nested_calls`): a third of the
  interpreter's time saved, semantics unchanged.
"""
from __future__ import annotations

import numpy as np


def apply() -> None:
    """Install every patch (no-op without Triton)."""
    try:
        import triton  # noqa: F401
    except ImportError:  # pragma: no cover - triton is a dependency on linux x86-64
        return
    _patch_interpreter_dot()
    _patch_interpreter_nested_calls()


def fixed_order_dot(a: np.ndarray, b: np.ndarray, d: np.ndarray) -> np.ndarray:
    """``d + a @ b`` over the last two axes, every element summed in ONE order: the products
    ``a[..., i, k] * b[..., k, j]`` (inputs cast to ``d``'s dtype first, each product rounded
    once) added left to right starting from the first, ``((p_0 + p_1) + p_2) + ... + p_{K-1}``,
    then that partial added to the accumulator ``d`` -- the order of the reference's
    ``fixed_order_sum`` for one block of K terms, and the shape of a tensor core's work (a tile's
    k-group summed, then added to the accumulator). Only elementwise numpy multiplies and adds
    (IEEE, correctly rounded, identical bits on every CPU and SIMD width): element (i, j) goes
    through the same roundings whatever M and N are, whatever i is, and whichever BLAS numpy
    loaded. A kernel's K loop in BLOCK_K steps therefore has bits that depend on BLOCK_K, as on a
    GPU: a block size chosen from the batch stays visible on the CPU."""
    dtype = np.asarray(d).dtype
    a = a.astype(dtype, copy=False)
    b = b.astype(dtype, copy=False)
    if a.shape[-1] == 0:
        return np.array(d, copy=True)
    part = a[..., :, 0:1] * b[..., 0:1, :]
    for k in range(1, a.shape[-1]):
        part += a[..., :, k:k + 1] * b[..., k:k + 1, :]
    return d + part


def _patch_interpreter_dot() -> None:
    """Replace the interpreter's ``tl.dot``. Upstream (triton/runtime/interpreter.py
    ``create_dot``) computes ``np.matmul(a, b, dtype=d.dtype) + d``: numpy's BLAS (OpenBLAS)
    picks its micro-kernel from the CPU (``OPENBLAS_CORETYPE``: SkylakeX vs Haswell) and from the
    rows left over in a block, so the same row's dot could differ by an ulp between CPUs and
    between its positions in a tile -- measured: row 6 of a 7-row float32 tile differs from the
    row alone under Haswell kernels, not under SkylakeX ones (.ci/portability shows it). The patched dot is
    :func:`fixed_order_dot`: bit-deterministic on every CPU, each element's order independent
    of the tile shape and of its position. It is not the GPU's order (tensor cores add an
    element's k-group in the hardware's order, float32 FMAs round once): CPU runs claim the
    kernel's determinism and invariances, not the GPU's bits.

    Inputs are converted as upstream does: FP8 tiles (stored as uint8) to float16, and bfloat16
    tiles (stored as raw uint16, which upstream's matmul would multiply as integers) widened to
    float32 (exact, as the tensor cores do), so CPU runs compute what the GPU computes up to the
    summation order. Cost: K elementwise multiply-adds of an M x N tile in place of one BLAS
    call (measured in docs/suite-power.md, "Bit-equality audit")."""
    import triton.language as tl
    from triton.runtime import interpreter as interp
    builder = interp.InterpreterBuilder
    if getattr(builder.create_dot, "_fixed_order", False):
        return

    def operand(t):
        scalar = t.dtype.scalar
        if scalar == tl.bfloat16:
            return interp._convert_float(t.data, tl.bfloat16, tl.float32, None).view(np.float32)
        if scalar.is_floating() and scalar.primitive_bitwidth == 8:
            return interp._convert_float(t.data, scalar, tl.float16, None).view(np.float16)
        return t.data

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        return interp.TensorHandle(fixed_order_dot(operand(a), operand(b), d.data), d.dtype.scalar)

    create_dot._fixed_order = True
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
