"""The generator path samples from the UNFILTERED distribution softmax(z) (top-k/top-p/min-p
ignored), while sampling_probs and the explicit-uniforms path are right: only tests that draw
with a generator can see it."""
import torch

import reference.sampling as ref
from conformance.mutants._sampling_common import make

TARGET = "sampling"


def _draw(x, rows, probs, generator):
    z = ref.scale_temperature(x, rows.temperature)
    unfiltered = torch.softmax(z, dim=1)
    greedy = (rows.temperature == 0)[:, None]
    unfiltered = torch.where(greedy, probs, unfiltered)
    return ref.inverse_cdf(unfiltered, ref.draw_uniforms(generator, x.shape[0], x.device))


sampling_probs, sample = make(draw_fn=_draw)
