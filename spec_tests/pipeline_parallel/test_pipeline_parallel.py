"""Pipeline parallelism (course 06.03): the properties that define it.

The pipeline runs on real torch.distributed process groups: one stage in the implementation's
process, 2-4 stages on the pool of 4 forked gloo ranks (spec_tests/tensor_parallel/pool.py),
each rank logging its ProcessGroup sends/receives (tensors kept bit for bit) and its model's
module calls (forward hooks), all stamped by one clock.

Laws: (1) the last stage's logits equal the unsplit model's within the tolerance rule and the
other stages return None; (2) every stage runs its steps in the stated order -- for each
micro-batch in turn: receive, run its layers, send -- over its own contiguous block of layers
and micro-batches of sizes microbatch_sizes(batch, m); (3) the activations sent across each
boundary are received bit for bit and weigh batch x seq x dim x element_bytes, in all
pipeline_bytes = (p - 1) x that, and nothing else is communicated; (4) stage s starts a
micro-batch only after stage s - 1 finished it (the loose timing check: one clock for every
process), so with one micro-batch the measured bubble is at least 1/2; (5) the closed forms
and the schedules (test_exhaustive.py, plus random schedules against the dependency-graph
oracle here).
"""
from __future__ import annotations

from fractions import Fraction

import pytest
import torch
from hypothesis import assume, example, given, settings, strategies as st

from conformance.badinput import Bad, assert_rejects, bad_cases
from conformance.strategies import DTYPES
from conformance.tolerance import assert_close_to_oracle
from spec_tests.pipeline_parallel import oracles, runs
from spec_tests.pipeline_parallel.strategies import PPCase, pp_cases

# n_layers, n_heads, n_kv_heads, head_dim, vocab, dtype, seed, batch, seq, microbatches, stages
UNEVEN3 = PPCase(4, 4, 2, 4, 40, "float32", 3, 5, 4, 3, 3)        # 4 layers on 3 stages, sizes 2, 2, 1
FOUR = PPCase(5, 2, 1, 8, 16, "bfloat16", 9, 4, 3, 4, 4)          # one micro-batch per sequence
TWO = PPCase(2, 2, 2, 8, 16, "float32", 1, 3, 5, 2, 2)


def _model(reference, case: PPCase, dtype=None):
    m = reference.of("model")
    cfg = case.config(m.get("ModelConfig"), **({"dtype": dtype} if dtype is not None else {}))
    return m.get("Transformer")(cfg, seed=case.seed)


def _ok(outs) -> None:
    for stage, out in enumerate(outs):
        assert out["error"] is None, f"stage {stage} (rank {stage}) failed:\n{out['error']}"


def _worse_reference(reference, case):
    """The tolerance rule's reference level: the worse (against the float64 oracle) of the unsplit
    low-precision model and the low-precision model run micro-batch by micro-batch."""
    tokens = case.tokens()
    model, oracle = _model(reference, case), _model(reference, case, torch.float64)
    sizes = [len(c) for c in torch.tensor_split(torch.arange(case.batch), case.microbatches)]
    with torch.no_grad():
        want = oracle(tokens)
        whole = model(tokens)
        parts = torch.cat([model(t) for t in torch.split(tokens, sizes)])
    err = lambda x: float((x.double() - want).abs().max())  # noqa: E731
    return (whole if err(whole) >= err(parts) else parts), want


# --- law (1): the output -------------------------------------------------------------------------------
@example(case=UNEVEN3).via("mutant:extra_layers_dropped mutant:strided_microbatches mutant:remainder_dropped")
@example(case=FOUR).via("boundary: p = 4, a micro-batch per sequence, bf16")
@given(case=pp_cases())
@settings(max_examples=10)
def test_pipeline_output_equals_the_unsplit_model(impl, reference, case):
    """The last stage returns the logits (batch, seq, vocab) of the unsplit model within the
    tolerance rule (float64 oracle); every other stage returns None."""
    outs = impl.call_in_process(runs.forward, case)
    _ok(outs)
    for stage, out in enumerate(outs[:-1]):
        assert out["result"]["returned_none"], f"stage {stage} of {case.stages} returned a value; only the last stage returns the logits"
    got = outs[-1]["result"]["logits"]
    assert got is not None, f"the last stage ({case.stages - 1}) returned None"
    ref, oracle = _worse_reference(reference, case)
    assert_close_to_oracle(got, ref, oracle, name=f"logits of the {case.stages}-stage pipeline, {case.microbatches} micro-batches",
                           inputs={"tokens": case.tokens()})


# --- law (2): the order of every stage's steps ----------------------------------------------------------
def _trace(log) -> list[tuple]:
    """A rank's steps: ("recv", peer, shape), ("run", module, batch), ("send", peer, shape)."""
    out = []
    for entry in log:
        if entry[0] in ("send", "recv"):
            out.append((entry[0], entry[1], tuple(entry[2][0][1]) if entry[2] else None))
        elif entry[0] == "pre":
            out.append(("run", entry[1], entry[2]))
    return out


def _expected_trace(impl, case: PPCase, stage: int) -> list[tuple]:
    start, stop = impl.get("partition_layers")(case.n_layers, case.stages)[stage]
    dim = case.n_heads * case.head_dim
    last = stage == case.stages - 1
    out = []
    for b in impl.get("microbatch_sizes")(case.batch, case.microbatches):
        if stage:
            out.append(("recv", stage - 1, (b, case.seq, dim)))
        else:
            out.append(("run", "embed", b))
        out += [("run", f"layer{i}", b) for i in range(start, stop)]
        if last:
            out += [("run", "norm", b), ("run", "lm_head", b)]
        else:
            out.append(("send", stage + 1, (b, case.seq, dim)))
    return out


@example(case=UNEVEN3).via("mutant:sends_after_the_whole_batch mutant:extra_layers_dropped")
@example(case=TWO).via("mutant:sends_after_the_whole_batch")
@given(case=pp_cases(stages=(1, 2, 3, 4)))
@settings(max_examples=8)
def test_each_stage_runs_its_steps_in_order(impl, case):
    """Stage s, for each micro-batch j in turn (sizes microbatch_sizes(batch, m)): receive its
    activations from stage s-1 (stage 0: embed), run its layers partition_layers(L, p)[s] in
    order (the last stage: then norm and lm_head), send the result to stage s+1 -- before it
    starts micro-batch j+1; together the stages run every layer once per micro-batch. The steps
    are the model's own modules, seen through forward hooks."""
    outs = impl.call_in_process(runs.forward, case)
    _ok(outs)
    layers = [step[1] for out in outs for step in _trace(out["log"]) if step[0] == "run" and step[1].startswith("layer")]
    want_layers = [f"layer{i}" for i in range(case.n_layers)] * case.microbatches
    assert sorted(layers) == sorted(want_layers), (
        f"the stages together ran {sorted(set(layers))} ({len(layers)} calls); every one of the {case.n_layers} layers "
        f"runs once per micro-batch ({case.microbatches}), on one stage")
    for stage, out in enumerate(outs):
        got, want = _trace(out["log"]), _expected_trace(impl, case, stage)
        if got != want:
            first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
            raise AssertionError(
                f"stage {stage} of {case.stages}, {case.microbatches} micro-batches: step {first} is "
                f"{got[first] if first < len(got) else 'missing'}, the stated order has "
                f"{want[first] if first < len(want) else 'nothing more'}\n  ran    {got[:first + 3]}\n  stated {want[:first + 3]}")


# --- law (3): the bytes between stages ------------------------------------------------------------------
@example(case=UNEVEN3).via("mutant:pipeline_bytes_counts_p_boundaries")
@given(case=pp_cases(stages=(1, 2, 3, 4)))
@settings(max_examples=6)
def test_activations_cross_each_boundary_bit_for_bit(impl, reference, case):
    """Every tensor stage s sends stage s+1 arrives bit for bit; across each boundary they weigh
    batch x seq x dim x element_bytes; in all (p - 1) x that = pipeline_bytes(config, batch, seq,
    p); no other ProcessGroup call (no collective, no logits sent)."""
    outs = impl.call_in_process(runs.forward, case)
    _ok(outs)
    el = DTYPES[case.dtype].itemsize
    boundary = case.batch * case.seq * case.n_heads * case.head_dim * el
    total = 0
    for s, out in enumerate(outs):
        other = [e[0] for e in out["log"] if e[0] not in ("send", "recv", "pre", "post")]
        assert not other, f"stage {s} called {sorted(set(other))}; a pipeline only sends and receives"
        if s + 1 < case.stages:
            sent = [t for e in out["log"] if e[0] == "send" and e[1] == s + 1 for t in e[3]]
            got = [t for e in outs[s + 1]["log"] if e[0] == "recv" and e[1] == s for t in e[3]]
            assert len(sent) == len(got) and all(a.dtype == b.dtype and torch.equal(a, b) for a, b in zip(sent, got)), (
                f"stage {s + 1} did not receive bit for bit what stage {s} sent it")
            assert all(t.dtype == DTYPES[case.dtype] for t in sent), (
                f"stage {s} sent {sorted({str(t.dtype) for t in sent})}; activations travel in the model's dtype {case.dtype}")
            moved = sum(t.numel() * t.element_size() for t in sent)
            assert moved == boundary, (f"stage {s} sent {moved} bytes to stage {s + 1}; batch {case.batch} x seq {case.seq} x "
                                       f"dim {case.n_heads * case.head_dim} x {el} B = {boundary}")
            total += moved
        else:
            assert not [e for e in out["log"] if e[0] == "send"], f"the last stage ({s}) sent something"
    cfg = case.config(reference.of("model").get("ModelConfig"))
    want = impl.get("pipeline_bytes")(cfg, case.batch, case.seq, case.stages)
    assert want == total == (case.stages - 1) * boundary, (
        f"pipeline_bytes(config, {case.batch}, {case.seq}, {case.stages}) = {want!r}; counted {total}")


@example(layers=80, dim=8192, batch=1, seq=1, p=2, dtype="bfloat16").via("mutant:pipeline_bytes_counts_p_boundaries")
@given(layers=st.integers(1, 96), dim=st.sampled_from([8, 64, 4096]), batch=st.integers(1, 64),
       seq=st.integers(1, 4096), p=st.integers(1, 8), dtype=st.sampled_from(["float16", "bfloat16", "float32", "float64"]))
def test_pipeline_bytes_closed_form(impl, reference, layers, dim, batch, seq, p, dtype):
    """pipeline_bytes(config, batch, seq, p, dtype) = (p - 1) x batch x seq x dim x element_bytes
    (dtype defaulting to the config's); an int, 0 for one stage, independent of the layer count."""
    cfg = reference.of("model").get("ModelConfig")(dim=dim, n_layers=layers, n_heads=1, n_kv_heads=1, hidden_dim=16,
                                                   dtype=DTYPES[dtype])
    want = (p - 1) * batch * seq * dim * DTYPES[dtype].itemsize
    fn = impl.get("pipeline_bytes")
    for got in (fn(cfg, batch, seq, p), fn(cfg.replace(dtype=torch.float64), batch, seq, p, DTYPES[dtype])):
        assert isinstance(got, int) and not isinstance(got, bool) and got == want, (
            f"pipeline_bytes(dim {dim}, {dtype}, batch {batch}, seq {seq}, p {p}) = {got!r}; expected {want}")


def test_hand_computed_numbers(impl, reference):
    """docs/pipeline_parallel.md's numbers: Llama-3-70B's shape (dim 8192, bf16) split in 2
    stages sends 16 KiB per token across its one boundary (16,384 B), where 8-way tensor
    parallelism all-reduces 2,621,440 B (2.5 MiB) per token; the bubble of 2 stages is 1/2 with one
    micro-batch, 1/9 with 8; of 4 stages 3/4 and 3/11."""
    cfg = reference.of("model").get("ModelConfig")(vocab_size=8, dim=8192, n_layers=80, n_heads=64, n_kv_heads=8,
                                                   hidden_dim=16, dtype=torch.bfloat16)
    assert impl.get("pipeline_bytes")(cfg, 1, 1, 2) == 16_384
    assert impl.get("pipeline_bytes")(cfg, 1, 4096, 2) == 64 * 2**20
    b = impl.get("bubble_fraction")
    assert (b(2, 1), b(2, 8), b(4, 1), b(4, 8)) == (Fraction(1, 2), Fraction(1, 9), Fraction(3, 4), Fraction(3, 11))


# --- law (4): causality, the loose timing check ---------------------------------------------------------
def _busy(log, first: str, last: str) -> list[tuple[float, float]]:
    """(start, end) of each micro-batch on a stage: from the pre-hook of its first module to the
    post-hook of its last."""
    starts = [e[-1] for e in log if e[0] == "pre" and e[1] == first]
    ends = [e[-1] for e in log if e[0] == "post" and e[1] == last]
    return list(zip(starts, ends))


@example(case=TWO).via("boundary: two stages, two micro-batches")
@given(case=pp_cases(stages=(2, 3)))
@settings(max_examples=4)
def test_a_stage_starts_a_microbatch_after_the_previous_stage_finished_it(impl, case):
    """One clock for every process (time.monotonic): stage s's first module of micro-batch j starts
    after stage s-1's last module of j ended. With one micro-batch the stages therefore never
    overlap and the measured bubble 1 - sum(busy) / (p x wall) is at least (p-1)/p. (The timing
    law the tests assert; docs/pipeline_parallel.md reports the measured bubbles.)"""
    outs = impl.call_in_process(runs.forward, case)
    _ok(outs)
    spans = []
    for s, out in enumerate(outs):
        start, stop = impl.get("partition_layers")(case.n_layers, case.stages)[s]
        first = "embed" if s == 0 else f"layer{start}"
        last = "lm_head" if s == case.stages - 1 else f"layer{stop - 1}"
        spans.append(_busy(out["log"], first, last))
        assert len(spans[-1]) == case.microbatches, f"stage {s}: {len(spans[-1])} micro-batches seen run"
    for s in range(1, case.stages):
        for j, ((b0, e0), (b1, e1)) in enumerate(zip(spans[s - 1], spans[s])):
            assert b1 >= e0, (f"stage {s} started micro-batch {j} at {b1:.6f}, before stage {s - 1} finished it at "
                              f"{e0:.6f}: it did not wait for its input")
    if case.microbatches == 1:
        wall = spans[-1][-1][1] - spans[0][0][0]
        busy = sum(e - b for stage in spans for b, e in stage)
        assert 1 - busy / (case.stages * wall) >= (case.stages - 1) / case.stages - 1e-9


# --- law (5): schedules, simulation, closed forms -------------------------------------------------------
@st.composite
def schedules(draw):
    """A random schedule: per stage a random order of the forwards, and (training) each backward
    inserted somewhere after its forward; step times one per stage."""
    p, m = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    training = draw(st.booleans())
    out = []
    for _ in range(p):
        steps = [("F", j) for j in draw(st.permutations(list(range(m))))]
        if training:
            for j in range(m):
                after = steps.index(("F", j))
                steps.insert(draw(st.integers(after + 1, len(steps))), ("B", j))
        out.append(steps)
    tf = [draw(st.integers(1, 4)) for _ in range(p)]
    tb = [draw(st.integers(1, 4)) for _ in range(p)]
    return out, tf, tb


@example(sched=([[("F", 0), ("F", 1), ("B", 0), ("B", 1)], [("F", 0), ("B", 0), ("F", 1), ("B", 1)]], [1, 1], [2, 2])).via(
    "mutant:backward_ignores_next_stage")
@example(sched=([[("F", 0), ("B", 0), ("F", 1), ("B", 1)], [("F", 1), ("F", 0), ("B", 0), ("B", 1)]], [1, 1], [1, 1])).via(
    "boundary: a schedule that deadlocks")
@example(sched=([[("F", 0), ("F", 1)], [("F", 0), ("F", 1)]], [3, 1], [1, 1])).via("mutant:bubble_of_stage_zero")
@given(sched=schedules())
@settings(max_examples=40)
def test_simulation_is_the_dependency_graphs_longest_path(impl, sched):
    """simulate_schedule on any schedule: each step ends at the longest path to it in the graph of
    stage orders and data dependencies (exact Fractions), busy and bubble follow, in-flight peaks
    are the orders' prefix maxima; a schedule whose graph has a cycle deadlocks: ValueError naming
    ``schedule``. Forward-only schedules never beat the bubble formula, unequal stages included."""
    schedule, tf, tb = sched
    p, m = len(schedule), sum(1 for k, _ in schedule[0] if k == "F")
    ends = oracles.longest_path(schedule, tf, tb)
    simulate = impl.get("simulate_schedule")
    if ends is None:
        with pytest.raises(ValueError, match=r"(?i)\bschedule\b"):
            simulate(schedule, tf, tb)
        return
    out = simulate(schedule, tf, tb)
    for s, steps in enumerate(out["steps"]):
        assert [(k, j) for k, j, _, _ in steps] == schedule[s], f"stage {s} ran {steps}, not its order {schedule[s]}"
        for k, j, start, end in steps:
            assert end == ends[(k, s, j)] and end - start == (tf[s] if k == "F" else tb[s]), (
                f"stage {s}'s {k}{j} ran [{start}, {end}]; the dependency graph's longest path ends it at {ends[(k, s, j)]}")
    span = max(ends.values())
    busy = [sum(Fraction(tf[s] if k == "F" else tb[s]) for k, _ in schedule[s]) for s in range(p)]
    assert out["makespan"] == span and list(out["busy"]) == busy
    assert out["bubble"] == 1 - sum(busy) / (p * span), f"bubble {out['bubble']}, expected {1 - sum(busy) / (p * span)}"
    peaks = []
    for steps in schedule:
        run = [sum(1 if k == "F" else -1 for k, _ in steps[:i + 1]) for i in range(len(steps))]
        peaks.append(max(run))
    assert list(out["peak_in_flight"]) == peaks
    if not any(k == "B" for k, _ in schedule[0]):
        assert out["bubble"] >= Fraction(p - 1, m + p - 1), f"a forward schedule beat the bubble formula: {out['bubble']}"


@example(n_layers=7, n_stages=3).via("mutant:extra_layers_dropped")
@given(n_layers=st.integers(1, 40), n_stages=st.integers(1, 40))
def test_partition_layers(impl, n_layers, n_stages):
    """n_stages contiguous blocks in order covering range(n_layers), sizes differing by at most one
    (none empty); n_stages > n_layers: ValueError naming n_stages."""
    fn = impl.get("partition_layers")
    if n_stages > n_layers:
        with pytest.raises(ValueError, match=r"(?i)\bn_stages\b"):
            fn(n_layers, n_stages)
        return
    parts = [tuple(x) for x in fn(n_layers, n_stages)]
    assert len(parts) == n_stages and parts[0][0] == 0 and parts[-1][1] == n_layers, parts
    assert all(a[1] == b[0] for a, b in zip(parts, parts[1:])), f"not contiguous: {parts}"
    sizes = [b - a for a, b in parts]
    assert min(sizes) >= 1 and max(sizes) - min(sizes) <= 1, f"unbalanced: sizes {sizes}"


@pytest.mark.choice("the first n_layers % p stages hold one layer more")
def test_partition_layers_extras_first(impl):
    assert [tuple(x) for x in impl.get("partition_layers")(7, 3)] == [(0, 3), (3, 5), (5, 7)]
    assert [tuple(x) for x in impl.get("partition_layers")(10, 4)] == [(0, 3), (3, 6), (6, 8), (8, 10)]


@example(batch=7, m=3).via("mutant:remainder_dropped")
@given(batch=st.integers(1, 40), m=st.integers(1, 40))
def test_microbatch_sizes(impl, batch, m):
    """m sizes summing to batch, differing by at most one, none empty; m > batch: ValueError
    naming n_microbatches."""
    fn = impl.get("microbatch_sizes")
    if m > batch:
        with pytest.raises(ValueError, match=r"(?i)\bn_microbatches\b"):
            fn(batch, m)
        return
    sizes = list(fn(batch, m))
    assert len(sizes) == m and sum(sizes) == batch and min(sizes) >= 1 and max(sizes) - min(sizes) <= 1, sizes


@pytest.mark.choice("micro-batch sizes: the larger first (torch.tensor_split)")
def test_microbatch_sizes_larger_first(impl):
    assert list(impl.get("microbatch_sizes")(7, 3)) == [3, 2, 2]
    assert list(impl.get("microbatch_sizes")(10, 4)) == [3, 3, 2, 2]


@pytest.mark.choice("the stages run the model's own modules on each micro-batch: the output is bit for bit "
                    "the model run micro-batch by micro-batch")
def test_output_is_the_model_per_microbatch_bit_for_bit(impl, reference):
    outs = impl.call_in_process(runs.forward, UNEVEN3)
    _ok(outs)
    model = _model(reference, UNEVEN3)
    with torch.no_grad():
        want = torch.cat([model(t) for t in torch.split(UNEVEN3.tokens(), [2, 2, 1])])
    assert torch.equal(outs[-1]["result"]["logits"], want), "the pipeline's logits are not the model's, micro-batch by micro-batch, bit for bit"


# --- bad input ------------------------------------------------------------------------------------------
def _counts(names: tuple[str, ...]) -> list[Bad]:
    return [Bad(f"{kind} {n}", {n: v}, e, (n,)) for n in names
            for kind, v, e in (("zero", 0, ValueError), ("negative", -1, ValueError), ("bool", True, TypeError),
                               ("float", 2.0, TypeError), ("None", None, TypeError))]


@bad_cases(_counts(("n_layers", "n_stages")) + [Bad("more stages than layers", dict(n_stages=5), ValueError, ("n_stages",))])
def test_partition_layers_rejects_bad_input(impl, bad):
    assert_rejects(impl.get("partition_layers"), dict(n_layers=4, n_stages=2), bad)


@bad_cases(_counts(("batch", "n_microbatches")) + [Bad("empty micro-batch", dict(n_microbatches=5), ValueError,
                                                        ("n_microbatches",))])
def test_microbatch_sizes_rejects_bad_input(impl, bad):
    assert_rejects(impl.get("microbatch_sizes"), dict(batch=4, n_microbatches=2), bad)


@bad_cases(_counts(("n_stages", "n_microbatches")))
def test_bubble_fraction_rejects_bad_input(impl, bad):
    assert_rejects(impl.get("bubble_fraction"), dict(n_stages=2, n_microbatches=4), bad)


@bad_cases(_counts(("n_stages", "n_microbatches")) + [
    Bad("unknown kind", dict(kind="interleaved"), ValueError, ("kind",)),
    Bad("str training", dict(training="yes"), TypeError, ("training",)),
    Bad("int training", dict(training=1), TypeError, ("training",)),
])
def test_pipeline_schedule_rejects_bad_input(impl, bad):
    assert_rejects(impl.get("pipeline_schedule"), dict(n_stages=2, n_microbatches=3, kind="1f1b", training=True), bad)


GOOD = [[("F", 0), ("F", 1), ("B", 0), ("B", 1)], [("F", 0), ("B", 0), ("F", 1), ("B", 1)]]
SIMULATE_BAD = [
    Bad("schedule not a list", dict(schedule="gpipe"), (TypeError, ValueError), ("schedule",)),
    Bad("empty schedule", dict(schedule=[]), (TypeError, ValueError), ("schedule",)),
    Bad("unknown step", dict(schedule=[[("F", 0), ("X", 0)]]), ValueError, ("schedule",)),
    Bad("negative micro-batch", dict(schedule=[[("F", -1)]]), ValueError, ("schedule",)),
    Bad("forward twice", dict(schedule=[[("F", 0), ("F", 0)], [("F", 0), ("F", 1)]]), ValueError, ("schedule",)),
    Bad("forward missing", dict(schedule=[[("F", 1)]]), ValueError, ("schedule",)),
    Bad("backward before forward", dict(schedule=[[("B", 0), ("F", 0)]]), ValueError, ("schedule",)),
    Bad("some backwards only", dict(schedule=[[("F", 0), ("F", 1), ("B", 0)]]), ValueError, ("schedule",)),
    Bad("stages disagree on m", dict(schedule=[[("F", 0), ("F", 1)], [("F", 0)]]), ValueError, ("schedule",)),
    Bad("stages disagree on training", dict(schedule=[[("F", 0), ("B", 0)], [("F", 0)]]), ValueError, ("schedule",)),
    Bad("deadlock", dict(schedule=[[("F", 0), ("B", 0), ("F", 1), ("B", 1)], [("F", 1), ("F", 0), ("B", 0), ("B", 1)]]),
        ValueError, ("schedule",)),
    Bad("zero t_forward", dict(t_forward=0), ValueError, ("t_forward",)),
    Bad("negative t_backward", dict(t_backward=-1), ValueError, ("t_backward",)),
    Bad("str t_forward", dict(t_forward="1"), TypeError, ("t_forward",)),
    Bad("bool t_backward", dict(t_backward=True), TypeError, ("t_backward",)),
    Bad("t_forward per stage of the wrong length", dict(t_forward=[1, 1, 1]), ValueError, ("t_forward",)),
]


@bad_cases(SIMULATE_BAD)
def test_simulate_schedule_rejects_bad_input(impl, bad):
    assert_rejects(impl.get("simulate_schedule"), dict(schedule=GOOD, t_forward=1, t_backward=2), bad)


def _cfg(**changes):
    from reference.model import ModelConfig
    return ModelConfig(**{**dict(vocab_size=16, dim=16, n_layers=2, n_heads=2, n_kv_heads=1, hidden_dim=16,
                                 max_seq_len=8), **changes})


@bad_cases([Bad("config not a config", dict(config=16), TypeError, ("config",)),
            Bad("str dtype", dict(dtype="float16"), TypeError, ("dtype",))]
           + _counts(("batch", "seq_len", "n_stages")))
def test_pipeline_bytes_rejects_bad_input(impl, bad):
    assert_rejects(impl.get("pipeline_bytes"), dict(config=_cfg(), batch=2, seq_len=3, n_stages=2, dtype=None), bad)


def _forward_bad() -> list[Bad]:
    return [
        Bad("model not a model", dict(model=_cfg()), TypeError, ("model",)),
        Bad("float tokens", dict(tokens=torch.zeros(2, 3)), TypeError, ("tokens",)),
        Bad("1-d tokens", dict(tokens=torch.zeros(3, dtype=torch.long)), ValueError, ("tokens",)),
        Bad("id past vocab", dict(tokens=torch.tensor([[1, 16], [0, 0]])), ValueError, ("tokens",)),
        Bad("empty micro-batch", dict(n_microbatches=3), ValueError, ("n_microbatches",)),
        Bad("zero micro-batches", dict(n_microbatches=0), ValueError, ("n_microbatches",)),
        Bad("stage past n_stages", dict(stage=1), ValueError, ("stage",)),
        Bad("negative stage", dict(stage=-1), ValueError, ("stage",)),
        Bad("more stages than layers", dict(n_stages=3, stage=0), ValueError, ("n_stages",)),
        Bad("zero stages", dict(n_stages=0, stage=0), ValueError, ("n_stages",)),
        Bad("bool stage", dict(stage=False), TypeError, ("stage",)),
    ]


@bad_cases(_forward_bad())
def test_pipeline_forward_rejects_bad_input(impl, bad):
    """One stage, in this process (no process group: the checks come first)."""
    from reference.model import Transformer
    model = Transformer(_cfg(), seed=0)
    assert_rejects(impl.get("pipeline_forward"),
                   lambda: dict(model=model, tokens=torch.tensor([[1, 2, 3], [4, 5, 6]]), n_microbatches=2, stage=0,
                                n_stages=1), bad)


@pytest.mark.parametrize("what,word", [("stage", "stage"), ("world", "n_stages")])
def test_rejects_a_mismatched_group(impl, what, word):
    """On a real 2-rank group: a ``stage`` other than this process's rank of the group, an
    ``n_stages`` the group does not have: ValueError naming it, on every rank, before any send."""
    import re
    outs = impl.call_in_process(runs.bad, TWO, what)
    for rank, out in enumerate(outs):
        assert out["error"] is None, f"rank {rank} failed otherwise (or hung):\n{out['error']}"
        got = out["result"]
        assert got is not None, f"rank {rank}: the bad {what} was accepted; expected a ValueError naming {word!r}"
        assert got["type"] == "ValueError" and re.search(rf"(?i)(?<![A-Za-z0-9_]){word}(?![A-Za-z0-9_])", got["message"]), (
            f"rank {rank}: bad {what}: expected a ValueError naming {word!r}, got {got['type']}: {got['message']}")
