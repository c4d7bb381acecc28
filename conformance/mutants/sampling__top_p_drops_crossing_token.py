"""Top-p drops the token that crosses p: a token is kept only while the cumulative mass
INCLUDING it is <= p (the off-by-one of masking ``cumsum > p`` instead of ``cumsum - q > p``);
the most likely token is always kept so a row is never empty."""
import math

import torch

from conformance.mutants._sampling_common import filtered, make

TARGET = "sampling"


def _top_p(z, survivors, top_p):
    zs = torch.where(survivors, z, torch.full_like(z, -math.inf))
    q = torch.softmax(zs, dim=1)
    z_sorted, order = torch.sort(zs, dim=1, descending=True, stable=True)
    cum = torch.cumsum(q.gather(1, order), dim=1)
    kept = (cum <= top_p[:, None]) | (top_p[:, None] >= 1)
    kept[:, 0] = True
    v = torch.where(kept, z_sorted, torch.full_like(z_sorted, math.inf)).amin(dim=1, keepdim=True)
    return survivors & (z >= v)


sampling_probs, sample = make(lambda x, rows: filtered(x, rows, top_p=_top_p))
