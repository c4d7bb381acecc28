"""Shared scaffolding of the sampling mutants (not a mutant itself: no ``__`` in its name).

``make`` assembles the contract (sampling_probs, sample) from the reference's steps with one step
swapped, so each mutant file holds only its bug.
"""
import reference.sampling as ref


def default_processed(logits, params, prompt_tokens, output_tokens):
    return ref.processed_logits(logits, params, prompt_tokens, output_tokens)


def make(probs_fn=ref.probs_from_processed, processed_fn=default_processed, draw_fn=None):
    """probs_fn(x, ctx) -> probs; processed_fn(...) -> (x, ctx); draw_fn(x, ctx, probs, generator)
    replaces the generator draw (explicit uniforms still use the reference's inverse CDF)."""

    def sampling_probs(logits, params=None, *, prompt_tokens=None, output_tokens=None):
        x, ctx = processed_fn(logits, params, prompt_tokens, output_tokens)
        if x.shape[0] == 0:
            return x.clone()
        return probs_fn(x, ctx)

    def sample(logits, params=None, generator=None, *, prompt_tokens=None, output_tokens=None, uniforms=None):
        ref.check_logits(logits)
        batch = logits.shape[0]
        if uniforms is not None:
            uniforms = ref.check_uniforms(uniforms, batch, logits.device)
        ref.check_generator(generator, uniforms, logits.device)
        x, ctx = processed_fn(logits, params, prompt_tokens, output_tokens)
        if batch == 0:
            return ref.torch.zeros(0, dtype=ref.torch.int64, device=logits.device)
        probs = probs_fn(x, ctx)
        if uniforms is None and draw_fn is not None:
            return draw_fn(x, ctx, probs, generator)
        u = uniforms if uniforms is not None else ref.draw_uniforms(generator, batch, logits.device)
        return ref.inverse_cdf(probs, u)

    return sampling_probs, sample


def filtered(x, rows, *, top_k=ref.top_k_mask, top_p=ref.top_p_mask, min_p=None):
    """Steps 3-6 with replaceable filters (min_p(x, z, rows) -> mask)."""
    import torch
    z = ref.scale_temperature(x, rows.temperature)
    keep = top_k(z, rows.top_k)
    keep = top_p(z, keep, rows.top_p)
    keep = keep & (ref.min_p_mask(z, rows.min_p) if min_p is None else min_p(x, z, rows))
    probs = ref.masked_softmax(z, keep)
    greedy = (rows.temperature == 0)[:, None]
    return torch.where(greedy, ref.greedy_probs(x), probs)
