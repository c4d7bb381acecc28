"""Top-p measured on the full-vocabulary distribution instead of the top-k survivors
renormalised (both filters computed from the same softmax, then intersected)."""
import torch

import reference.sampling as ref
from conformance.mutants._sampling_common import filtered, make

TARGET = "sampling"


def _top_p(z, survivors, top_p):
    return survivors & ref.top_p_mask(z, torch.ones_like(survivors), top_p)


sampling_probs, sample = make(lambda x, rows: filtered(x, rows, top_p=_top_p))
