"""Min-p threshold taken relative to the max of the distribution BEFORE temperature
(p_t / p_max computed from the raw logits) instead of the temperature-scaled one."""
import torch

from conformance.mutants._sampling_common import filtered, make

TARGET = "sampling"


def _min_p(x, z, rows):
    return torch.exp(x - x.amax(dim=1, keepdim=True)) >= rows.min_p[:, None]


sampling_probs, sample = make(lambda x, rows: filtered(x, rows, min_p=_min_p))
