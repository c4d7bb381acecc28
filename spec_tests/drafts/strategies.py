"""Strategies and tiny models for the `drafts` concept."""
from __future__ import annotations

from hypothesis import strategies as st


def token_lists(vocab: int = 3, max_size: int = 12) -> st.SearchStrategy[list[int]]:
    """Short sequences over a tiny vocabulary (so n-grams repeat often)."""
    return st.lists(st.integers(0, vocab - 1), min_size=0, max_size=max_size)


def tiny_models(reference, *, vocab: int = 8, layers: int = 2, seed: int = 1, max_seq_len: int = 48):
    """A tiny reference Transformer (vocab <= 16, dim 16)."""
    config = reference.of("model").get("ModelConfig")(vocab_size=vocab, dim=16, n_layers=layers, n_heads=2,
                                                n_kv_heads=1, max_seq_len=max_seq_len)
    return reference.of("model").get("Transformer")(config, seed=seed)


def ngram_oracle(tokens: list[int], gamma: int, n: int) -> list[int]:
    """Brute force: every earlier occurrence of the last n tokens, the most recent wins."""
    length = len(tokens)
    if gamma == 0 or length <= n:
        return []
    starts = [j for j in range(length - n) if tokens[j:j + n] == tokens[length - n:]]
    return tokens[max(starts) + n:max(starts) + n + gamma] if starts else []


# A greedy step is a genuine near-tie when its two largest float32 logits are closer than this
# times (1 + max |logit|): the target's logits of one position computed in other shapes (a
# chunk of γ + 1 tokens in the speculative loop, one token in generate's decode; BLAS and ATen
# pick their kernels from the shape and the CPU) differ by up to ~3e-6 on these tiny models
# (about 12 float32 ulps of logits ~2.7), so below this gap the argmax may go either way.
NEAR_TIE = 2e-5


def assert_target_greedy(got, reference, target, prompt, max_new_tokens: int, what: str = "") -> None:
    """``got`` == reference.generate's greedy tokens of ``target`` after ``prompt``, step by step,
    except at a genuine near-tie (NEAR_TIE): where they first differ, ``got``'s token must be one
    of the near-tied argmax candidates of that step, and the steps after it are not compared (they
    continue from another token)."""
    import torch
    tokens, logits = reference.of("generate").get("generate")(target, torch.as_tensor(prompt)[None], max_new_tokens)
    want, lg = tokens[0], logits[0].detach().double().cpu()
    got = torch.as_tensor(got).to(torch.int64).cpu()
    assert got.shape == want.shape, f"{what}: {got.tolist()} vs the target's greedy {want.tolist()}"
    budget = NEAR_TIE * (1 + lg.abs().amax(-1, keepdim=True))
    near = lg.amax(-1, keepdim=True) - lg <= budget          # the argmax candidates of each step
    for i, (a, b) in enumerate(zip(got.tolist(), want.tolist())):
        if a != b:
            assert int(near[i].sum()) > 1 and bool(near[i, a]), (
                f"{what}: {got.tolist()} != the target's greedy {want.tolist()} at step {i}, not a near-tie "
                f"(logits {lg[i].tolist()})")
            return


def closed_form_abs(alpha: float) -> float:
    """The absolute rounding a correct float64 evaluation of (1 - α^(γ+1)) / (1 - α) -- the
    contract's own formula -- may carry near α = 1: α^(γ+1) is rounded (a few 1e-16) and then
    nearly cancelled by 1, and the difference is divided by 1 - α. At α = 1 - 1.4e-9, γ = 7 the
    formula is 8.0 where the sum 1 + α + ... + α^7 is 7.99999996 (5e-9 relative): both are correct
    evaluations of the contract. Added to the tests' 1e-9 relative tolerance."""
    return 1e-12 if alpha >= 1 else max(1e-12, 1e-15 / (1 - alpha))
