"""Bad input of batching: every contract function rejects malformed arguments with a TypeError or
ValueError naming the argument, before anything changes (forward_batch appends to no cache when
any request of the batch is bad)."""
from __future__ import annotations

import torch

from conformance.badinput import Bad, assert_rejects, bad_cases
from reference.batching import LengthDistribution, Request
from spec_tests.batching.strategies import ModelShape

SHAPE = ModelShape(seed=5)       # vocab 32, max_seq_len 24


def _model():
    return SHAPE.model()


def _forward_valid():
    m = _model()
    return dict(model=m, tokens_list=[torch.tensor([1, 2]), torch.tensor([3])], caches=[m.new_cache(1), m.new_cache(1)])


def _set(i, value, key="tokens_list"):
    def change(kw):
        items = list(kw[key])
        items[i] = value(kw) if callable(value) else value
        return {**kw, key: items}
    return change


FORWARD_BAD = [
    Bad("tokens_list a tensor", dict(tokens_list=torch.tensor([1, 2])), TypeError, ("tokens_list",)),
    Bad("caches a cache", lambda kw: {**kw, "caches": kw["caches"][0]}, TypeError, ("caches",)),
    Bad("fewer caches", lambda kw: {**kw, "caches": kw["caches"][:1]}, ValueError, ("caches",)),
    Bad("float tokens", _set(1, torch.tensor([3.0])), TypeError, ("tokens_list",)),
    Bad("bool tokens", _set(0, torch.tensor([True, False])), TypeError, ("tokens_list",)),
    Bad("a list, not a tensor", _set(0, [1, 2]), TypeError, ("tokens_list",)),
    Bad("2-d tokens", _set(1, torch.tensor([[3]])), ValueError, ("tokens_list",)),
    Bad("empty tokens", _set(1, torch.tensor([], dtype=torch.long)), ValueError, ("tokens_list",)),
    Bad("token id = vocab", _set(1, torch.tensor([32])), ValueError, ("tokens_list",)),
    Bad("token id -1", _set(1, torch.tensor([-1])), ValueError, ("tokens_list",)),
    # the range check reads every id, not one end: a bad id beside good ones (either side)
    Bad("token id -1 after a good one", _set(0, torch.tensor([5, -1])), ValueError, ("tokens_list",)),
    Bad("token id = vocab before a good one", _set(0, torch.tensor([32, 0])), ValueError, ("tokens_list",)),
    Bad("the same cache twice", lambda kw: {**kw, "caches": [kw["caches"][0], kw["caches"][0]]}, ValueError, ("caches",)),
    Bad("a cache without append", _set(1, object(), "caches"), TypeError, ("caches",)),
    Bad("a cache of batch 2", _set(1, lambda kw: kw["model"].new_cache(2), "caches"), ValueError, ("caches",)),
    Bad("past max_seq_len", _set(1, torch.ones(25, dtype=torch.long)), ValueError, ("caches",)),
]


@bad_cases(FORWARD_BAD)
def test_forward_batch_rejects_bad_input(impl, bad):
    """forward_batch: tokens_list a list of non-empty 1-d integer tensors of ids in [0, vocab);
    caches a list of as many distinct KV caches of batch 1 with room for the new tokens; no cache
    changes when a request is bad."""
    valid = _forward_valid()
    caches = valid["caches"]
    assert_rejects(impl.get("forward_batch"), valid, bad, state=lambda: [c.seq_len for c in caches])


def _reqs():
    return [Request((1, 2), 3, 0), Request((4,), 2, 1)]


RUN_BAD = [
    Bad("requests a Request", dict(requests=Request((1,), 1)), TypeError, ("requests",)),
    Bad("no requests", dict(requests=[]), ValueError, ("requests",)),
    Bad("a tuple, not a Request", lambda kw: {**kw, "requests": [((1, 2), 3)]}, TypeError, ("requests",)),
    Bad("prompt id = vocab", lambda kw: {**kw, "requests": _reqs() + [Request((32,), 1)]}, ValueError, ("requests",)),
    Bad("prompt + max_new_tokens > max_seq_len", lambda kw: {**kw, "requests": [Request((1,) * 20, 5)]},
        ValueError, ("requests",)),
]


def _limit_bad(arg):
    return [
        Bad(f"{arg} 0", {arg: 0}, ValueError, (arg,)),
        Bad(f"{arg} 1.0", {arg: 1.0}, TypeError, (arg,)),
        Bad(f"{arg} True", {arg: True}, TypeError, (arg,)),
    ]


@bad_cases(RUN_BAD + _limit_bad("max_batch"))
def test_run_continuous_rejects_bad_input(impl, bad):
    """run_continuous(model, requests, max_batch): requests a non-empty list of Requests that fit
    the model; max_batch an int >= 1."""
    assert_rejects(impl.get("run_continuous"), lambda: dict(model=_model(), requests=_reqs(), max_batch=2), bad)


@bad_cases(RUN_BAD + _limit_bad("batch_size"))
def test_run_static_rejects_bad_input(impl, bad):
    """run_static(model, requests, batch_size): as run_continuous, batch_size an int >= 1."""
    assert_rejects(impl.get("run_static"), lambda: dict(model=_model(), requests=_reqs(), batch_size=2), bad)


ALONE_BAD = [
    Bad("a list", lambda kw: {**kw, "request": _reqs()}, TypeError, ("request",)),
    Bad("prompt id = vocab", dict(request=Request((32,), 1)), ValueError, ("request",)),
    Bad("too long", dict(request=Request((1,) * 24, 1)), ValueError, ("request",)),
]


@bad_cases(ALONE_BAD)
def test_run_alone_rejects_bad_input(impl, bad):
    """run_alone(model, request): one Request that fits the model."""
    assert_rejects(impl.get("run_alone"), lambda: dict(model=_model(), request=Request((1, 2), 2)), bad)


SCHEDULE_BAD = [
    Bad("arrivals None", dict(arrivals=None), TypeError, ("arrivals",)),
    Bad("lengths an int", dict(lengths=3), TypeError, ("lengths",)),
    Bad("lengths shorter", dict(lengths=[1]), ValueError, ("arrivals", "lengths")),
    Bad("arrival -1", dict(arrivals=[0, -1]), ValueError, ("arrivals",)),
    Bad("arrival 1.0", dict(arrivals=[0, 1.0]), TypeError, ("arrivals",)),
    Bad("length 0", dict(lengths=[0, 2]), ValueError, ("lengths",)),
    Bad("length 2.5", dict(lengths=[1, 2.5]), TypeError, ("lengths",)),
]


@bad_cases(SCHEDULE_BAD + _limit_bad("max_batch"))
def test_schedule_continuous_rejects_bad_input(impl, bad):
    """schedule_continuous(arrivals, lengths, max_batch): lists of equal length of ints >= 0 /
    >= 1; max_batch an int >= 1."""
    assert_rejects(impl.get("schedule_continuous"), dict(arrivals=[0, 1], lengths=[2, 1], max_batch=2), bad)


@bad_cases(SCHEDULE_BAD + _limit_bad("batch_size"))
def test_schedule_static_rejects_bad_input(impl, bad):
    """schedule_static(arrivals, lengths, batch_size): as schedule_continuous."""
    assert_rejects(impl.get("schedule_static"), dict(arrivals=[0, 1], lengths=[2, 1], batch_size=2), bad)


IDLE_BAD = [
    Bad("empty", dict(lengths=[]), ValueError, ("lengths",)),
    Bad("a length 0", dict(lengths=[3, 0]), ValueError, ("lengths",)),
    Bad("a float", dict(lengths=[3, 1.5]), TypeError, ("lengths",)),
    Bad("a bool", dict(lengths=[3, True]), TypeError, ("lengths",)),
    Bad("an int", dict(lengths=3), TypeError, ("lengths",)),
]


@bad_cases(IDLE_BAD)
def test_idle_fraction_rejects_bad_input(impl, bad):
    """idle_fraction(lengths): a non-empty list of ints >= 1."""
    assert_rejects(impl.get("idle_fraction"), dict(lengths=[1, 3]), bad)


DIST_BAD = [
    Bad("distribution a string", dict(distribution="uniform"), TypeError, ("distribution",)),
    Bad("distribution a tuple", dict(distribution=("uniform", 4)), TypeError, ("distribution",)),
    Bad("batch_size 0", dict(batch_size=0), ValueError, ("batch_size",)),
    Bad("batch_size 2.0", dict(batch_size=2.0), TypeError, ("batch_size",)),
]


@bad_cases(DIST_BAD)
def test_closed_forms_reject_bad_input(impl, bad):
    """mean_length(distribution), expected_max_length / expected_idle_fraction(distribution,
    batch_size): a LengthDistribution, an int batch_size >= 1."""
    valid = dict(distribution=LengthDistribution("uniform", 4), batch_size=2)
    assert_rejects(impl.get("expected_max_length"), valid, bad)
    assert_rejects(impl.get("expected_idle_fraction"), valid, bad)
    if "batch_size" not in bad.words:
        assert_rejects(impl.get("mean_length"), dict(distribution=valid["distribution"]),
                       Bad(bad.id, {k: v for k, v in bad.change.items() if k == "distribution"}, bad.error, bad.words))


SIM_BAD = DIST_BAD + [
    Bad("num_batches 0", dict(num_batches=0), ValueError, ("num_batches",)),
    Bad("generator None", dict(generator=None), TypeError, ("generator",)),
    Bad("generator a seed", dict(generator=0), TypeError, ("generator",)),
]


@bad_cases(SIM_BAD)
def test_simulation_rejects_bad_input(impl, bad):
    """simulate_idle_fraction(distribution, batch_size, num_batches, generator): a
    LengthDistribution, ints >= 1, a torch.Generator."""
    valid = lambda: dict(distribution=LengthDistribution("uniform", 4), batch_size=2, num_batches=3,  # noqa: E731
                         generator=torch.Generator().manual_seed(0))
    assert_rejects(impl.get("simulate_idle_fraction"), valid, bad)
