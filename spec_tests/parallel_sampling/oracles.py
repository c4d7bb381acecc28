"""Oracles of parallel sampling that share nothing with reference/parallel_sampling.py.

- :class:`Branches`: an abstract model of sequences that fork and copy on write, written from the
  paged contract's words (a block is shared by the tables that hold it; a write into a partial
  last block that another table holds first takes a fresh copy; a freed table gives back the
  blocks no other table holds). Blocks are abstract (fresh integers, never reused), so it says
  *how many* blocks are in use and which tables share which, never which ids: the law. It also
  holds each sequence's token contents (values written), what ``read`` must give back.
- :func:`simulate`: n branches forked from one prompt, appending in a given interleaving; the
  blocks in use and the copies made, counted by the model (the closed forms' oracle).
- :class:`Sampler`: the tests' own ``sample_fn`` (inverse CDF of the float64 softmax at a float64
  uniform drawn from the generator it is given, one draw per call), recording every call.
- the near-tie rule (as concept ``engine``'s, spec_tests/engine/oracles.py): two runs of a
  branch may pick different tokens only where the float64 logits of that step put the two picks
  within rounding of each other -- for a greedy sampler, logits within ``2 x bound``; for the
  inverse-CDF sampler, the uniform within ``exp(4 x bound / T) - 1`` of a CDF boundary between
  them (a logit error e moves every CDF value by at most ``exp(2e / T) - 1``).
"""
from __future__ import annotations

import math

import torch

from conformance.tolerance import rounding_floor


# --- the block model --------------------------------------------------------------------------
class Branches:
    """Tables of abstract blocks with copy-on-write, and each sequence's contents."""

    def __init__(self, block_size: int):
        self.block_size = block_size
        self.tables: dict = {}
        self.contents: dict = {}
        self.next_block = 0
        self.copies = 0

    def _fresh(self) -> int:
        self.next_block += 1
        return self.next_block - 1

    def holders(self, block) -> int:
        return sum(t.count(block) for t in self.tables.values())

    def in_use(self) -> int:
        return len({b for t in self.tables.values() for b in t})

    def need(self, seq, n: int) -> int:
        """Fresh blocks an append of ``n`` tokens to ``seq`` takes (a copy included)."""
        if n == 0:
            return 0
        length, table = len(self.contents[seq]), self.tables[seq]
        copy = length % self.block_size != 0 and self.holders(table[-1]) > 1
        return -(-(length + n) // self.block_size) - len(table) + copy

    def add(self, seq, values: list) -> None:
        self.tables[seq] = [self._fresh() for _ in range(-(-len(values) // self.block_size))]
        self.contents[seq] = list(values)

    def fork(self, parent, child) -> None:
        self.tables[child] = list(self.tables[parent])
        self.contents[child] = list(self.contents[parent])

    def append(self, seq, values: list) -> int:
        """Returns the copies made (0 or 1)."""
        if not values:
            return 0
        length, table = len(self.contents[seq]), self.tables[seq]
        copied = length % self.block_size != 0 and self.holders(table[-1]) > 1
        if copied:
            table[-1] = self._fresh()
            self.copies += 1
        while len(table) < -(-(length + len(values)) // self.block_size):
            table.append(self._fresh())
        self.contents[seq].extend(values)
        return int(copied)

    def own_blocks(self, seq) -> int:
        """Blocks of ``seq`` that no other table holds: what freeing it gives back."""
        return len([b for b in set(self.tables[seq]) if self.holders(b) == 1])

    def free(self, seq) -> None:
        del self.tables[seq], self.contents[seq]


def simulate(prompt_len: int, new_tokens: list, block_size: int, order: list) -> tuple[int, int]:
    """(blocks in use, copies) after a prompt of ``prompt_len`` tokens forked into
    ``len(new_tokens)`` branches (branch 0 is the prompt's own sequence) and one-token appends in
    ``order`` (a list of branch indices holding i exactly ``new_tokens[i]`` times)."""
    m = Branches(block_size)
    m.add(0, [0] * prompt_len)
    for b in range(1, len(new_tokens)):
        m.fork(0, b)
    for b in order:
        m.append(b, [1])
    return m.in_use(), m.copies


def closed_forms(prompt_len: int, new_tokens: list, block_size: int) -> tuple[int, int, int]:
    """(shared, independent, copies) written from the derivation in docs/parallel_sampling.md:
    the full prompt blocks once; each branch that wrote owns the blocks of its tokens past them
    (its copy of a partial block included); the partial block itself while a silent branch holds it."""
    p, b, n = prompt_len, block_size, len(new_tokens)
    full, partial = divmod(p, b)
    wrote = [k for k in new_tokens if k > 0]
    shared = full + sum(math.ceil((p + k) / b) - full for k in wrote) + (1 if partial and len(wrote) < n else 0)
    independent = sum(math.ceil((p + k) / b) for k in new_tokens)
    copies = (len(wrote) - (1 if len(wrote) == n else 0)) if partial else 0
    return shared, independent, copies


# --- the tests' sampler -------------------------------------------------------------------------
class Sampler:
    """``sample_fn(logits, generator)``: one float64 uniform u from ``generator`` per call, then the
    smallest token t with C_t > u * C_last, C the cumsum of softmax(logits / T) in float64 (argmax at
    T = 0, u still drawn). Records (generator, u, logits, token) per call."""

    def __init__(self, temperature: float):
        self.temperature = temperature
        self.calls: list = []

    def __call__(self, logits, generator):
        u = float(torch.rand(1, generator=generator, dtype=torch.float64)[0])
        row = logits.detach().to("cpu", torch.float64)[0]
        if self.temperature == 0:
            token = int(row.argmax())
        else:
            c = torch.cumsum(torch.softmax(row / self.temperature, dim=-1), dim=0)
            token = min(int(torch.searchsorted(c, torch.tensor([u * float(c[-1])], dtype=torch.float64),
                                               right=True)[0]), row.numel() - 1)
        self.calls.append((generator, u, logits.detach().clone(), token))
        return torch.tensor([token])

    def __repr__(self) -> str:
        return f"Sampler({self.temperature})"


def uniforms(seed: int, count: int) -> list[float]:
    """The first ``count`` float64 uniforms of ``torch.Generator().manual_seed(seed)``, one per draw."""
    g = torch.Generator().manual_seed(seed)
    return [float(torch.rand(1, generator=g, dtype=torch.float64)[0]) for _ in range(count)]


# --- the near-tie rule -----------------------------------------------------------------------------
def replay(tokens: list):
    """A sample_fn that returns ``tokens[t]`` at its t-th call (teacher forcing)."""
    step = iter(range(len(tokens)))
    return lambda logits, generator: torch.tensor([tokens[next(step)]])


def teacher_forced(generate, model, prompt: list, tokens: list) -> torch.Tensor:
    """The logits (len(tokens), vocab) ``generate`` gives on ``prompt`` followed by ``tokens``."""
    _, logits = generate(model, torch.tensor([prompt]), len(tokens), sample_fn=replay(tokens))
    return logits[0]


def bound(low: torch.Tensor, oracle: torch.Tensor, dtype: torch.dtype) -> float:
    """The tolerance rule's bound: 2 x the low-precision run's error + the rounding floor (for
    float64, where the run is the oracle, the rounding of a float64 sum of the logits' size)."""
    if dtype == torch.float64:
        return 64 * torch.finfo(torch.float64).eps * (float(oracle.abs().max()) + 0.3)
    return 2 * float((low.double() - oracle).abs().max()) + rounding_floor(oracle, dtype)


def near_tie(oracle_row: torch.Tensor, a: int, b: int, temperature: float, u: float, e: float) -> tuple[bool, str]:
    """Whether picks ``a`` and ``b`` from one step whose float64 logits are ``oracle_row`` are a
    genuine near-tie (module doc), ``e`` the tolerance bound, ``u`` the step's uniform."""
    if temperature == 0:
        gap = abs(float(oracle_row[a] - oracle_row[b]))
        return gap <= 2 * e, f"greedy picks {a}, {b}: float64 logits {float(oracle_row[a]):.6g} vs " \
                             f"{float(oracle_row[b]):.6g} (gap {gap:.3e}, allowed {2 * e:.3e})"
    c = torch.cumsum(torch.softmax(oracle_row / temperature, dim=-1), dim=0)
    c = c / c[-1]
    lo, hi = min(a, b), max(a, b)
    dist = min(abs(float(c[k]) - u) for k in range(lo, hi))
    allowed = math.expm1(4 * e / temperature) + 1e-12
    return dist <= allowed, (f"sampled picks {a}, {b} at u = {u!r}: the nearest float64 CDF boundary between "
                             f"them is {dist:.3e} away (allowed {allowed:.3e})")
