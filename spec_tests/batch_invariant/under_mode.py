"""The batch_invariant tests' torch calls under ``invariant_mode()``, run where the implementation
runs (``impl.call_in_process``).

``invariant_mode()`` patches torch's kernels in the process that enters it. For the bundled
implementations that is the judge's own process; a submission's code runs in its worker process, so
a test's ``torch.matmul`` in the judge would never see the submission's mode (and would pass or fail
for the judge's torch, not for the submission). So the calls whose results the tests compare --
torch's ops inside and after the mode, the reference model decoding under it -- are made here, by
functions the judge runs in the implementation's process; they return tensors, and the comparisons
stay in the tests. In-process (reference, optimized, mutants) the functions run in the judge: the
same code, the same property.
"""
from __future__ import annotations

import contextlib
import inspect
import sys
import types

import torch
import torch.nn.functional as F

from conformance.strategies import generator
from reference.model import ModelConfig, Transformer
from spec_tests.batch_invariant.oracles import PackedRunner

_MODELS: dict = {}          # (config, seed, device) -> model, per process


def model(config: ModelConfig, seed: int, device: str) -> Transformer:
    """The reference model of a test, built once per process (the same weights in every process:
    they come from the seed)."""
    key = (config, seed, device)
    if key not in _MODELS:
        _MODELS[key] = Transformer(config, seed=seed).to(device)
    return _MODELS[key]


def uses_triton_kernels(impl) -> bool:
    """Whether the module that defines the implementation's ``invariant_mode`` uses Triton (imports
    it, or holds its kernels): under the CPU interpreter such kernels are too slow for a model, and
    on a GPU they run on the GPU. Asked in the implementation's process."""
    mode = inspect.unwrap(impl.get("invariant_mode"))
    module = sys.modules.get(getattr(mode, "__module__", None) or "")
    for value in vars(module).values() if module is not None else ():
        origin = value.__name__ if isinstance(value, types.ModuleType) else type(value).__module__
        if str(origin).partition(".")[0] == "triton":
            return True
    return False


def bmm_operands(x, w):
    """Three (M, K) @ (K, N) problems from ``x`` (M, K) and ``w`` (N, K), for torch.bmm."""
    return torch.stack([x, x.flip(0), x * 0.5]), torch.stack([w.t(), w.t() * 2, w.t().flip(1)])


def routes(impl, x, w, bias) -> dict:
    """torch's ops on ``x``, ``w``, ``bias`` inside ``invariant_mode()``, in this process."""
    mode = impl.get("invariant_mode")
    out = {}
    x3, w3 = bmm_operands(x, w)
    with mode():
        out["mm"] = torch.matmul(x, w.t())
        out["lin"] = F.linear(x, w, bias)
        out["lin1"] = F.linear(x[3:4], w, bias)
        out["bmm"] = torch.bmm(x3, w3)
        out["bmm1"] = torch.bmm(x3[1:2], w3[1:2])
        out["lsm"], out["sm"] = torch.log_softmax(x, -1), torch.softmax(x, dim=1)
        out["lsm0"], out["sm0"] = torch.log_softmax(x, 0), torch.softmax(x, dim=0)   # not the last dim
        out["addmm0"] = torch.addmm(bias, x, w.t(), alpha=0)
        out["addmm2"] = torch.addmm(bias, x, w.t(), beta=0.5, alpha=2)
        out["mean"] = x.mean(-1, keepdim=True)
        out["mean0"] = x.mean(0)                 # not routed: still torch's mean
    return out


def edge_calls(x, w, bias) -> dict:
    """name -> a call of torch ops the mode routes, at the edges of their shapes (built from ``x``
    (M, K), ``w`` (N, K), ``bias`` (N,), in their dtype and device): an empty M, K, batch or row
    length of mm / bmm / softmax / log_softmax / mean, softmax and log_softmax over each non-last
    dim of a 3-D tensor of distinct sizes, addmm with beta -1 and with beta 0 (where torch ignores
    the bias, a NaN in it included)."""
    x3 = x[:8].reshape(2, 4, -1)
    nan_bias = torch.full_like(bias, float("nan"))
    return {
        "mm M=0": lambda: torch.mm(x[:0], w.t()),
        "mm K=0": lambda: torch.mm(x[:, :0], w.t()[:0]),
        "bmm B=0": lambda: torch.bmm(x.new_empty(0, 2, 3), x.new_empty(0, 3, 5)),
        "bmm M=0": lambda: torch.bmm(x.new_empty(2, 0, 3), x.new_ones(2, 3, 5)),
        "bmm K=0": lambda: torch.bmm(x.new_empty(2, 4, 0), x.new_empty(2, 0, 5)),
        "log_softmax L=0": lambda: torch.log_softmax(x[:, :0], -1),
        "softmax L=0": lambda: torch.softmax(x[:, :0], -1),
        "log_softmax M=0": lambda: torch.log_softmax(x[:0], -1),
        "softmax M=0": lambda: torch.softmax(x[:0], -1),
        "mean L=0": lambda: x[:, :0].mean(-1),
        "mean M=0": lambda: x[:0].mean(-1),
        "mean 0-d": lambda: x[0, 0].mean(-1),
        "log_softmax 3-D dim 0": lambda: torch.log_softmax(x3, 0),
        "log_softmax 3-D dim 1": lambda: torch.log_softmax(x3, 1),
        "softmax 3-D dim 0": lambda: torch.softmax(x3, 0),
        "softmax 3-D dim -2": lambda: torch.softmax(x3, -2),
        "addmm beta=-1": lambda: torch.addmm(bias, x, w.t(), beta=-1),
        "addmm beta=0 NaN bias": lambda: torch.addmm(nan_bias, x, w.t(), beta=0),
    }


def edges(impl, x, w, bias) -> dict:
    """:func:`edge_calls` inside ``invariant_mode()``, in this process: name -> the result."""
    calls = edge_calls(x, w, bias)
    with impl.get("invariant_mode")():
        return {name: call() for name, call in calls.items()}


def out_of_range_dims(impl, x) -> dict:
    """The exception type (or "returned") of torch.softmax / log_softmax over dims just past each
    end of ``x``'s dims (x.dim() and -x.dim() - 1), inside ``invariant_mode()``, in this process."""
    mode = impl.get("invariant_mode")
    out = {}
    with mode():
        for name, fn in (("softmax", torch.softmax), ("log_softmax", torch.log_softmax)):
            for dim in (x.dim(), -x.dim() - 1):
                try:
                    fn(x, dim)
                    out[f"{name}(x, dim={dim})"] = "returned"
                except Exception as exc:  # noqa: BLE001 -- the type is the answer
                    out[f"{name}(x, dim={dim})"] = type(exc).__name__
    return out


def restores(impl, x, w) -> dict:
    """torch.mm before and after ``invariant_mode()`` (the second time after a block that raised),
    in this process."""
    mode = impl.get("invariant_mode")
    out = {"plain": torch.mm(x, w.t())}
    with mode():
        pass
    out["after_exit"] = torch.mm(x, w.t())
    out["raised"] = None
    try:
        with mode():
            1 / 0
    except ZeroDivisionError as exc:
        out["raised"] = type(exc).__name__
    out["after"] = torch.mm(x, w.t())
    return out


def routes_and_restores(impl, x, w, bias) -> dict:
    """:func:`restores` then :func:`routes`, in one call (one dict)."""
    return {**restores(impl, x, w), **routes(impl, x, w, bias)}


def decode(impl, config: ModelConfig, device: str, tokens, ids, sample: bool, invariant: bool, steps: int = 3):
    """Greedy or seeded-sampled (Gumbel-max, each request its own generator) decoding of ``tokens``
    (B, L) by the reference model with a KV cache, under ``invariant_mode()`` when ``invariant``.
    Returns the tokens (B, steps) and the logprobs (B, steps, V)."""
    m = model(config, 0, device)
    gens = [generator(1000 + i) for i in ids]
    cache = m.new_cache(tokens.shape[0])
    out, lps = [], []
    ctx = impl.get("invariant_mode")() if invariant else contextlib.nullcontext()
    with torch.no_grad(), ctx:
        logits = m(tokens, cache)[:, -1]
        for _ in range(steps):
            lp = torch.log_softmax(logits, -1)
            score = lp
            if sample:                            # Gumbel-max: each request its own noise
                u = torch.stack([torch.rand(lp.shape[-1], generator=gi) for gi in gens]).to(device)
                score = lp - torch.log(-torch.log(u.clamp_min(1e-12)))
            nxt = score.argmax(-1, keepdim=True)
            out.append(nxt)
            lps.append(lp)
            logits = m(nxt, cache)[:, -1]
    return torch.cat(out, 1), torch.stack(lps, 1)


def packed_runner(impl, config: ModelConfig, device: str, max_len: int) -> PackedRunner:
    return PackedRunner(model(config, 0, device), impl.get("decode_attention"), max_len=max_len)


def packed_matches_forward(impl, config: ModelConfig, device: str, max_len: int, prompt: list[int]):
    """The packed runner's first logprobs of ``prompt`` alone, and the model's own forward's."""
    runner = packed_runner(impl, config, device, max_len)
    with torch.no_grad():
        _, lp = runner.generate([prompt], [0], 1, False)
        want = torch.log_softmax(runner.model(torch.tensor([prompt], device=device))[0, -1], -1)
    return lp[0, 0], want


def packed_generate(impl, config: ModelConfig, device: str, max_len: int, prompts, ids, steps: int,
                    sample: bool, invariant: bool):
    """``PackedRunner.generate`` of ``prompts`` with this implementation's decode_attention, under
    ``invariant_mode()`` when ``invariant``."""
    runner = packed_runner(impl, config, device, max_len)
    ctx = impl.get("invariant_mode")() if invariant else contextlib.nullcontext()
    with torch.no_grad(), ctx:
        return runner.generate(prompts, ids, steps, sample)
