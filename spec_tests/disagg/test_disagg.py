"""Disaggregated prefill and decode (course 04.07, 04.08; ch 10): the properties that define it.

Every cluster test forks a gloo group of 2-3 processes where the implementation runs
(``impl.call_in_process(runs.run, ...)``, spec_tests/disagg/cluster.py): rank 0 runs the
implementation's ``prefill_worker``, the others its ``decode_worker``, on the reference model; the
torch.distributed traffic of every rank is logged bit for bit, and a rank may carry an injected
fault. About 0.25 s a run on one core (the fork costs ~20 ms a rank; gloo's set-up the rest).

Laws: (1) the decode after a hand-off gives the colocated run's tokens, and its logits within the
tolerance rule of a float64 oracle teacher-forced on those tokens; bit for bit under the
batch-invariant mode; (2) the floating-point tensors the prefill rank sends are received bit for
bit, are exactly the prompt's K and V (as a multiset of values: the layout is free), and their
bytes equal ``transfer_bytes`` = the kv_bytes formula; (3) a decode worker that dies or hangs mid
hand-off loses no request: every request is in exactly one of {completed, failed}. The reference's
choices (bitwise without the mode; retry on the next live rank) are ``choice`` tests.
"""
from __future__ import annotations

import dataclasses

import pytest
import torch
from hypothesis import example, given, settings, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from conformance.tolerance import assert_close_to_oracle
from reference.disagg import KVHeader, Request
from reference.model import ModelConfig
from spec_tests.disagg import cluster, runs
from spec_tests.disagg.strategies import DisaggCase, disagg_cases

# A GQA model, three requests (a 1-token prompt, one decoded token only, one that fills the window).
THREE = DisaggCase(48, 16, 2, 2, 1, 12, "float32", 3, ((5, (1, 2, 3), 3), (7, (4,), 4), (9, (1, 7, 2, 9, 3, 30, 11), 6)), 3)
BF16 = DisaggCase(16, 16, 1, 2, 2, 8, "bfloat16", 11, ((0, (3, 1, 4, 1, 5), 2), (1, (9, 2, 6), 1)), 2)


def _model(reference, case: DisaggCase, dtype=None):
    m = reference.of("model")
    cfg = case.config(m.get("ModelConfig"), **({"dtype": dtype} if dtype is not None else {}))
    return m.get("Transformer")(cfg, seed=case.seed)


def _ok(outs):
    for rank, out in enumerate(outs):
        role = "prefill_worker" if rank == 0 else "decode_worker"
        assert out["error"] is None and out["exitcode"] == 0, (
            f"rank {rank} ({role}) failed (exit code {out['exitcode']}; -9: killed after the deadline):\n{out['error']}")


def _completed(outs) -> dict:
    """request id -> (rank, tokens, logits) over every decode rank that reported."""
    done = {}
    for rank, out in enumerate(outs[1:], start=1):
        for rid, (tokens, logits) in (out["result"] or {}).items():
            assert rid not in done, f"request {rid} completed twice: by ranks {done[rid][0]} and {rank}"
            done[rid] = (rank, tokens, logits)
    return done


def _floats(log, kind, peer):
    return [t for what, p, ts in log if what == kind and p == peer for t in ts if t.is_floating_point()]


def _teacher_forced(model, prompt, tokens):
    """The logits of each generated token, from one uncached forward over prompt + tokens[:-1]."""
    seq = torch.tensor([list(prompt) + [int(t) for t in tokens[:-1]]])
    with torch.no_grad():
        return model(seq)[0, len(prompt) - 1:]


def _check_run(reference, case, outs, *, bitwise_to=None):
    """Laws (1) and (2) on a run without faults; ``bitwise_to`` "reference": logits bit for bit."""
    _ok(outs)
    prefill = outs[0]["result"]
    done = _completed(outs)
    ids = {rid for rid, _, _ in case.requests}
    assert set(prefill["handoffs"]) == ids, f"prefill_worker reported {sorted(prefill['handoffs'])}, submitted {sorted(ids)}"
    assert set(done) == ids, f"completed {sorted(done)}, submitted {sorted(ids)}"
    model64, model_lp = _model(reference, case, torch.float64), _model(reference, case)
    per_rank_bytes = {}
    for rid, prompt, new in case.requests:
        h = prefill["handoffs"][rid]
        rank, tokens, logits = done[rid]
        assert h["status"] == "handed_off" and h["decode_rank"] == rank, f"request {rid}: {h}"
        assert tokens.tolist()[0] == h["first_token"], f"request {rid}: first token {tokens.tolist()[0]} != prefill's {h['first_token']}"
        all_logits = torch.cat([h["first_logits"][None], logits])
        want_tokens, want_logits = prefill["colocated"][rid]
        assert tokens.tolist() == want_tokens.tolist(), (
            f"request {rid}: tokens after the hand-off {tokens.tolist()} != colocated {want_tokens.tolist()}")
        oracle = _teacher_forced(model64, prompt, tokens)
        ref_lp = _teacher_forced(model_lp, prompt, tokens)
        assert_close_to_oracle(all_logits, ref_lp, oracle, name=f"request {rid}: logits after the hand-off")
        (ref_k, ref_v), (ref_tokens, ref_logits) = prefill["reference"][rid]
        if bitwise_to == "reference":
            assert torch.equal(all_logits, ref_logits), f"request {rid}: logits are not the colocated logits bit for bit"
        per_rank_bytes[rank] = per_rank_bytes.get(rank, 0) + reference.get("transfer_bytes")(
            case.config(reference.of("model").get("ModelConfig")), len(prompt))
        per_rank_bytes.setdefault(("kv", rank), []).append(torch.cat([ref_k.reshape(-1), ref_v.reshape(-1)]))
    for rank in range(1, case.world):
        sent, got = _floats(outs[0]["log"], "send", rank), _floats(outs[rank]["log"], "recv", 0)
        assert len(sent) == len(got) and all(torch.equal(a, b) for a, b in zip(sent, got)), (
            f"rank {rank} did not receive bit for bit the floating-point tensors rank 0 sent it")
        moved = sum(t.nbytes for t in sent)
        assert moved == per_rank_bytes.get(rank, 0), (
            f"rank 0 sent rank {rank} {moved} bytes of floating-point tensors; the KV of its requests is "
            f"{per_rank_bytes.get(rank, 0)} bytes (transfer_bytes = the kv_bytes formula)")
        if sent:
            payload = torch.cat([t.reshape(-1) for t in sent]).sort().values
            want = torch.cat(per_rank_bytes[("kv", rank)]).sort().values
            assert payload.shape == want.shape and torch.equal(payload, want), (
                f"the values rank 0 sent rank {rank} are not the prompts' K and V")


# --- law (1) + (2): a hand-off is a bit-exact copy and the decode continues it -------------------------
@example(case=THREE).via("mutant:sends_whole_buffer mutant:sends_k_twice mutant:forgets_last_position "
                         "mutant:cache_length_not_set")
@example(case=BF16).via("mutant:sends_k_twice")
@given(case=disagg_cases())
@settings(max_examples=6)
def test_decode_after_handoff_equals_colocated(impl, reference, case):
    """Decode after the hand-off gives the colocated tokens, logits within the tolerance rule; the
    floating-point tensors sent are received bit for bit, are the prompt's K and V, and weigh
    transfer_bytes."""
    outs = impl.call_in_process(runs.run, case)
    _check_run(reference, case, outs)


def test_bitwise_under_the_batch_invariant_mode(impl, reference):
    """Under the batch-invariant mode (every matmul, norm and softmax in one fixed order, whatever
    the shapes and strides), the decode after the hand-off gives the colocated logits bit for bit.
    The decode workers are called without ``src``: the contract's default 0 is the prefill's rank."""
    case = DisaggCase(32, 16, 1, 2, 1, 10, "float32", 5, ((3, (2, 9, 4), 3), (4, (7,), 2)), 2)
    outs = impl.call_in_process(runs.run, case, invariant=True, default_src=True)
    _check_run(reference, case, outs, bitwise_to="reference")


@pytest.mark.choice("the decode cache has the colocated cache's shape, so the same float ops run")
def test_bitwise_without_the_mode(impl, reference):
    """The reference's decode worker allocates the colocated cache's shape and prefills in one pass:
    the logits after the hand-off are the colocated logits bit for bit, also without the mode."""
    outs = impl.call_in_process(runs.run, THREE)
    _check_run(reference, THREE, outs, bitwise_to="reference")


@given(config=st.tuples(st.integers(1, 80), st.sampled_from([(8, 1), (8, 2), (4, 4), (32, 8)]),
                        st.sampled_from([2, 64, 128])),
       n=st.integers(1, 4096), dtype=st.sampled_from(["float16", "bfloat16", "float32", "float64"]),
       explicit=st.booleans())
def test_transfer_bytes_is_the_kv_bytes_formula(impl, reference, config, n, dtype, explicit):
    """transfer_bytes(config, n, dtype) = kv_bytes.kv_cache_bytes of one sequence of n tokens (the
    dtype defaults to the config's)."""
    from conformance.strategies import DTYPES
    layers, (heads, kv_heads), head_dim = config
    cfg = reference.of("model").get("ModelConfig")(dim=heads * head_dim, n_layers=layers, n_heads=heads,
                                                   n_kv_heads=kv_heads, dtype=DTYPES[dtype] if not explicit else torch.float32)
    got = impl.get("transfer_bytes")(cfg, n, DTYPES[dtype]) if explicit else impl.get("transfer_bytes")(cfg, n)
    want = reference.of("kv_bytes").get("kv_cache_bytes")(layers=layers, kv_heads=kv_heads, head_dim=head_dim,
                                                           seq_len=n, batch=1, dtype=DTYPES[dtype])
    assert isinstance(got, int) and got == want, f"transfer_bytes = {got!r}, the kv_bytes formula gives {want}"


def test_llama3_8b_bytes_per_token(impl, reference):
    """Llama-3-8B's shape (32 layers, 8 KV heads of 128, bf16) moves 128 KiB per prompt token."""
    cfg = reference.of("model").get("ModelConfig")(vocab_size=8, dim=4096, n_layers=32, n_heads=32, n_kv_heads=8,
                                                   hidden_dim=16, dtype=torch.bfloat16)
    assert impl.get("transfer_bytes")(cfg, 1) == 131072
    assert impl.get("transfer_bytes")(cfg, 4096) == 512 * 2**20


# --- law (3): a worker that dies mid hand-off loses no request -----------------------------------------
def _accounted(case, outs):
    """Every submitted request is in exactly one of {completed, failed}; returns both sets."""
    prefill = outs[0]["result"]
    assert outs[0]["error"] is None, f"the prefill worker raised:\n{outs[0]['error']}"
    done = _completed(outs)
    failed = {rid for rid, h in prefill["handoffs"].items() if h["status"] == "failed"}
    ids = {rid for rid, _, _ in case.requests}
    lost = ids - set(done) - failed
    assert not lost, (f"requests {sorted(lost)} were neither completed nor reported failed (lost): "
                      f"{ {rid: prefill['handoffs'].get(rid) for rid in lost} }")
    both = set(done) & failed
    assert not both, f"requests {sorted(both)} were completed and reported failed"
    for rid in failed:
        assert prefill["handoffs"][rid]["error"], f"request {rid} failed without a reason"
    return set(done), failed


@pytest.mark.parametrize("fault", ["exit_after_first_recv", "exit_before_ack"])
def test_dead_decode_worker_loses_no_request(impl, reference, fault):
    """Decode rank 1 dies mid hand-off (after reading a header; or holding the KV, before its ack):
    every request is completed by rank 2 or reported failed, never lost, and the completed ones
    are right."""
    outs = impl.call_in_process(runs.run, THREE, faults={1: fault}, timeout=2.0)
    assert outs[1]["exitcode"] == cluster.FAULT_EXIT, (
        f"the injected fault never fired (rank 1 exit code {outs[1]['exitcode']}): rank 1 received nothing")
    done, failed = _accounted(THREE, outs)
    _check_completed_tokens(THREE, outs, done)


def _check_completed_tokens(case, outs, done):
    colocated = outs[0]["result"]["colocated"]
    for rid, (rank, tokens, _) in _completed(outs).items():
        assert tokens.tolist() == colocated[rid][0].tolist(), f"request {rid} completed by rank {rank} with wrong tokens"


def test_only_decode_worker_dies_every_request_failed(impl, reference):
    """With the only decode worker dead after the first header, nothing can complete: every request
    is reported failed, with a reason, none lost."""
    case = DisaggCase(48, 16, 2, 2, 1, 12, "float32", 3, THREE.requests, 2)
    outs = impl.call_in_process(runs.run, case, faults={1: "exit_after_first_recv"}, timeout=2.0)
    done, failed = _accounted(case, outs)
    assert not done and failed == {rid for rid, _, _ in case.requests}


def test_hung_decode_worker_times_out(impl, reference):
    """A decode worker that stops answering after the first header is detected by the timeout: no
    request lost, and the run ends (within a few timeouts, not the launcher's deadline)."""
    import time
    start = time.monotonic()
    outs = impl.call_in_process(runs.run, THREE, faults={1: "hang_after_first_recv"}, timeout=0.5)
    done, failed = _accounted(THREE, outs)
    _check_completed_tokens(THREE, outs, done)
    assert time.monotonic() - start < 20


@pytest.mark.choice("a failed attempt is retried on the next live decode rank")
@pytest.mark.parametrize("fault", ["exit_after_first_recv", "exit_before_ack"])
def test_failed_handoff_is_retried_on_a_live_worker(impl, reference, fault):
    """The reference retries a failed hand-off on the next live decode rank: with rank 2 alive,
    every request completes there."""
    outs = impl.call_in_process(runs.run, THREE, faults={1: fault}, timeout=2.0)
    done, failed = _accounted(THREE, outs)
    assert not failed and all(r == 2 for r, _, _ in _completed(outs).values())
    # its Handoff lists every attempt (rank, error or None) in order: request 5 starts on rank 1
    # (round robin), fails there with a reason, and is handed off to rank 2; the others go to rank 2
    handoffs = outs[0]["result"]["handoffs"]
    for rid, _, _ in THREE.requests:
        attempts = [tuple(a) for a in handoffs[rid]["attempts"]]
        want_failed = [1] if rid == 5 else []
        assert [r for r, _ in attempts] == want_failed + [2] and attempts[-1] == (2, None) and all(
            e for _, e in attempts[:-1]), f"request {rid}: attempts {attempts}, expected {want_failed} failed, then (2, None)"


def test_rejected_header_fails_the_request_and_keeps_the_worker(impl, reference):
    """A decode worker whose model does not match the header (other kv_heads) rejects it: every
    request is reported failed with a reason naming kv_heads, and the worker survives to STOP."""
    outs = impl.call_in_process(runs.run, BF16, decode_changes={"n_kv_heads": 1})
    _ok(outs)
    done, failed = _accounted(BF16, outs)
    assert not done and failed == {0, 1}
    for rid in failed:
        assert "kv_heads" in outs[0]["result"]["handoffs"][rid]["error"]


@pytest.mark.choice("a rejected header fails the request without retry, its one attempt recorded")
def test_rejected_header_is_not_retried(impl, reference):
    """A reject is the request's fault, not the worker's (every decode worker has the same model):
    with two decode ranks that both reject, each request is tried once, on its round-robin rank,
    and its Handoff records that one attempt with the reason (naming kv_heads)."""
    case = dataclasses.replace(BF16, world=3)
    outs = impl.call_in_process(runs.run, case, decode_changes={"n_kv_heads": 1})
    _ok(outs)
    done, failed = _accounted(case, outs)
    assert not done and failed == {0, 1}
    for i, (rid, _, _) in enumerate(case.requests):
        attempts = [tuple(a) for a in outs[0]["result"]["handoffs"][rid]["attempts"]]
        assert len(attempts) == 1 and attempts[0][0] == 1 + i % 2 and "kv_heads" in (attempts[0][1] or ""), (
            f"request {rid}: attempts {attempts}, expected one, on rank {1 + i % 2}, naming kv_heads")


def test_a_request_that_cannot_prefill_fails_alone(impl, reference):
    """A request whose positions pass the model's max_seq_len cannot be prefilled: it is reported
    failed with a reason, and the requests after it are still handed off (one Handoff per request)."""
    case = DisaggCase(48, 16, 2, 2, 1, 12, "float32", 3, ((1, tuple(range(1, 12)), 3), (2, (4, 5), 2)), 2)
    outs = impl.call_in_process(runs.run, case)
    _ok(outs)
    done, failed = _accounted(case, outs)
    assert done == {2} and failed == {1}, f"completed {sorted(done)}, failed {sorted(failed)}; expected {{2}}, {{1}}"
    _check_completed_tokens(case, outs, done)


def test_the_prefill_worker_need_not_be_rank_0(impl, reference):
    """decode_ranks are the global ranks of the decode workers, src the prefill's rank: with the
    roles swapped (prefill on rank 1, decode on rank 0, src 1) every request is handed off to rank
    0 and decodes to the colocated tokens."""
    case = DisaggCase(48, 16, 2, 2, 1, 12, "float32", 3, ((5, (1, 2, 3), 3), (7, (4,), 2)), 2)
    outs = impl.call_in_process(runs.run, case, prefill_rank=1)
    for rank, out in enumerate(outs):
        assert out["error"] is None and out["exitcode"] == 0, f"rank {rank} failed:\n{out['error']}"
    prefill = outs[1]["result"]
    for rid, _, _ in case.requests:
        h = prefill["handoffs"][rid]
        assert h["status"] == "handed_off" and h["decode_rank"] == 0, f"request {rid}: {h}"
        tokens, _ = outs[0]["result"][rid]
        assert tokens.tolist() == prefill["colocated"][rid][0].tolist(), f"request {rid}: tokens {tokens.tolist()}"


# [VERSION, id, n, layers, kv_heads, head_dim, dtype code, first, max_new] for THREE's model (float32: code 2)
_MALFORMED = {"version 2": [2, 1, 3, 2, 1, 8, 2, 0, 2], "request id -1": [1, -1, 3, 2, 1, 8, 2, 0, 2],
              "first token -1": [1, 1, 3, 2, 1, 8, 2, -1, 2], "dtype code 9": [1, 1, 3, 2, 1, 8, 9, 0, 2]}


@pytest.mark.choice("the reference's header layout; a malformed header ends the decode worker with a ValueError")
@pytest.mark.parametrize("malformed", sorted(_MALFORMED))
def test_a_malformed_header_is_refused(impl, reference, malformed):
    """The decode worker checks the header it reads (KVHeader.decode: version, dtype code, and every
    field's range): a malformed one (another version, a negative id or first token, an unknown
    dtype code) is neither accepted nor answered: the worker raises a ValueError."""
    outs = impl.call_in_process(runs.run_header, THREE, _MALFORMED[malformed])
    assert outs[0]["error"] is None, outs[0]["error"]
    assert outs[0]["result"]["reply"] is None, f"the decode worker answered {outs[0]['result']['reply']} to a {malformed} header"
    assert "ValueError" in (outs[1]["error"] or ""), f"the decode worker did not raise a ValueError:\n{outs[1]['error']}"


def _wire(outs, rank, peer, kind="send"):
    """The non-floating-point messages (control) ``rank`` exchanged with ``peer``, as int lists."""
    return [t.reshape(-1).tolist() for what, p, ts in outs[rank]["log"] if what == kind and p == peer
            for t in ts if not t.is_floating_point()]


@pytest.mark.choice("the reference's wire format: message order, header layout, codes and STOP")
def test_the_wire_format_is_the_references(impl, reference):
    """The control messages on the wire are the reference's protocol (module doc): per hand-off the
    header ``KVHeader.encode()`` ([VERSION, id, n, layers, kv_heads, head_dim, dtype code, first,
    max_new]), the reply [id, ACCEPT], K, V, the reply [id, ACK]; at the end STOP
    [VERSION, -1, 0, ...]. A float64 model, so every dtype code is in play over the cases."""
    from reference import disagg as ref
    case = DisaggCase(16, 16, 1, 2, 2, 8, "float64", 7, ((0, (3, 1, 4), 2), (1, (5,), 1), (2, (2, 6), 3)), 3)
    outs = impl.call_in_process(runs.run, case)
    _ok(outs)
    prefill = outs[0]["result"]
    c = case.config(reference.of("model").get("ModelConfig"))
    for rank in range(1, case.world):
        mine = [(rid, p, new) for rid, p, new in case.requests if prefill["handoffs"][rid]["decode_rank"] == rank]
        headers = [ref.KVHeader(rid, len(p), c.n_layers, c.n_kv_heads, c.head_dim, c.dtype,
                                prefill["handoffs"][rid]["first_token"], new).encode().tolist() for rid, p, new in mine]
        assert _wire(outs, 0, rank) == headers + [ref.STOP.tolist()], (
            f"rank 0's control messages to rank {rank}: {_wire(outs, 0, rank)}; the reference's: {headers + [ref.STOP.tolist()]}")
        replies = [m for rid, _, _ in mine for m in ([rid, ref.ACCEPT], [rid, ref.ACK])]
        assert _wire(outs, rank, 0) == replies, f"rank {rank}'s replies {_wire(outs, rank, 0)}; the reference's: {replies}"


# --- the payload, in one process ---------------------------------------------------------------------
def test_pack_unpack_round_trip(impl, reference):
    """prefill's cache has len(prompt) + max_new_tokens - 1 positions; pack_kv gives the filled
    positions only, (layers, kv_heads, n, head_dim); unpack_kv makes a cache of the same shape
    (the colocated cache's) whose seq_len is n and whose first n positions are those bits."""
    model = _model(reference, THREE)
    r = Request(1, [3, 1, 4, 1, 5], 3)
    cache, first, _ = impl.get("prefill")(model, Request(1, [3, 1, 4, 1, 5], 3))
    k, v = impl.get("pack_kv")(cache)
    c = model.config
    colocated_shape = (c.n_layers, 1, c.n_kv_heads, 5 + 3 - 1, c.head_dim)   # len(prompt) + max_new_tokens - 1
    assert tuple(cache.k.shape) == colocated_shape, f"prefill's cache is {tuple(cache.k.shape)}, the contract's {colocated_shape}"
    assert tuple(k.shape) == tuple(v.shape) == (c.n_layers, c.n_kv_heads, 5, c.head_dim)
    assert torch.equal(k, cache.k[:, 0, :, :5]) and torch.equal(v, cache.v[:, 0, :, :5])
    header = KVHeader(1, 5, c.n_layers, c.n_kv_heads, c.head_dim, model.dtype, first, 3)
    back = impl.get("unpack_kv")(model, header, k, v)
    assert tuple(back.k.shape) == tuple(back.v.shape) == colocated_shape, (
        f"unpack_kv's cache is {tuple(back.k.shape)}, the colocated cache's shape is {colocated_shape}")
    assert back.seq_len == 5 and torch.equal(back.k[:, :, :, :5], cache.k[:, :, :, :5])
    assert torch.equal(back.v[:, :, :, :5], cache.v[:, :, :, :5])
    assert r.max_new_tokens == 3


def test_colocated_is_generate(impl, reference):
    """run_colocated gives generate's greedy tokens and logits for the same prompt."""
    model = _model(reference, THREE)
    for rid, prompt, new in THREE.requests:
        if len(prompt) + new > THREE.max_seq_len:      # generate feeds no more, but asks one more
            continue
        tokens, logits = impl.get("run_colocated")(model, Request(rid, list(prompt), new))
        want_tokens, want_logits = reference.of("generate").get("generate")(model, torch.tensor([prompt]), new)
        assert torch.as_tensor(tokens).tolist() == want_tokens[0].tolist()
        assert_close_to_oracle(logits, want_logits[0], _teacher_forced(_model(reference, THREE, torch.float64), prompt, tokens),
                               name="run_colocated logits")


# --- bad input -------------------------------------------------------------------------------------------
def _cfg(reference):
    return THREE.config(reference.of("model").get("ModelConfig"))


BAD_TRANSFER = [
    Bad("n_tokens 0", dict(n_tokens=0), ValueError, ("n_tokens",)),
    Bad("n_tokens -1", dict(n_tokens=-1), ValueError, ("n_tokens",)),
    Bad("n_tokens float", dict(n_tokens=2.0), TypeError, ("n_tokens",)),
    Bad("n_tokens bool", dict(n_tokens=True), TypeError, ("n_tokens",)),
    Bad("dtype int64", dict(dtype=torch.int64), TypeError, ("dtype",)),
]


@bad_cases(BAD_TRANSFER)
def test_transfer_bytes_rejects_bad_input(impl, reference, bad):
    assert_rejects(impl.get("transfer_bytes"), dict(config=_cfg(reference), n_tokens=3, dtype=torch.float16), bad)


REQUEST_ERRORS = [  # (change, error, word): the vocabulary's own checks
    (dict(prompt=[]), ValueError, "prompt"), (dict(prompt=[1, -1]), ValueError, "prompt"),
    (dict(max_new_tokens=0), ValueError, "max_new_tokens"), (dict(request_id=-1), ValueError, "request_id"),
    (dict(request_id="a"), TypeError, "request_id"),
]
HEADER_ERRORS = [
    (dict(n_tokens=0), ValueError, "n_tokens"), (dict(layers=0), ValueError, "layers"),
    (dict(dtype=torch.int64), TypeError, "dtype"), (dict(max_new_tokens=0), ValueError, "max_new_tokens"),
]


def test_vocabulary_rejects_bad_fields(reference):
    """Request (an empty prompt is n_tokens < 1) and KVHeader name the bad field."""
    for change, error, word in REQUEST_ERRORS:
        with pytest.raises(error, match=word):
            Request(**{**dict(request_id=1, prompt=[1, 2], max_new_tokens=2), **change})
    for change, error, word in HEADER_ERRORS:
        with pytest.raises(error, match=word):
            KVHeader(**_header_kwargs(reference, **change))


def _header_kwargs(reference, **changes):
    c = _cfg(reference) if reference is not None else THREE.config(ModelConfig)
    return {**dict(request_id=1, n_tokens=3, layers=c.n_layers, kv_heads=c.n_kv_heads, head_dim=c.head_dim,
                   dtype=c.dtype, first_token=0, max_new_tokens=2), **changes}


def _header(**changes):
    """A Bad change: the valid call with a header of these fields (the vocabulary's ModelConfig, so the
    row is the same before and after any test ran -- the docs render it)."""
    return lambda kw: {**kw, "header": KVHeader(**_header_kwargs(None, **changes))}


BAD_UNPACK = [
    Bad("header layers mismatch", _header(layers=3), ValueError, ("layers",)),
    Bad("header kv_heads mismatch", _header(kv_heads=2), ValueError, ("kv_heads",)),
    Bad("header head_dim mismatch", _header(head_dim=4), ValueError, ("head_dim",)),
    Bad("header dtype mismatch", _header(dtype=torch.float64), ValueError, ("dtype",)),
    Bad("positions past max_seq_len", _header(n_tokens=3, max_new_tokens=11), ValueError, ("max_seq_len",)),
    Bad("k of another length", lambda kw: {**kw, "k": kw["k"][:, :, :2]}, ValueError, ("k",)),
    Bad("v of another dtype", lambda kw: {**kw, "v": kw["v"].double()}, ValueError, ("v",)),
    Bad("k not a tensor", dict(k=[1.0]), TypeError, ("k",)),
]


@bad_cases(BAD_UNPACK)
def test_unpack_kv_rejects_a_mismatched_header(impl, reference, bad):
    """The decode side's check of a received header and payload against its own model."""
    model = _model(reference, THREE)
    c = model.config
    shape = (c.n_layers, c.n_kv_heads, 3, c.head_dim)
    valid = dict(model=model, header=KVHeader(**_header_kwargs(reference)),
                 k=torch.randn(shape), v=torch.randn(shape))
    assert_rejects(impl.get("unpack_kv"), valid, bad)


BAD_WORKER = [
    Bad("duplicate request ids", lambda kw: {**kw, "requests": kw["requests"] + kw["requests"][:1]}, ValueError, ("requests",)),
    Bad("requests not Requests", dict(requests=[(1, [1, 2], 2)]), TypeError, ("requests",)),
    Bad("no decode rank", dict(decode_ranks=[]), ValueError, ("decode_ranks",)),
    Bad("duplicate decode rank", dict(decode_ranks=[1, 1]), ValueError, ("decode_ranks",)),
    Bad("timeout 0", dict(timeout=0), ValueError, ("timeout",)),
]


@bad_cases(BAD_WORKER)
def test_prefill_worker_rejects_bad_input_before_sending(impl, reference, bad):
    """Checked before anything is sent (no process group is needed to see the error)."""
    R = Request
    valid = dict(model=_model(reference, THREE), requests=[R(1, [1, 2], 2), R(2, [3], 1)], decode_ranks=[1], timeout=1.0)
    assert_rejects(impl.get("prefill_worker"), valid, bad)


def _filled(batch, n):
    from reference.kv_bytes import KVCache
    cache = KVCache(layers=1, batch=batch, kv_heads=1, head_dim=4, max_seq_len=3)
    if n:
        cache.append(0, torch.ones(batch, 1, n, 4), torch.ones(batch, 1, n, 4))
    return cache


BAD_PACK = [
    Bad("cache a tensor", dict(cache=torch.zeros(2, 1, 1, 3, 4)), TypeError, ("cache",)),
    Bad("cache a list", dict(cache=[1]), TypeError, ("cache",)),
    Bad("cache of batch 2", dict(cache=_filled(2, 2)), ValueError, ("cache",)),
    Bad("cache with no position", dict(cache=_filled(1, 0)), ValueError, ("cache",)),
]


@bad_cases(BAD_PACK)
def test_pack_kv_rejects_what_is_not_a_cache(impl, bad):
    assert_rejects(impl.get("pack_kv"), dict(cache=None), bad)


BAD_PREFILL = [
    Bad("positions one past max_seq_len", dict(request=Request(1, list(range(1, 8)), 7)), ValueError, ("max_new_tokens",)),
    Bad("request not a Request", dict(request=(1, [1, 2], 2)), TypeError, ("request",)),
]


@bad_cases(BAD_PREFILL)
def test_prefill_rejects_bad_input(impl, reference, bad):
    """prefill: a request of len(prompt) + max_new_tokens - 1 > max_seq_len positions (here 13 > 12)
    or that is not a Request is rejected, nothing run."""
    assert_rejects(impl.get("prefill"), dict(model=_model(reference, THREE), request=Request(1, [1, 2, 3], 2)), bad)


BAD_DECODE = [
    Bad("max_new_tokens 0", dict(max_new_tokens=0), ValueError, ("max_new_tokens",)),
    Bad("first_token -1", dict(first_token=-1), ValueError, ("first_token",)),
]


@bad_cases(BAD_DECODE)
def test_decode_rejects_bad_input(impl, reference, bad):
    """decode returns all max_new_tokens tokens, first_token first: max_new_tokens < 1 (no first
    token to return) or a negative first_token is rejected."""
    model = _model(reference, THREE)
    cache, first, _ = reference.get("prefill")(model, Request(1, [1, 2, 3], 2))
    assert_rejects(impl.get("greedy_decode"), dict(model=model, cache=cache, first_token=first, max_new_tokens=2), bad)


BAD_DECODE_WORKER = [
    Bad("src -1", dict(src=-1), ValueError, ("src",)),
    Bad("timeout 0", dict(timeout=0), ValueError, ("timeout",)),
    Bad("timeout -1", dict(timeout=-1.0), ValueError, ("timeout",)),
]


@bad_cases(BAD_DECODE_WORKER)
def test_decode_worker_rejects_bad_input_before_receiving(impl, reference, bad):
    """Checked before anything is received (no process group is needed to see the error): a
    negative src rank, a timeout <= 0."""
    assert_rejects(impl.get("decode_worker"), dict(model=_model(reference, THREE), src=0, timeout=1.0), bad)
