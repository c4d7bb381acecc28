"""Planted bugs of `batching` (each must make a batching test fail)."""
from conformance.declarations import Patch

MUTANTS = [
    Patch("rope_positions_restart",
          "In the ragged batch every request's RoPE positions restart at 0 (the positions of a "
          "prefill alone), ignoring its cache's seq_len: a decode token is rotated as if it were the "
          "first token of its sequence.",
          "[torch.arange(s, s + n, device=device) for s, n in zip(starts, lengths)]",
          "[torch.arange(0, n, device=device) for s, n in zip(starts, lengths)]"),
    Patch("attention_across_requests",
          "The concatenated batch is attended as one sequence: each request's queries see the keys "
          "of the requests before it in the batch (a causal mask over the flat token row instead of "
          "one per request).",
          "        kk, vv = cache.append(layer, k[:, :, a:a + n], v[:, :, a:a + n])\n",
          "        kk, vv = cache.append(layer, k[:, :, a:a + n], v[:, :, a:a + n])\n"
          "        kk, vv = torch.cat([k[:, :, :a], kk], dim=2), torch.cat([v[:, :, :a], vv], dim=2)\n"),
    Patch("slot_freed_at_batch_end",
          "A finished request's slot is not freed until every running request has finished (the "
          "batch is only refilled when it drains): static batching under a continuous name.",
          "        running = [i for i in running if left[i] > 0]\n",
          "        running = running if any(left[i] > 0 for i in running) else []\n"),
    Patch("padding_attended",
          "Static batching's left padding is attended: each row's queries see the padded cache "
          "positions (token 0) before its prompt.",
          "attention_fn(q[b:b + 1, :, first:], kk[b:b + 1, :, p:], vv[b:b + 1, :, p:],",
          "attention_fn(q[b:b + 1, :, first:], kk[b:b + 1], vv[b:b + 1],"),
    Patch("padded_rope_positions",
          "Static batching counts RoPE positions from the padded row's first column, so a "
          "left-padded prompt starts at position pad instead of 0. RoPE scores depend on position "
          "differences only, so in exact arithmetic nothing changes: the rounding does, which the "
          "bitwise test under the batch-invariant mode sees (the tolerance rule cannot).",
          "torch.arange(start + f - p, start + n - p, device=tokens.device)",
          "torch.arange(start + f, start + n, device=tokens.device)"),
    Patch("idle_uses_max_length",
          "The long-run idle fraction divides E[L] by the largest possible length (n for uniform) "
          "instead of E[max of the B lengths].",
          "    return 1 - mean_length(distribution) / expected_max_length(distribution, batch_size)",
          "    d = _check_distribution(distribution)\n"
          "    check_int(\"batch_size\", batch_size, minimum=1)\n"
          "    top = d.param if d.kind != \"geometric\" else expected_max_length(d, batch_size)\n"
          "    return 1 - mean_length(distribution) / top"),
]
