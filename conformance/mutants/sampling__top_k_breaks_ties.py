"""Top-k keeps exactly k tokens: ties at the k-th value are broken by position (the first k of a
stable sort), instead of keeping every token tied with the k-th."""
import torch

from conformance.mutants._sampling_common import filtered, make

TARGET = "sampling"


def _top_k(z, top_k):
    vocab = z.shape[1]
    k = torch.where((top_k > 0) & (top_k < vocab), top_k, torch.full_like(top_k, vocab))
    order = torch.sort(z, dim=1, descending=True, stable=True).indices
    rank = torch.empty_like(order).scatter_(1, order, torch.arange(vocab, device=z.device).expand_as(order))
    return rank < k[:, None]


sampling_probs, sample = make(lambda x, rows: filtered(x, rows, top_k=_top_k))
