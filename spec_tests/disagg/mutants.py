"""Planted bugs of `disagg` (each must make a disagg test fail)."""
from conformance.declarations import Patch

MUTANTS = [
    Patch("sends_whole_buffer",
          "The payload is the cache's whole max_seq_len buffer (``cache.k[:, 0]``), not its filled "
          "positions: the header then announces every position of the buffer, the decode worker "
          "attends to zeros past the prompt, and the bytes moved are those of the buffer.",
          "    return cache.k[:, 0, :, :n].contiguous(), cache.v[:, 0, :, :n].contiguous()\n",
          "    return cache.k[:, 0].contiguous(), cache.v[:, 0].contiguous()\n"),
    Patch("sends_k_twice",
          "A copy-paste slip sends K where V belongs: the bytes are right, the decode worker's values "
          "are the keys.",
          "    return cache.k[:, 0, :, :n].contiguous(), cache.v[:, 0, :, :n].contiguous()\n",
          "    return cache.k[:, 0, :, :n].contiguous(), cache.k[:, 0, :, :n].contiguous()\n"),
    Patch("forgets_last_position",
          "An off-by-one in the payload's length (``seq_len - 1``, as if the last prompt token were "
          "decoded again): the decode worker never sees the last prompt position's K/V.",
          "    n = cache.seq_len\n",
          "    n = max(cache.seq_len - 1, 1)\n"),
    Patch("cache_length_not_set",
          "The decode worker writes the received K/V straight into its cache's buffer without "
          "setting the cache's lengths: seq_len stays 0, so the first decoded token's RoPE position "
          "restarts at 0 and it overwrites position 0 of the prompt.",
          "        cache.append(layer, k[layer][None].to(cache.k.device), v[layer][None].to(cache.v.device))\n",
          "        cache.k[layer, :, :, :header.n_tokens] = k[layer][None].to(cache.k.device)\n"
          "        cache.v[layer, :, :, :header.n_tokens] = v[layer][None].to(cache.v.device)\n"),
    Patch("failed_handoff_dropped",
          "A hand-off that raises is skipped (``break`` out of the retry loop after the first error): "
          "the request is neither retried nor reported failed -- it keeps an empty status, silently lost.",
          "                live.remove(rank)\n                continue\n",
          "                live.remove(rank)\n                h.status = 'pending'\n                break\n"),
    Patch("no_ack_awaited",
          "The sender counts a request handed off once its payload is sent, without waiting for the "
          "ack: a decode worker that dies holding the KV takes the request with it.",
          "    _send(v, dst, group, timeout)\n    _reply(dst, group, timeout, header.request_id, ACK, k.device)\n",
          "    _send(v, dst, group, timeout)\n"),
]
