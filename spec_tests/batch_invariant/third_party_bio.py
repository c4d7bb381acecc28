"""A wrapped third-party engine for `batch_invariant`: thinking-machines-lab's batch_invariant_ops
(``batch_invariant_ops/batch_invariant_ops.py`` at the commit in ``UPSTREAM``), the kernels of
"Defeating Nondeterminism in LLM Inference". Its code is fetched, never copied here: it is
loaded, unmodified, from ``conformance.upstream.locate`` (``.upstream/`` of the checkout;
``inferspec upstream`` fetches it), and this module raises ``conformance.upstream.Unavailable``
at import when the file is absent. No stub modules: upstream imports only torch and triton.

What it provides and what this file maps it to:

* ``matmul(a, b)``: upstream's ``matmul_persistent`` (a persistent Triton matmul, one tile
  configuration per dtype, no split-K: the K loop's order does not depend on M).
* ``log_softmax(x)``: upstream's ``log_softmax`` (one Triton program per row, chunks of 1024).
* ``row_mean(x)``, ``rms_norm(x, weight, eps)`` and ``invariant_mode()`` -- on a CUDA GPU only:
  upstream's ``mean_dim`` asserts ``input.is_cuda``, and its mode (``set_batch_invariant_mode``)
  routes ``aten::mean.dim`` to it, so on the CPU every ``mean`` inside the mode raises. On a CPU
  these names are absent (the harness reports them "not implemented"). ``row_mean`` is
  ``mean_dim(x, -1)``; ``rms_norm`` is what the reference model's RMSNorm computes under
  upstream's mode: ``weight * (x * rsqrt(mean_dim(x^2, -1) + eps)).to(x.dtype)`` in float32;
  ``invariant_mode()`` is ``set_batch_invariant_mode(True)``.
* Not provided by upstream, so absent here: ``softmax`` (upstream does not route ``_softmax``),
  ``row_sum``, ``decode_attention`` (upstream has only a block-size helper for attention, no
  kernel), ``fixed_order_sum`` (the reference's own order: a choice, not the law).

Argument checks (the contract's bad-input rules; upstream asserts) are written here from the
contract's text. Upstream's matmul prints "No CUDA or XPU device available. Using CPU." on every
CPU call; that line is swallowed. On the CPU its kernels run in the Triton interpreter
(``TRITON_INTERPRET=1``, set by the harness), with the harness's fixed-order ``tl.dot``.

Upstream's deviations from the law, found by the spec (documented, their tests deselected in
``SPEC_DESELECT`` with the reason):

* ``test_edge_cases``: ``log_softmax`` of an empty last dimension raises (``input.reshape(-1, 0)``
  in upstream's wrapper: "cannot reshape tensor of 0 elements") where the contract and torch
  return an empty tensor.
* ``test_invariant_mode_routes_and_restores`` (GPU): ``set_batch_invariant_mode`` does not restore
  torch's kernels when the block raises (its ``yield`` has no ``try/finally``): after an exception
  inside the mode, ``mm``/``addmm``/``_log_softmax``/``mean.dim`` stay overridden in the process.
  (The test also compares softmax with the contract's ``softmax``, which upstream lacks.)

Choices where upstream differs from the reference (reported "token-exact ✗", not failures):
it reduces in its own tile orders (``tl.dot`` k-groups, one ``tl.sum`` tree per 1024-wide
chunk), not the reference's blocks of 16 left to right; ``bmm`` is not routed.

Not checked here: float64 (upstream's matmul has no float64 configuration: a ``KeyError``).
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import math
import sys
from numbers import Real

import torch
import triton  # noqa: F401  (upstream's kernels are Triton: the harness runs its mode on a GPU)

from conformance.upstream import locate

UPSTREAM = ("thinking-machines-lab/batch_invariant_ops", "f22b1fbe534b1fe045080f44a970a441caaf3c4f",
            ("batch_invariant_ops/batch_invariant_ops.py",))
SPEC_DESELECT = ("test_edge_cases", "test_invariant_mode_routes_and_restores")

_repo, _commit, _paths = UPSTREAM
_path = locate(_repo, _commit, _paths) / _paths[0]
_spec = importlib.util.spec_from_file_location("_batch_invariant_ops_upstream", _path)
_bio = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _bio               # triton.jit reads the kernels' source by module
_spec.loader.exec_module(_bio)

_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

__all__ = ["matmul", "log_softmax"]


def _float_tensor(name: str, t, ndim: int | None = None) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in _FLOATS:
        raise TypeError(f"{name} must be a floating tensor, got {t.dtype}")
    if ndim is not None and t.dim() != ndim:
        raise ValueError(f"{name} must be {ndim}-d, got shape {tuple(t.shape)}")
    if ndim is None and t.dim() < 1:
        raise ValueError(f"{name} must have at least one dimension, got a scalar")


def _quiet(fn, *args, **kwargs):
    with contextlib.redirect_stdout(io.StringIO()):   # upstream prints its device choice per call
        return fn(*args, **kwargs)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a (M, K) @ b (K, N): upstream's matmul_persistent."""
    _float_tensor("a", a, 2)
    _float_tensor("b", b, 2)
    if a.dtype != b.dtype:
        raise TypeError(f"b must have a's dtype {a.dtype}, got {b.dtype}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"b must have {a.shape[1]} rows (a's K), got shape {tuple(b.shape)}")
    return _quiet(_bio.matmul_persistent, a, b)


def log_softmax(x: torch.Tensor) -> torch.Tensor:
    """log_softmax along the last dim: upstream's log_softmax."""
    _float_tensor("x", x)
    return _bio.log_softmax(x, dim=-1)


if torch.cuda.is_available():     # upstream's mean kernel asserts a CUDA tensor (module doc)
    __all__ += ["row_mean", "rms_norm", "invariant_mode"]

    def row_mean(x: torch.Tensor) -> torch.Tensor:
        """Mean of the last dim: upstream's mean_dim(x, -1)."""
        _float_tensor("x", x)
        return _bio.mean_dim(x, -1)

    def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
        """weight * x / sqrt(mean(x^2) + eps) in float32, the mean by upstream's mean_dim (what the
        reference model's RMSNorm computes under upstream's mode)."""
        _float_tensor("x", x)
        _float_tensor("weight", weight, 1)
        if weight.shape[0] != x.shape[-1]:
            raise ValueError(f"weight must have {x.shape[-1]} elements (x's last dim), got {weight.shape[0]}")
        if not isinstance(eps, Real) or isinstance(eps, bool):
            raise TypeError(f"eps must be a real number, got {type(eps).__name__}")
        if not math.isfinite(eps) or eps < 0:
            raise ValueError(f"eps must be a finite real >= 0, got {eps}")
        xf = x.to(torch.float32 if x.dtype != torch.float64 else torch.float64)
        ms = _bio.mean_dim(xf * xf, -1, keepdim=True)
        return weight * (xf * torch.rsqrt(ms + eps)).to(x.dtype)

    def invariant_mode():
        """upstream's set_batch_invariant_mode(True)."""
        return _bio.set_batch_invariant_mode(True)
