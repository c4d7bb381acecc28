"""Planted bugs of `compaction` (each must make a test fail): the slips of editing a history and of
pricing what the edit does to the prefix cache."""
from conformance.declarations import Patch

MUTANTS = [
    Patch("compact_skips_one", "compact drops one token too many after the edited span.",
          "    return list(context[:start]) + list(replacement) + list(context[stop:])\n",
          "    return list(context[:start]) + list(replacement) + list(context[stop + 1:])\n"),
    Patch("compact_keeps_removed", "compact inserts the replacement after the span instead of in its place.",
          "    return list(context[:start]) + list(replacement) + list(context[stop:])\n",
          "    return list(context[:stop]) + list(replacement) + list(context[stop:])\n"),
    Patch("common_prefix_counts_matches", "common_prefix counts the positions where the two contexts agree, "
          "not the prefix up to the first difference.",
          "        if x != y:\n            break\n", "        if x != y:\n            continue\n"),
    Patch("last_token_served", "The hit is matched on the whole new context: a context resent unchanged "
          "is served entirely from cache, its last token included (whose logits must be computed).",
          "    return cache.match_prefix(list(new[:-1])).length\n",
          "    return cache.match_prefix(list(new)).length\n"),
    Patch("hit_ignores_blocks", "The hit counts tokens, not whole blocks (the cache's page size left at 1).",
          "    cache = RadixCache(page_size=check_int(\"block_size\", block_size, minimum=1))\n",
          "    cache = RadixCache(page_size=1 if check_int(\"block_size\", block_size, minimum=1) else 1)\n"),
    Patch("hit_content_only", "The cache keys a block by its tokens alone, not by its whole prefix: after "
          "the edit, blocks whose tokens were cached at another position hit (their K/V belong to other "
          "positions and another history).",
          "    cache = RadixCache(page_size=check_int(\"block_size\", block_size, minimum=1))\n"
          "    cache.insert(list(old), list(range(len(old))))\n"
          "    return cache.match_prefix(list(new[:-1])).length\n",
          "    b = check_int(\"block_size\", block_size, minimum=1)\n"
          "    cached = {tuple(old[i:i + b]) for i in range(0, len(old) - b + 1, b)}\n"
          "    hit = 0\n"
          "    while hit + b <= len(new) - 1 and tuple(new[hit:hit + b]) in cached:\n"
          "        hit += b\n"
          "    return hit\n"),
    Patch("prefill_ignores_hit", "edit_cost prefills the whole new context, as if nothing were cached.",
          "    prefill = len(new) - hit\n", "    prefill = len(new)\n"),
    Patch("resident_is_prefill", "edit_cost counts as held only the K/V written by this prefill.",
          "    return EditCost(hit, prefill, prefill * kv_bytes_per_token, len(new) * kv_bytes_per_token,\n",
          "    return EditCost(hit, prefill, prefill * kv_bytes_per_token, prefill * kv_bytes_per_token,\n"),
    Patch("seconds_inverted", "edit_cost reads the prefill rate as seconds per token.",
          "                    prefill / prefill_rate)\n", "                    prefill * prefill_rate)\n"),
    Patch("break_even_inverted", "break_even_steps divides the saving per step by the extra prefill.",
          "    return extra / (saved / bandwidth)\n", "    return (saved / bandwidth) / extra\n"),
]
