"""Strategies for sampling inputs: a frozen case whose repr is valid Python and whose logits come
from a seed (explicit torch.Generator)."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
from hypothesis import strategies as st

from conformance.strategies import DTYPES, dtype_names, generator, seeds

PARAM_FIELDS = ("temperature", "top_k", "top_p", "min_p", "repetition_penalty", "presence_penalty",
                "frequency_penalty")


@dataclass(frozen=True)
class SamplingCase:
    """One sampling problem. ``logits()``, ``params()``, ``prompt_tokens``, ``output_tokens``
    rebuild it exactly. Per-row parameters are tuples of length ``batch``.

    kind: "normal" (randn * scale: no ties), "integer" (integers in [-3, 3] * scale: many exact
    ties), "explicit" (``values`` gives the logits row-major, exactly).
    bias: per row, ((token, value), ...); banned: ((row, token), ...) get a -inf bias.
    """

    batch: int
    vocab: int
    dtype: str
    seed: int
    kind: str = "normal"
    scale: float = 2.0
    temperature: tuple = ()
    top_k: tuple = ()
    top_p: tuple = ()
    min_p: tuple = ()
    repetition_penalty: tuple = ()
    presence_penalty: tuple = ()
    frequency_penalty: tuple = ()
    bias: tuple = ()
    banned: tuple = ()
    prompt: tuple = ()
    output: tuple = ()
    values: tuple = ()

    def logits(self, device="cpu", dtype: torch.dtype | None = None) -> torch.Tensor:
        dt = dtype or DTYPES[self.dtype]
        shape = (self.batch, self.vocab)
        if self.kind == "explicit":
            x = torch.tensor(self.values, dtype=torch.float64).reshape(shape)
        elif self.kind == "integer":
            x = torch.randint(-3, 4, shape, generator=generator(self.seed)).double() * self.scale
        else:
            x = torch.randn(shape, generator=generator(self.seed), dtype=torch.float64) * self.scale
        return x.to(dt).to(device)

    def row(self, name: str, r: int):
        vals = getattr(self, name)
        if not vals:
            return {"temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0,
                    "repetition_penalty": 1.0}.get(name, 0.0)
        return vals[r]

    def bias_dicts(self) -> list[dict] | None:
        if not self.bias and not self.banned:
            return None
        rows = [dict(self.bias[r]) if self.bias else {} for r in range(self.batch)]
        for r, t in self.banned:
            rows[r][t] = -math.inf
        return rows

    def params(self):
        from reference.sampling import SamplingParams
        kw = {n: [self.row(n, r) for r in range(self.batch)] for n in PARAM_FIELDS}
        return SamplingParams(**kw, logit_bias=self.bias_dicts())

    @property
    def prompt_tokens(self):
        return [list(t) for t in self.prompt] if self.prompt else None

    @property
    def output_tokens(self):
        return [list(t) for t in self.output] if self.output else None

    def kwargs(self) -> dict:
        return dict(prompt_tokens=self.prompt_tokens, output_tokens=self.output_tokens)

    def with_(self, **changes) -> "SamplingCase":
        return replace(self, **changes)

    def select_row(self, r: int) -> "SamplingCase":
        """The same problem for row r alone."""
        one = {n: (getattr(self, n)[r],) for n in PARAM_FIELDS if getattr(self, n)}
        logits = self.logits(dtype=torch.float64)[r].tolist()
        return replace(self, batch=1, kind="explicit", values=tuple(logits), **one,
                       bias=(self.bias[r],) if self.bias else (),
                       banned=tuple((0, t) for rr, t in self.banned if rr == r),
                       prompt=(self.prompt[r],) if self.prompt else (),
                       output=(self.output[r],) if self.output else ())


# Temperatures just above 0: sampling, not greedy (a tie at the max stays a tie), and z = (x -
# max) / T must not overflow. An implementation that treats T < 1e-5 as greedy (vLLM's epsilon)
# or divides the raw logits by T differs from the contract only here.
TINY_TEMPERATURES = (1e-6, 1e-4, 1e-2)


def _row_params(draw, vocab: int, greedy: bool):
    t = draw(st.one_of(st.just(1.0), st.floats(0.05, 3.0).map(lambda v: round(v, 3)),
                       st.sampled_from(TINY_TEMPERATURES), *([st.just(0.0)] if greedy else [])))
    k = draw(st.one_of(st.just(0), st.integers(1, vocab + 2)))
    p = draw(st.one_of(st.just(1.0), st.floats(0.05, 0.99).map(lambda v: round(v, 3))))
    mp = draw(st.one_of(st.just(0.0), st.floats(0.0, 1.0).map(lambda v: round(v, 3))))
    rep = draw(st.one_of(st.just(1.0), st.floats(0.5, 2.0).map(lambda v: round(v, 3))))
    pres = draw(st.one_of(st.just(0.0), st.floats(-1.0, 1.0).map(lambda v: round(v, 3))))
    freq = draw(st.one_of(st.just(0.0), st.floats(-1.0, 1.0).map(lambda v: round(v, 3))))
    return t, k, p, mp, rep, pres, freq


@st.composite
def sampling_cases(draw, *, dtypes=("float32", "float16", "bfloat16", "float64"), max_batch: int = 3,
                   max_vocab: int = 40, kinds=("normal", "integer"), greedy: bool = True,
                   penalties: bool = True, openai_penalties: bool = True, bias: bool = True):
    batch = draw(st.integers(1, max_batch))
    vocab = draw(st.integers(1, max_vocab))
    rows = [_row_params(draw, vocab, greedy) for _ in range(batch)]
    cols = list(zip(*rows))
    if not penalties:
        cols[4] = (1.0,) * batch
    if not (penalties and openai_penalties):
        cols[5] = cols[6] = (0.0,) * batch
    tokens = st.lists(st.integers(0, vocab - 1), max_size=6).map(tuple)
    prompt = output = ()
    if penalties and draw(st.booleans()):
        prompt = tuple(draw(tokens) for _ in range(batch))
        output = tuple(draw(tokens) for _ in range(batch))
    bias_rows, banned = (), ()
    if bias and draw(st.booleans()):
        pair = st.tuples(st.integers(0, vocab - 1), st.integers(-8, 8).map(lambda v: v / 4))
        bias_rows = tuple(tuple(dict(draw(st.lists(pair, max_size=3))).items()) for _ in range(batch))
        if vocab > 1:
            banned = tuple(sorted({(r, t) for r in range(batch)
                                   for t in draw(st.lists(st.integers(0, vocab - 1), max_size=vocab - 1,
                                                          unique=True)) [:vocab - 1]}))
    return SamplingCase(
        batch=batch, vocab=vocab, dtype=draw(dtype_names(*dtypes)), seed=draw(seeds),
        kind=draw(st.sampled_from(kinds)), scale=draw(st.sampled_from((0.5, 1.0, 2.0, 4.0))),
        temperature=cols[0], top_k=cols[1], top_p=cols[2], min_p=cols[3],
        repetition_penalty=cols[4], presence_penalty=cols[5], frequency_penalty=cols[6],
        bias=bias_rows, banned=banned, prompt=prompt, output=output)


# The structure of the optimized sampler's torch schedule (optimized/sampling/torch_path.py, at the
# defaults of optimized/sampling/config.py's TorchPathConfig), reached by generated cases (not one
# pinned example): top_k around its fast-path limit (fast_path_max_k = 256) and the fused Triton
# tail's (k + 1 <= fused_tail_max_candidates = 128, blocks of 16, 32, ... on CUDA); vocabularies
# around multiples of 256 (its two-level inverse CDF needs vocab % cdf_chunk == 0, cdf_chunk = 256,
# and >= 4 chunks) with ragged ends; batches around 64 (the CPU general path's row_block) mixing
# greedy, fast-path and general-path rows.
STRUCTURE_VOCABS = (1023, 1024, 1025, 1280, 1536, 2047, 2048)
STRUCTURE_TOP_K = (0, 1, 2, 15, 16, 127, 128, 255, 256, 257, 300)
STRUCTURE_BATCHES = (1, 2, 5, 63, 64, 65, 66)


@st.composite
def structure_cases(draw, *, dtypes=("float32", "bfloat16")):
    """Large cases: a few distinct row settings cycled over a batch of up to 66 rows."""
    vocab = draw(st.sampled_from(STRUCTURE_VOCABS))
    batch = draw(st.sampled_from(STRUCTURE_BATCHES))
    top_k = st.one_of(st.sampled_from(STRUCTURE_TOP_K), st.sampled_from((vocab - 1, vocab, vocab + 1)))
    setting = st.tuples(st.sampled_from((0.0, 1e-3, 0.7, 1.0, 1.5)), top_k,
                        st.sampled_from((1.0, 0.5, 0.9, 0.95)), st.sampled_from((0.0, 0.0, 0.05)))
    settings_ = draw(st.lists(setting, min_size=1, max_size=3))
    rows = [settings_[r % len(settings_)] for r in range(batch)]
    cols = list(zip(*rows))
    return SamplingCase(batch=batch, vocab=vocab, dtype=draw(st.sampled_from(dtypes)), seed=draw(seeds),
                        kind=draw(st.sampled_from(("normal", "integer"))),
                        scale=draw(st.sampled_from((1.0, 3.0))),
                        temperature=cols[0], top_k=cols[1], top_p=cols[2], min_p=cols[3])
