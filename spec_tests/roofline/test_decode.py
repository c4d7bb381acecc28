"""Why decode is memory-bound (course 02.06) and the batch that turns it compute-bound: on real
shapes (spec_tests/roofline/configs.py) and on every shape the strategies draw within the stated
realistic ranges (spec_tests/roofline/strategies.py), against FLOPs and bytes counted matrix by
matrix (oracles.py) and a scan over batch sizes."""
from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import example, given, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from spec_tests.roofline import oracles
from spec_tests.roofline.configs import LLAMA3_8B, LLAMA3_70B, QWEN2_5_7B, REAL
from spec_tests.roofline.strategies import realistic_configs, realistic_device, tiny_configs

# An illustrative device, exact: 800 TFLOP/s over 4 TB/s, ridge 200 FLOPs/byte.
P, B = 800 * 10**12, 4 * 10**12


def _bound(c) -> Fraction:
    """The intensity a batch-1 decode step stays below: max(2/e, 2H/(Ke))."""
    e = oracles.element_bytes(c.dtype)
    return max(Fraction(2, e), Fraction(2 * c.n_heads, c.n_kv_heads * e))


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_configs_decode_memory_bound_at_batch_one(impl, name):
    """Llama-3-8B/70B, Qwen2.5-7B/72B at batch 1 and contexts from 0 to max_seq_len - 1: the
    intensity is below max(2/e, 2H/(Ke)) (at most 8 here) and the step is memory-bound on any
    device whose ridge is above it (checked at ridge 200 and at ridge 9: P = 9, B = 1)."""
    c = REAL[name]
    for context in (0, 1, 100, 1000, 4096, c.max_seq_len - 1):
        flops, moved = oracles.decode_counts(c, 1, context)
        assert Fraction(flops, moved) < _bound(c) <= 8
        for p, b in ((P, B), (9, 1)):
            got = impl.get("decode_regime")(c, batch=1, context=context, peak_flops=p, bandwidth=b)
            assert got == "memory", (f"decode_regime({name}, batch=1, context={context}, peak_flops={p}, bandwidth={b}) "
                                     f"= {got!r}; its intensity is {flops / moved:.3f} FLOPs/byte, the ridge {p / b}")


@example(c=LLAMA3_8B, device=(P, B), where=1.0).via("boundary: Llama-3-8B at its last position")
@given(c=realistic_configs(), device=st.one_of(realistic_device(), realistic_device(exact=True)),
       where=st.one_of(st.just(0.0), st.just(1.0), st.floats(0.0, 1.0)))
def test_decode_memory_bound_at_batch_one_for_realistic_shapes(impl, c, device, where):
    """Every decoder of the stated ranges, at any context (``where`` x (max_seq_len - 1)), on any
    device of ridge 100-1000: a decode step at batch 1 is memory-bound (its intensity is below
    max(2/e, 2H/(Ke)) <= 64)."""
    context = int(where * (c.max_seq_len - 1))
    flops, moved = oracles.decode_counts(c, 1, context)
    assert Fraction(flops, moved) < _bound(c) <= 64, "test bug: the stated bound does not hold"
    got = impl.get("decode_regime")(c, batch=1, context=context, peak_flops=device[0], bandwidth=device[1])
    assert got == "memory", (f"decode_regime({c}, batch=1, context={context}, peak_flops={device[0]!r}, "
                             f"bandwidth={device[1]!r}) = {got!r}; intensity {flops / moved:.3f} FLOPs/byte")


@example(c=QWEN2_5_7B, batch=400, context=128, p=P, b=B).via("mutant:decode_ignores_batch")
@given(c=st.one_of(realistic_configs(), st.sampled_from(list(REAL.values()))), batch=st.integers(1, 4096),
       context=st.integers(0, 2047), p=st.sampled_from([P, 1e15, Fraction(10**15, 3)]), b=st.sampled_from([B, 3.35e12]))
def test_decode_regime_equals_the_counts(impl, c, batch, context, p, b):
    """decode_regime at any batch is the exact regime of the step's FLOPs over its bytes, counted
    matrix by matrix."""
    got = impl.get("decode_regime")(c, batch=batch, context=context, peak_flops=p, bandwidth=b)
    want = oracles.decode_regime(c, batch, context, p, b)
    flops, moved = oracles.decode_counts(c, batch, context)
    assert got == want, (f"decode_regime(batch={batch}, context={context}, peak_flops={p!r}, bandwidth={b!r}) = {got!r}; "
                         f"{flops} FLOPs over {moved} bytes = {flops / moved:.4f} FLOPs/byte, ridge {float(Fraction(p) / Fraction(b)):.4f}")


def _check_batch(impl, c, context, p, b, name="config"):
    got = impl.get("compute_bound_batch")(c, context=context, peak_flops=p, bandwidth=b)
    call = f"compute_bound_batch({name}, context={context}, peak_flops={p!r}, bandwidth={b!r})"
    limit = oracles.per_sequence_limit(c, context)
    if limit * Fraction(b) <= Fraction(p):
        assert got is None, (f"{call} = {got!r}; no batch reaches the ridge {float(Fraction(p) / Fraction(b)):.4g}: "
                             f"the intensity only tends to f / per_seq = {float(limit):.4g} as the batch grows")
        return
    assert isinstance(got, int) and not isinstance(got, bool) and got >= 1, f"{call} = {got!r}: expected a batch size"
    assert oracles.decode_regime(c, got, context, p, b) == "compute", f"{call} = {got}: the step at that batch is memory-bound"
    if got > 1:
        assert oracles.decode_regime(c, got - 1, context, p, b) == "memory", (
            f"{call} = {got}: batch {got - 1} is compute-bound already")


@example(c=LLAMA3_8B, context=0, device=(P, B)).via("mutant:batch_ignores_kv")
@example(c=LLAMA3_8B, context=4096, device=(P, B)).via("boundary: long context, no batch is compute-bound")
@given(c=st.one_of(realistic_configs(), st.sampled_from(list(REAL.values()))),
       context=st.sampled_from([0, 1, 15, 128, 511, 1024, 2047]),
       device=st.one_of(realistic_device(), realistic_device(exact=True)))
def test_compute_bound_batch_realistic(impl, c, context, device):
    """The batch returned is compute-bound and the one below it memory-bound (the exact counts), or
    None exactly when the intensity's limit as the batch grows, one sequence's FLOPs over the
    bytes it adds, does not exceed the ridge."""
    _check_batch(impl, c, context, *device)


@given(c=tiny_configs(), data=st.data(), ridge=st.fractions(Fraction(1, 4), 6, max_denominator=8))
def test_compute_bound_batch_is_the_first_by_scan(impl, c, data, ridge):
    """Tiny shapes on tiny ridges: the closed form equals a scan of every batch from 1 (or, when
    no batch up to 2,000 is compute-bound, None or a batch past 2,000 that the counts confirm)."""
    context = data.draw(st.integers(0, c.max_seq_len - 1), label="context")
    want = oracles.first_compute_bound_batch(c, context, ridge, 1, limit=2000)
    if want is None:
        _check_batch(impl, c, context, ridge, 1)
        return
    got = impl.get("compute_bound_batch")(c, context=context, peak_flops=ridge, bandwidth=1)
    assert got == want, (f"compute_bound_batch({c}, context={context}, peak_flops={ridge}, bandwidth=1) = {got!r}; "
                         f"the first compute-bound batch by scan: {want}")


@example(name="Llama-3-8B", n=7, context=0).via("mutant:batch_floor_plus_one")
@given(name=st.sampled_from(sorted(REAL)), n=st.integers(1, 5000), context=st.sampled_from([0, 1, 64]))
def test_batch_exactly_at_the_ridge(impl, name, n, context):
    """A device whose ridge equals the intensity at batch n exactly (P = n f / (shared + n per_seq),
    B = 1): batch n reaches the ridge, which counts as compute-bound, and n - 1 does not, so the
    answer is n itself -- not n + 1 (a ceiling computed as floor + 1). A ridge equal to the limit
    f / per_seq is never reached: None."""
    c = REAL[name]
    f, one = oracles.decode_counts(c, 1, context)
    per_seq = oracles.decode_counts(c, 2, context)[1] - one
    shared = one - per_seq
    p = Fraction(n * f, shared + n * per_seq)
    got = impl.get("compute_bound_batch")(c, context=context, peak_flops=p, bandwidth=1)
    assert got == n, f"compute_bound_batch({name}, context={context}, peak_flops={p}, bandwidth=1) = {got!r}, expected {n}"
    assert impl.get("decode_regime")(c, batch=n, context=context, peak_flops=p, bandwidth=1) == "compute"
    limit = Fraction(f, per_seq)
    got = impl.get("compute_bound_batch")(c, context=context, peak_flops=limit, bandwidth=1)
    assert got is None, f"compute_bound_batch({name}, context={context}, peak_flops={limit} = f / per_seq, bandwidth=1) = {got!r}"
    # a hair below the limit (f B - P per_seq = 1/2 FLOP byte/s): the batch is huge, but it exists
    p = Fraction(2 * f - 1, 2 * per_seq)
    got = impl.get("compute_bound_batch")(c, context=context, peak_flops=p, bandwidth=1)
    want = math.ceil(p * shared * 2)
    assert got == want, (f"compute_bound_batch({name}, context={context}, peak_flops={p} (just below f / per_seq), "
                         f"bandwidth=1) = {got!r}; batch {want} reaches the ridge")


def test_hand_computed_numbers(impl):
    """docs/roofline.md's numbers on the illustrative device (800 TFLOP/s, 4 TB/s, ridge 200):
    Llama-3-8B's decode turns compute-bound at batch 201 with an empty cache (the rule of thumb
    "batch = ridge" -- 200 -- ignores the embedding rows and the KV cache), 257 at 128 tokens of
    context, 1,642 at 512 and 583 ... and never from 584 tokens on; Llama-3-70B at 201, 374 at
    1,024, 2,756 at 2,048 and never from 2,209 on. Mutants: batch_ignores_kv."""
    cbb = impl.get("compute_bound_batch")
    got = [cbb(LLAMA3_8B, context=n, peak_flops=P, bandwidth=B) for n in (0, 128, 512, 583, 584)]
    assert got[:3] == [201, 257, 1642] and got[3] is not None and got[4] is None, (
        f"Llama-3-8B at contexts 0, 128, 512, 583, 584: {got}")
    got = [cbb(LLAMA3_70B, context=n, peak_flops=P, bandwidth=B) for n in (0, 1024, 2048, 2208, 2209)]
    assert got[:3] == [201, 374, 2756] and got[3] is not None and got[4] is None, (
        f"Llama-3-70B at contexts 0, 1024, 2048, 2208, 2209: {got}")


# --- bad input -------------------------------------------------------------------------------
def _ints(name: str, zero_ok: bool) -> list[Bad]:
    rows = [Bad(f"negative {name}", {name: -1}, ValueError, (name,)),
            Bad(f"float {name}", {name: 2.0}, TypeError, (name,)),
            Bad(f"bool {name}", {name: True}, TypeError, (name,)),
            Bad(f"None {name}", {name: None}, TypeError, (name,))]
    if not zero_ok:
        rows.append(Bad(f"zero {name}", {name: 0}, ValueError, (name,)))
    return rows


def _device() -> list[Bad]:
    return [Bad(f"{kind} {name}", {name: value}, error, (name,)) for name in ("peak_flops", "bandwidth")
            for kind, value, error in (("zero", 0, ValueError), ("negative", -1.0, ValueError),
                                       ("nan", float("nan"), ValueError), ("str", "1e15", TypeError),
                                       ("bool", True, TypeError))]


COMMON = [Bad("config not a ModelConfig", dict(config={"dim": 4096}), TypeError, ("config",)),
          Bad("context past max_seq_len", dict(context=8192), ValueError, ("context",))]


def _valid(**kw) -> dict:
    return dict(config=LLAMA3_8B, context=100, peak_flops=1e15, bandwidth=4e12, **kw)


@bad_cases(COMMON + _ints("batch", False) + _ints("context", True) + _device())
def test_decode_regime_rejects_bad_input(impl, bad):
    """config a ModelConfig; batch an int >= 1; context an int >= 0 with context + 1 <= max_seq_len
    (Llama-3-8B's 8,192); the device as ridge_point."""
    assert_rejects(impl.get("decode_regime"), _valid(batch=1), bad)


@bad_cases(COMMON + _ints("context", True) + _device())
def test_compute_bound_batch_rejects_bad_input(impl, bad):
    """As decode_regime (no batch)."""
    assert_rejects(impl.get("compute_bound_batch"), _valid(), bad)


def test_last_position_is_legal(impl):
    """context = max_seq_len - 1 is a legal decode step (the token fills the model)."""
    got = impl.get("decode_regime")(LLAMA3_8B, batch=1, context=8191, peak_flops=P, bandwidth=B)
    assert got == "memory"
    assert impl.get("compute_bound_batch")(LLAMA3_8B, context=8191, peak_flops=P, bandwidth=B) is None
