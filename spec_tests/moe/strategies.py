"""MoE problems as plain data (each repr is valid Python, so a falsifying example can be pasted back).

:class:`MoECase` -- T tokens of width d, E experts of hidden width F, top-k, a capacity factor, and
how the router logits are drawn: ``normal`` (distinct values: no ties), ``ties`` (small integers,
so that equal logits, ties at the k-th place included, are common), ``skewed`` (most tokens
prefer expert 0: capacity drops are common). Weights are normal, scaled by 1/sqrt of the fan-in.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from conformance.strategies import DTYPES, generator, seeds

LOGITS = ("normal", "ties", "skewed")
FACTORS = (None, 0.25, 0.5, 0.75, 1.0, 1.25, 2.0)


@dataclass(frozen=True)
class MoECase:
    tokens: int
    d: int
    hidden: int
    experts: int
    k: int
    capacity_factor: float | None
    renormalize: bool
    dtype: str
    seed: int
    logits: str = "normal"
    logits_dtype: str = "float32"

    def router_logits(self, device="cpu") -> torch.Tensor:
        g = generator(self.seed + 1)
        if self.logits == "ties":
            lg = torch.randint(-2, 3, (self.tokens, self.experts), generator=g).double()
        else:
            lg = torch.randn((self.tokens, self.experts), generator=g, dtype=torch.float64) * 2
            if self.logits == "skewed":
                lg[:, 0] += 3
        return lg.to(device=device, dtype=DTYPES[self.logits_dtype])

    def build(self, device="cpu") -> dict:
        """The keyword arguments of moe_forward."""
        g = generator(self.seed)
        dt = DTYPES[self.dtype]

        def w(*shape, fan_in):
            return (torch.randn(shape, generator=g, dtype=torch.float64) / max(1, fan_in) ** 0.5).to(device=device, dtype=dt)
        return dict(x=w(self.tokens, self.d, fan_in=1), router_logits=self.router_logits(device),
                    w_gate=w(self.experts, self.hidden, self.d, fan_in=self.d),
                    w_up=w(self.experts, self.hidden, self.d, fan_in=self.d),
                    w_down=w(self.experts, self.d, self.hidden, fan_in=self.hidden),
                    k=self.k, capacity_factor=self.capacity_factor, renormalize=self.renormalize)


@st.composite
def moe_cases(draw, *, max_tokens: int = 9, max_experts: int = 6, max_d: int = 20, max_hidden: int = 20,
              dtypes=("float32", "bfloat16", "float16", "float64"), logits=LOGITS, factors=FACTORS):
    experts = draw(st.integers(1, max_experts))
    return MoECase(draw(st.integers(0, max_tokens)), draw(st.integers(1, max_d)), draw(st.integers(1, max_hidden)),
                   experts, draw(st.integers(1, min(experts, 3))), draw(st.sampled_from(factors)), draw(st.booleans()),
                   draw(st.sampled_from(dtypes)), draw(seeds), draw(st.sampled_from(logits)),
                   draw(st.sampled_from(("float32", "bfloat16", "float64"))))
