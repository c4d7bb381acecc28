"""Every pass of a small grid of model shapes (bounded-exhaustive exploration): flops_breakdown,
forward_flops and bytes_breakdown equal FlopCounterMode's counts and the real tensors' bytes.

Shapes: heads (n_heads, n_kv_heads) in {(1, 1), (2, 1), (2, 2), (3, 1), (4, 2)} (MHA, GQA groups
of 2 and 3, MQA); dim = 2 x n_heads with the default head_dim, or an odd dim 5 with head_dim 4
(q_proj is then 5 -> 4 n_heads, not square); hidden_dim the default or 3; (layers, vocab) in
{(1, 1), (2, 6)} -- 80 shapes. Passes (batch, new_tokens, context): prefill (1, 1, 0), (2, 3, 0)
(this one without a cache), decode (1, 1, 3), (3, 1, 1), a chunk (2, 2, 2) -- 400 passes, each
run by the model (about 4 s). ``thorough`` crosses layers and vocab (160 shapes) and adds
(1, 4, 0), (2, 1, 5), (1, 3, 4): 1280 passes.
"""
from __future__ import annotations

import itertools

from hypothesis import settings

from spec_tests.flops.oracles import measure
from spec_tests.flops.strategies import Pass

HEADS = [(1, 1), (2, 1), (2, 2), (3, 1), (4, 2)]
PASSES = [(1, 1, 0), (2, 3, 0), (1, 1, 3), (3, 1, 1), (2, 2, 2)]
THOROUGH_PASSES = [(1, 4, 0), (2, 1, 5), (1, 3, 4)]


def grid():
    thorough = settings.get_current_profile_name() == "thorough"
    sizes = list(itertools.product((1, 2), (1, 6))) if thorough else [(1, 1), (2, 6)]
    for (h, kv), explicit, hidden, (layers, vocab) in itertools.product(HEADS, (False, True), (None, 3), sizes):
        dim, head_dim = (5, 4) if explicit else (2 * h, None)
        for batch, new, context in PASSES + (THOROUGH_PASSES if thorough else []):
            yield Pass(vocab_size=vocab, dim=dim, n_layers=layers, n_heads=h, n_kv_heads=kv, head_dim=head_dim,
                       hidden_dim=hidden, batch=batch, new_tokens=new, context=context)


def test_every_small_pass_equals_the_counter(impl):
    """Every pass of the grid (module doc): the breakdown and total equal FlopCounterMode's, the
    bytes the model's tensors and cache."""
    breakdown, total, nbytes = impl.get("flops_breakdown"), impl.get("forward_flops"), impl.get("bytes_breakdown")
    for case in grid():
        measured = measure(case, cache=(case.batch, case.new_tokens) != (2, 3))
        config, args = case.config(), case.args()
        got = dict(breakdown(config, **args))
        assert got == measured["components"], f"flops_breakdown({config!r}, **{args}) = {got}; counted {measured['components']}"
        assert total(config, **args) == measured["total"], f"forward_flops({config!r}, **{args})"
        got = dict(nbytes(config, **args))
        assert got == measured["bytes"], f"bytes_breakdown({config!r}, **{args}) = {got}; the tensors hold {measured['bytes']}"
