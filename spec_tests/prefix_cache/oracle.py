"""Brute-force oracles of the prefix cache."""
from __future__ import annotations


def common_blocks(a, b, block_size: int) -> int:
    """Full blocks of the longest common block-aligned prefix of token lists ``a`` and ``b``."""
    n = 0
    while (n + 1) * block_size <= min(len(a), len(b)) and \
            list(a[n * block_size:(n + 1) * block_size]) == list(b[n * block_size:(n + 1) * block_size]):
        n += 1
    return n


def hit_bound(tokens, extra_key, computed, block_size: int) -> int:
    """An upper bound on the hit blocks of ``tokens``: the longest block-aligned common prefix with
    any sequence ever computed under the same extra key (``computed``: (tokens, extra_key,
    computed token count) triples), capped so that the last token is not a hit."""
    best = 0
    for other, key, n in computed:
        if key == extra_key:
            best = max(best, common_blocks(tokens, list(other)[:n], block_size))
    return min(best, (len(tokens) - 1) // block_size)


def resident_hits(tokens, extra_key, resident: dict, block_size: int) -> list:
    """The exact hits: ``resident`` maps each cached block to the (extra_key, prefix tuple) it ends.
    Walk the prompt's full blocks (all but the last token) while each prefix is resident."""
    where = {v: b for b, v in resident.items()}
    hits = []
    for i in range((len(tokens) - 1) // block_size):
        b = where.get((extra_key, tuple(tokens[:(i + 1) * block_size])))
        if b is None:
            break
        hits.append(b)
    return hits
