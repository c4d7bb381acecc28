"""Oracles of `lora` written without the reference: every row in float64, alone, with its own
adapter (or none), and the merged weight in float64."""
from __future__ import annotations

import torch


def lora(x, base_weight, lora_a, lora_b, adapter_ids, alpha) -> torch.Tensor:
    """y (B, d_out) float64, row by row: x W^T + (alpha / r) (x A^T) B^T for its adapter."""
    rank = lora_a.shape[1]
    y = torch.zeros((x.shape[0], base_weight.shape[0]), dtype=torch.float64)
    for i in range(x.shape[0]):
        v = x[i].cpu().double()
        y[i] = base_weight.cpu().double() @ v
        a = int(adapter_ids[i])
        if a >= 0:
            y[i] += alpha / rank * (lora_b[a].cpu().double() @ (lora_a[a].cpu().double() @ v))
    return y


def merged(base_weight, lora_a, lora_b, alpha) -> torch.Tensor:
    """W + (alpha / r) B A in float64."""
    return base_weight.cpu().double() + alpha / lora_a.shape[0] * (lora_b.cpu().double() @ lora_a.cpu().double())
