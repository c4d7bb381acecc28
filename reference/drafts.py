"""Speculative decoding, the drafts and the loop: the specification (course 05.08-05.11; ch. 7-8).

The contract::

    ngram_propose(tokens, gamma, *, n=2) -> list[int]
    speculative_generate(target, draft, prompt, gamma, *, max_new_tokens, temperature=1.0,
                         generator=None) -> torch.Tensor
    draft_model(target, *, n_layers=None, noise=0.0, seed=0) -> Transformer
    expected_tokens_per_step(alpha, gamma) -> float
    speedup(alpha, gamma, c) -> float
    break_even_alpha(gamma, c) -> float
    batch_speedup(alpha, gamma, c, batch, *, ridge=RIDGE) -> float
    break_even_batch(alpha, gamma, c, *, ridge=RIDGE) -> float

**Prompt lookup (n-gram drafting).** ``ngram_propose`` takes the sequence so far (a 1-D integer
tensor or a list of ints) and looks for an EARLIER occurrence of its last ``n`` tokens: a start
``j`` with ``tokens[j:j+n] == tokens[L-n:L]`` and ``j + n < L`` (the suffix itself, ``j = L - n``,
is not a match: nothing follows it). Ties go to the most recent occurrence (the largest ``j``).
It proposes what followed: ``tokens[j+n : j+n+gamma]`` (fewer than ``gamma`` tokens when the
sequence ends first; overlapping the suffix is allowed). No match, ``L <= n`` or ``gamma == 0``:
``[]`` (the loop then runs a plain target step). No fallback to shorter n-grams.

Choices the law leaves open (checked only at the token-exact level): WHICH earlier occurrence is
followed (here the most recent; any earlier occurrence's continuation is a lawful proposal, and
the loop is lossless with any of them).

**The loop.** ``speculative_generate`` decodes one sequence (``prompt``: 1-D integer tensor,
length >= 1) with a target model and either a draft model (the same interface:
``config.vocab_size``, ``config.max_seq_len``, ``model(tokens, cache) -> logits``,
``new_cache(batch, max_seq_len)``; e.g. a reference Transformer with fewer layers or other
weights, same vocabulary) or ``draft=None`` (n-gram drafting with ``n = 2``). Each round:

1. the draft proposes γ_r = min(γ, tokens still to emit - 1) tokens (a draft model samples them
   one by one from q = softmax(logits / temperature), argmax at temperature 0; the n-gram
   proposer may give fewer, and its q is one-hot: ``draft_probs=None``);
2. the target scores [last emitted token] + drafts in ONE forward pass (its KV cache holds every
   earlier token), giving p_0 .. p_γr;
3. ``reference.speculative.verify`` (the verifier concept) keeps k drafts and emits one more
   token (recovered, or the bonus token if all were accepted): k + 1 tokens per round;
4. both KV caches are rolled back to the tokens that are kept (the rejected drafts' K/V are
   dropped).

So the target model is called once for the prefill (``prompt[:-1]``, skipped for a 1-token
prompt) and once per round, and a round whose drafts are all accepted emits γ_r + 1 tokens.
Temperature 0 is greedy: the output is EXACTLY ``reference.generate.generate``'s greedy tokens
for any draft. Temperature > 0: p = softmax(logits / temperature) in float64, and every emitted
token is distributed as the target's next-token distribution given the tokens before it.
Randomness: only ``generator`` (draft sampling and verify's uniforms); required when
temperature > 0 (ValueError), ignored at 0. Returns int64 (max_new_tokens,), prompt excluded.

**A draft-model proposer.** ``draft_model(target, *, n_layers=None, noise=0.0, seed=0)`` builds
a draft from a target with the reference ``Transformer``'s interface, checked by what it has, not
by its class (it may be another process's model seen through a proxy, or any equivalent model):
``config`` (a ``reference.model.ModelConfig``), ``state_dict()`` (the reference Transformer's
parameter names and shapes for that config), ``attention_fn`` (the attention the draft uses too)
and ``device``. The draft is a new reference-style Transformer with the target's config but
``n_layers`` layers (default: all; 1 <= n_layers <= the target's), holding COPIES of the target's
embedding, its FIRST ``n_layers`` decoder layers, final norm and lm_head (an early-exit /
layer-skipping self-draft: same vocabulary, shallower), each parameter W then perturbed to
``W + noise * std(W) * N(0, 1)`` (std over W's entries, float32 normal draws from
``torch.Generator().manual_seed(seed)`` in state_dict order; noise >= 0, 0 = exact copies). The
target is never modified. It plugs into ``speculative_generate`` as ``draft``.

**Closed forms (05.09).** With per-position acceptance rate α = E_x~q[min(1, p(x)/q(x))] =
Σ_x min(p(x), q(x)), i.i.d. over positions, a round emits 1 + (accepted drafts) tokens, whose mean
is ``expected_tokens_per_step(α, γ) = (1 - α^(γ+1)) / (1 - α)`` (γ + 1 at α = 1). With a draft
step costing c target steps, ``speedup(α, γ, c) = expected_tokens_per_step(α, γ) / (c γ + 1)``;
``break_even_alpha(γ, c)`` is the α in [0, 1] where the speedup is exactly 1 (speculation wins
above it), found by bisection (float64, to 1e-12); it is 0 when c == 0 (any α wins or ties), c
exactly at γ = 1, and it raises ValueError naming ``c`` for c > 1 (speculation never breaks even)
and naming ``gamma`` for γ = 0 (plain decoding: speedup 1/(0 + 1) = 1 for every α).

**Why speculation loses at large batch (05.11): a roofline cost model.** Time is measured in
memory-bound target steps: a target forward over T tokens in total (batch x tokens per row)
costs ``max(1, T / ridge)`` -- the weights are read once (cost 1) until the arithmetic catches up
at T = ``ridge`` tokens (the GPU's FLOP/s over its bytes/s for 2-byte weights: ~295 for an H100,
``RIDGE``), after which the time grows linearly with T (compute-bound). A draft step costs c
times a target step at the same batch. Plain decoding at batch B: ``max(1, B / ridge)`` per B
tokens. Speculative decoding: γ draft steps ``c γ max(1, B / ridge)`` plus ONE verification pass
over B (γ + 1) tokens, ``max(1, B (γ + 1) / ridge)``, for B E tokens (E =
expected_tokens_per_step(α, γ)). So::

    batch_speedup(α, γ, c, B) = E max(1, B/ridge) / (c γ max(1, B/ridge) + max(1, B (γ+1)/ridge))

Limits: B (γ + 1) <= ridge (memory-bound throughout): ``speedup(α, γ, c)``, the 05.09 formula.
B >= ridge (compute-bound throughout): E / (c γ + γ + 1) <= 1, with equality only at α = 1,
c = 0 -- verifying γ + 1 tokens then costs γ + 1 steps, and every rejected draft is paid for.
``break_even_batch(α, γ, c)``: the batch where the speedup falls to 1 (speculation wins below it,
loses above it), in closed form ridge (E - c γ) / (γ + 1) when E - c γ > 1 (it lies in
(ridge / (γ + 1), ridge]), else 0 (speculation never wins, at any batch; at α = 1, c = 0 it ties
from ridge on). batch is a real >= 0 (a mean batch); ridge a finite real > 0.

Bad input: TypeError (wrong kind) or ValueError (wrong value) naming the argument: tokens/prompt
not a 1-D integer tensor (or, for tokens, a list of ints), empty prompt; gamma, n, max_new_tokens
not ints (gamma >= 0, n >= 1, max_new_tokens >= 0); temperature not a finite real >= 0; alpha not
a real in [0, 1]; c not a finite real >= 0; a draft with another vocabulary; prompt + max_new_tokens
past the target's max_seq_len; a generator that is not a torch.Generator; a target without a
ModelConfig ``config`` or a ``state_dict()`` (TypeError naming ``target``), n_layers not an int in
[1, target's], noise not a finite real >= 0, seed not an int; batch not a finite real >= 0, ridge
not a finite real > 0.
"""
from __future__ import annotations

import math

import torch

from reference._checks import check_int, check_real, check_tensor
from reference.speculative import verify

__all__ = ["ngram_propose", "speculative_generate", "draft_model", "expected_tokens_per_step", "speedup",
           "break_even_alpha", "batch_speedup", "break_even_batch"]  # the contract
__optional__ = []


# ----------------------------------------------------------------------------- n-gram proposer
def _token_list(name: str, tokens) -> list[int]:
    if isinstance(tokens, torch.Tensor):
        check_tensor(name, tokens, ndim=1, dims="seq")
        if tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:
            raise TypeError(f"{name} must hold integers, got {tokens.dtype}")
        return [int(t) for t in tokens.tolist()]
    if isinstance(tokens, (list, tuple)):
        for i, t in enumerate(tokens):
            check_int(f"{name}[{i}]", t)
        return list(tokens)
    raise TypeError(f"{name} must be a 1-D integer tensor or a list of ints, got {type(tokens).__name__}")


def ngram_propose(tokens, gamma: int, *, n: int = 2) -> list[int]:
    """Up to ``gamma`` tokens that followed the most recent earlier occurrence of the last ``n``
    tokens (module doc); ``[]`` when there is none."""
    seq = _token_list("tokens", tokens)
    check_int("gamma", gamma, minimum=0)
    check_int("n", n, minimum=1)
    length = len(seq)
    if gamma == 0 or length <= n:
        return []
    suffix = seq[length - n:]
    for j in range(length - n - 1, -1, -1):          # most recent first; j = L - n is the suffix
        if seq[j:j + n] == suffix:
            return seq[j + n:j + n + gamma]
    return []


# ----------------------------------------------------------------------------- draft model
@torch.no_grad()
def draft_model(target, *, n_layers: int | None = None, noise: float = 0.0, seed: int = 0):
    """A shallower and/or perturbed copy of a target with the reference Transformer's interface
    (module doc)."""
    from reference.model import ModelConfig, Transformer
    if not isinstance(getattr(target, "config", None), ModelConfig) or not callable(getattr(target, "state_dict", None)):
        raise TypeError("target must be a model with the reference Transformer's interface (a ModelConfig "
                        f"config, state_dict(), attention_fn, device), got {type(target).__name__}")
    layers = target.config.n_layers if n_layers is None else check_int("n_layers", n_layers, minimum=1)
    if layers > target.config.n_layers:
        raise ValueError(f"n_layers must be <= the target's {target.config.n_layers}, got {layers}")
    sigma = float(check_real("noise", noise, minimum=0))
    check_int("seed", seed)
    draft = Transformer(target.config.replace(n_layers=layers), attention=target.attention_fn).to(target.device)
    source = target.state_dict()
    g = torch.Generator().manual_seed(seed)
    for name, p in draft.named_parameters():
        w = source[name].detach()
        if sigma:
            draw = torch.randn(p.shape, generator=g, dtype=torch.float32).to(device=w.device)
            w = (w.to(torch.float32) + sigma * w.to(torch.float32).std(unbiased=False) * draw).to(p.dtype)
        p.copy_(w)
    return draft


# ----------------------------------------------------------------------------- the loop
def _truncate(cache, length: int) -> None:
    """Roll a KV cache back to its first ``length`` positions (later K/V are overwritten next)."""
    cache.lengths = [length] * len(cache.lengths)


def _probs(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """softmax(logits / T) in float64; at T = 0 one-hot on the argmax (verify only validates it)."""
    logits = logits.to(torch.float64)
    if temperature == 0:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).to(torch.float64)
    return torch.softmax(logits / temperature, dim=-1)


def _check_model(name: str, model) -> None:
    for attr in ("config", "new_cache"):
        if not hasattr(model, attr) or not callable(model):
            raise TypeError(f"{name} must be a model (config, new_cache, __call__), got {type(model).__name__}")


@torch.no_grad()
def speculative_generate(target, draft, prompt: torch.Tensor, gamma: int, *, max_new_tokens: int,
                         temperature: float = 1.0,
                         generator: torch.Generator | None = None) -> torch.Tensor:
    """Speculative decoding of one sequence (module doc); returns the new tokens, int64."""
    _check_model("target", target)
    if draft is not None:
        _check_model("draft", draft)
        if draft.config.vocab_size != target.config.vocab_size:
            raise ValueError(f"draft: vocab_size {draft.config.vocab_size} != target's {target.config.vocab_size}")
    check_tensor("prompt", prompt, ndim=1, dims="seq")
    if prompt.dtype.is_floating_point or prompt.dtype.is_complex or prompt.dtype == torch.bool:
        raise TypeError(f"prompt must be an integer tensor, got {prompt.dtype}")
    if prompt.numel() == 0:
        raise ValueError("prompt must hold at least one token")
    vocab = target.config.vocab_size
    if int(prompt.min()) < 0 or int(prompt.max()) >= vocab:
        raise ValueError(f"prompt: ids must be in [0, {vocab})")
    check_int("gamma", gamma, minimum=0)
    check_int("max_new_tokens", max_new_tokens, minimum=0)
    temperature = float(check_real("temperature", temperature, minimum=0))
    if not math.isfinite(temperature):
        raise ValueError(f"temperature must be finite, got {temperature}")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    if temperature > 0 and generator is None:
        raise ValueError("generator: sampling (temperature > 0) needs an explicit torch.Generator")
    total = prompt.numel() + max_new_tokens
    for name, model in (("target", target), ("draft", draft)):
        if model is not None and total > model.config.max_seq_len:
            raise ValueError(f"max_new_tokens: prompt ({prompt.numel()}) + max_new_tokens ({max_new_tokens}) "
                             f"exceeds the {name}'s max_seq_len={model.config.max_seq_len}")
    if max_new_tokens == 0:
        return torch.empty(0, dtype=torch.int64, device=prompt.device)

    greedy = temperature == 0
    device = prompt.device
    seq = [int(t) for t in prompt.tolist()]
    t_cache = target.new_cache(1, total)
    if len(seq) > 1:
        target(torch.tensor([seq[:-1]], device=device), cache=t_cache)   # prefill all but the last
    d_cache = draft.new_cache(1, total) if draft is not None else None
    emitted: list[int] = []
    while len(emitted) < max_new_tokens:
        g = min(gamma, max_new_tokens - len(emitted) - 1)
        # 1. propose
        q = None
        if draft is None:
            drafts = ngram_propose(seq, g)
        else:
            drafts, qs = [], []
            logits = draft(torch.tensor([seq[d_cache.seq_len:]], device=device), cache=d_cache)[0, -1]
            for i in range(g):
                qi = _probs(logits, temperature)
                x = int(qi.argmax()) if greedy else int(torch.multinomial(qi, 1, generator=generator))
                drafts.append(x)
                qs.append(qi)
                if i + 1 < g:
                    logits = draft(torch.tensor([[x]], device=device), cache=d_cache)[0, -1]
            q = torch.stack(qs)[None] if qs else torch.empty(1, 0, vocab, dtype=torch.float64, device=device)
        # 2. score [last token] + drafts in one target pass
        kept = t_cache.seq_len                        # = len(seq) - 1
        logits = target(torch.tensor([seq[-1:] + drafts], device=device), cache=t_cache)[0]
        p = _probs(logits, temperature)[None]
        # 3. verify
        x = torch.tensor([drafts], dtype=torch.int64, device=device).reshape(1, len(drafts))
        tokens, num_accepted = verify(p, q, x, greedy=greedy, generator=generator if not greedy else None,
                                      uniforms=torch.zeros(1, len(drafts) + 1, dtype=torch.float64,
                                                           device=device) if greedy else None)
        k = int(num_accepted[0])
        new = [int(t) for t in tokens[0, :k + 1].tolist()]
        # 4. roll back: keep the last token and the k accepted drafts
        _truncate(t_cache, kept + 1 + k)
        if d_cache is not None:
            _truncate(d_cache, min(d_cache.seq_len, len(seq) + k))
        seq += new
        emitted += new
    return torch.tensor(emitted[:max_new_tokens], dtype=torch.int64, device=device)


# ----------------------------------------------------------------------------- closed forms
def _alpha(alpha) -> float:
    a = float(check_real("alpha", alpha))
    if not 0 <= a <= 1:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    return a


def _cost(c) -> float:
    value = float(check_real("c", c, minimum=0))
    if not math.isfinite(value):
        raise ValueError(f"c must be finite, got {c}")
    return value


def expected_tokens_per_step(alpha: float, gamma: int) -> float:
    """(1 - α^(γ+1)) / (1 - α): mean tokens emitted per target forward; γ + 1 at α = 1."""
    a = _alpha(alpha)
    check_int("gamma", gamma, minimum=0)
    if a == 1:
        return float(gamma + 1)
    return (1 - a ** (gamma + 1)) / (1 - a)


def speedup(alpha: float, gamma: int, c: float) -> float:
    """expected_tokens_per_step(α, γ) / (c γ + 1): wall-time speedup over plain decoding when one
    draft step costs c target steps."""
    tokens = expected_tokens_per_step(alpha, gamma)
    return tokens / (_cost(c) * gamma + 1)


def break_even_alpha(gamma: int, c: float) -> float:
    """The α in [0, 1] with speedup(α, γ, c) == 1 (bisection in float64 to 1e-12); 0 when c == 0."""
    check_int("gamma", gamma, minimum=1)
    cost = _cost(c)
    if cost == 0:
        return 0.0
    lo, hi = 0.0, 1.0                                # speedup(0) = 1/(cγ+1) < 1, increasing in α
    if speedup(1.0, gamma, cost) < 1:
        raise ValueError(f"c: with c = {c} speculation never breaks even (speedup at α = 1 is "
                         f"{speedup(1.0, gamma, cost):.6g} < 1)")
    while hi - lo > 1e-12:
        mid = (lo + hi) / 2
        if speedup(mid, gamma, cost) < 1:
            lo = mid
        else:
            hi = mid
    return hi


# ----------------------------------------------------------------------------- large batch (05.11)
RIDGE = 295.0   # tokens per forward at which an H100 (989 TFLOP/s bf16, 3.35 TB/s) turns compute-bound


def _ridge(ridge) -> float:
    value = float(check_real("ridge", ridge))
    if value <= 0:
        raise ValueError(f"ridge must be > 0, got {ridge}")
    return value


def _step(tokens: float, ridge: float) -> float:
    """Time of one target forward over ``tokens`` tokens, in memory-bound steps."""
    return max(1.0, tokens / ridge)


def batch_speedup(alpha: float, gamma: int, c: float, batch: float, *, ridge: float = RIDGE) -> float:
    """Speculative over plain decoding throughput at ``batch`` under the roofline cost model
    (module doc); speedup(α, γ, c) while B (γ + 1) <= ridge, E / (cγ + γ + 1) once B >= ridge."""
    tokens = expected_tokens_per_step(alpha, gamma)
    cost = _cost(c)
    b = float(check_real("batch", batch, minimum=0))
    r = _ridge(ridge)
    plain = _step(b, r)
    return tokens * plain / (cost * gamma * plain + _step(b * (gamma + 1), r))


def break_even_batch(alpha: float, gamma: int, c: float, *, ridge: float = RIDGE) -> float:
    """The batch where batch_speedup falls to 1: ridge (E - cγ) / (γ + 1) when E - cγ > 1, else 0
    (module doc)."""
    tokens = expected_tokens_per_step(alpha, gamma)
    cost = _cost(c)
    r = _ridge(ridge)
    margin = tokens - cost * gamma
    return r * margin / (gamma + 1) if margin > 1 else 0.0
