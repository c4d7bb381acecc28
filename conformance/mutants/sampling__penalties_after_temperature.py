"""Repetition/presence/frequency penalties applied to the temperature-scaled logits (after
temperature) instead of before it: x/T - f*count instead of (x - f*count)/T."""
import reference.sampling as ref
from conformance.mutants._sampling_common import make

TARGET = "sampling"


def _processed(logits, params, prompt_tokens, output_tokens):
    ref.check_logits(logits)
    batch, vocab = logits.shape
    prompt = ref.token_lists(prompt_tokens, "prompt_tokens", batch, vocab)
    output = ref.token_lists(output_tokens, "output_tokens", batch, vocab)
    x, rows = ref.processed_logits(logits, params)            # validation and bias, no penalties
    return x, (rows, prompt, output)


def _probs(x, ctx):
    rows, prompt, output = ctx
    z = ref.scale_temperature(x, rows.temperature)
    z = ref.apply_penalties(z, rows, prompt, output)           # the bug: after temperature
    keep = ref.top_k_mask(z, rows.top_k)
    keep = ref.top_p_mask(z, keep, rows.top_p)
    keep = keep & ref.min_p_mask(z - z.amax(dim=1, keepdim=True), rows.min_p)
    greedy = (rows.temperature == 0)[:, None]
    return ref.torch.where(greedy, ref.greedy_probs(ref.apply_penalties(x, rows, prompt, output)),
                           ref.masked_softmax(z, keep))


sampling_probs, sample = make(_probs, _processed)
