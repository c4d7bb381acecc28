"""The concept registry: one entry per concept of ../shared/CONCEPTS.md that the suite specifies.

A concept names the contract (the functions and classes an implementation must provide, as
``module.name``), its docs page and the course lessons it covers. Lesson ids are
``module.lesson`` from the "Inference Engineering" outline; ``ch`` are chapter numbers of the
"Inference engines" outline. Ids are stable: reports and mutants refer to them.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Concept:
    id: str
    title: str
    contract: tuple[str, ...]
    docs: str
    lessons: tuple[str, ...] = ()
    chapters: tuple[int, ...] = ()
    module: str = field(default="")  # course module heading, for docs/index.md and `inferspec list`
    # Names checked when present but not required for the concept to pass (e.g. the tiled
    # reading form of attention, or the cache class next to the byte formula).
    optional: tuple[str, ...] = ()
    # False where CONCEPTS.md's "optimized" column is "-": the reference is the whole concept.
    has_optimized: bool = True

    @property
    def modules(self) -> tuple[str, ...]:
        """The reference modules the contract lives in (``attention`` for ``attention.sdpa``)."""
        return tuple(dict.fromkeys(name.split(".")[0] for name in self.contract))


CONCEPTS: dict[str, Concept] = {}


def register(c: Concept) -> Concept:
    if c.id in CONCEPTS:
        raise ValueError(f"concept {c.id!r} registered twice")
    CONCEPTS[c.id] = c
    return c


def concept(concept_id: str) -> Concept:
    try:
        return CONCEPTS[concept_id]
    except KeyError:
        known = ", ".join(sorted(CONCEPTS))
        raise KeyError(f"unknown concept {concept_id!r}; known: {known}") from None


# --- 1 The generation loop ------------------------------------------------------------------
GEN = "1 The generation loop"
register(Concept(
    "model", "Tiny Llama-style decoder (RMSNorm, RoPE, GQA, SwiGLU)",
    ("model.ModelConfig", "model.Transformer", "model.save_weights", "model.load_weights"), "docs/model.md",
    lessons=("01.01", "01.04"), chapters=(1,), module=GEN, has_optimized=False))
register(Concept(
    "generate", "Prefill + decode with a KV cache",
    ("generate.generate", "generate.generate_uncached"), "docs/generate.md",
    lessons=("01.02", "01.03", "03.01", "03.02"), chapters=(1,), module=GEN, has_optimized=False))
register(Concept(
    "sampling", "Temperature, top-k, top-p, min-p, greedy, penalties, logit bias",
    ("sampling.sampling_probs", "sampling.sample"), "docs/sampling.md",
    lessons=("01.05",), chapters=(1,), module=GEN))
register(Concept(
    "stopping", "EOS, max/min tokens, stop strings across token boundaries, held-back streaming",
    ("stopping.StopParams", "stopping.StopChecker"), "docs/stopping.md",
    lessons=("01.06",), chapters=(1,), module=GEN))
register(Concept(
    "kv_bytes", "KV-cache byte formula and context budget",
    ("kv_bytes.kv_cache_bytes",), "docs/kv_bytes.md", optional=("kv_bytes.KVCache",),
    lessons=("01.08", "03.03", "03.05"), chapters=(1,), module=GEN, has_optimized=False))
register(Concept(
    "metrics", "Serving metrics: TTFT, TPOT, ITL, throughput, goodput, percentiles",
    ("metrics.request_metrics", "metrics.summarize", "metrics.percentile"), "docs/metrics.md",
    lessons=("01.11", "04.09", "04.10", "04.11", "04.12"), module=GEN, has_optimized=False))

# --- 3 The KV cache -------------------------------------------------------------------------
KV = "3 The KV cache"
register(Concept(
    "attention", "Scaled dot-product attention: MHA/MQA/GQA, causal, sliding window, lse, tiled",
    ("attention.attention",), "docs/attention.md", optional=("attention.attention_tiled",),
    lessons=("03.02", "03.05", "05.07"), chapters=(2, 5), module=KV))
register(Concept(
    "flash_attention", "FlashAttention-2: forward + backward, varlen (packed) batches, nn.Module drop-in",
    ("attention.attention_varlen", "attention.FlashAttention"), "docs/flash_attention.md",
    lessons=("05.07",), chapters=(5,), module=KV))
