"""Hypothesis strategies, one module per concept. Inputs are described by small frozen dataclasses
whose repr is valid Python (a shrunk failure prints a case you can paste), and tensors are made
from a seed through an explicit ``torch.Generator``: global RNG state is never touched."""
from conformance.strategies.common import generator, randn  # noqa: F401
