"""Memoises results by input shape and options (a "plan cache" gone wrong): the second call with
the same shapes returns the first call's output."""
import reference.attention as ref

TARGET = "attention"
_cache = {}


def attention(q, k, v, *, causal=False, window=None, scale=None, return_lse=False):
    key = (q.shape, k.shape, q.dtype, causal, window, scale, return_lse)
    if key not in _cache:
        _cache[key] = ref.attention(q, k, v, causal=causal, window=window, scale=scale, return_lse=return_lse)
    return _cache[key]
