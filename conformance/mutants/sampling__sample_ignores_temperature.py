"""The generator path draws from the right support (the filtered set) but with weights
exp(x - max x), forgetting the temperature; sampling_probs and explicit uniforms are right.
Same support, wrong weights: only a statistical test on generator draws can see it."""
import torch

import reference.sampling as ref
from conformance.mutants._sampling_common import make

TARGET = "sampling"


def _draw(x, rows, probs, generator):
    w = torch.where(probs > 0, torch.exp(x - x.amax(dim=1, keepdim=True)), torch.zeros_like(x))
    return ref.inverse_cdf(w, ref.draw_uniforms(generator, x.shape[0], x.device))


sampling_probs, sample = make(draw_fn=_draw)
