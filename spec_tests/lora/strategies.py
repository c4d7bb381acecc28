"""Multi-LoRA problems as plain data (each repr is valid Python, so a falsifying example can be
pasted back).

:class:`LoraCase` -- a batch of ``batch`` rows (d_in wide), a base weight (d_out x d_in), N
adapters of rank r, alpha, and how the rows name their adapters: ``random`` (any of -1..N-1),
``none`` (every row -1: the base alone), ``one`` (every row adapter 0), ``grouped`` (rows sorted by
adapter, as Punica's SGMV wants them), ``distinct`` (row i adapter i mod N). Weights are normal,
the adapters' scaled so that the LoRA term is about the size of the base term.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from conformance.strategies import DTYPES, generator, seeds

PATTERNS = ("random", "none", "one", "grouped", "distinct")


@dataclass(frozen=True)
class LoraCase:
    batch: int
    d_in: int
    d_out: int
    adapters: int
    rank: int
    alpha: float
    dtype: str
    seed: int
    ids: str = "random"

    def adapter_ids(self) -> torch.Tensor:
        g = generator(self.seed + 1)
        n, b = self.adapters, self.batch
        if self.ids == "none" or n == 0:
            return torch.full((b,), -1, dtype=torch.int64)
        if self.ids == "one":
            return torch.zeros(b, dtype=torch.int64)
        if self.ids == "distinct":
            return torch.arange(b, dtype=torch.int64) % n
        ids = torch.randint(-1, n, (b,), generator=g)
        return ids.sort().values if self.ids == "grouped" else ids

    def build(self, device="cpu") -> dict:
        """The keyword arguments of lora_forward."""
        g = generator(self.seed)
        dt = DTYPES[self.dtype]

        def w(*shape, std):
            return (torch.randn(shape, generator=g, dtype=torch.float64) * std).to(device=device, dtype=dt)
        return dict(x=w(self.batch, self.d_in, std=1.0), base_weight=w(self.d_out, self.d_in, std=self.d_in ** -0.5),
                    lora_a=w(self.adapters, self.rank, self.d_in, std=self.d_in ** -0.5),
                    lora_b=w(self.adapters, self.d_out, self.rank, std=1.0 / max(1.0, abs(self.alpha))),
                    adapter_ids=self.adapter_ids().to(device), alpha=self.alpha)


@st.composite
def lora_cases(draw, *, max_batch: int = 9, max_d: int = 40, max_adapters: int = 4, max_rank: int = 8,
               dtypes=("float32", "bfloat16", "float16", "float64"), patterns=PATTERNS):
    adapters = draw(st.integers(0, max_adapters))
    return LoraCase(draw(st.integers(0, max_batch)), draw(st.integers(1, max_d)), draw(st.integers(1, max_d)),
                    adapters, draw(st.integers(1, max_rank)), draw(st.sampled_from((1.0, 8.0, 16.0, 32.0, -4.0, 0.5))),
                    draw(st.sampled_from(dtypes)), draw(seeds), draw(st.sampled_from(patterns)))
