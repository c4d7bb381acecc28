"""The optimized engine's CUDA-graph decode path (``Engine.decode_graph`` / ``capture``), emulated on
the CPU: the graph is replaced by a replay that reruns the captured function into its output tensor
(``ReplayedRun``), so the static buffers, their padding rows and the metadata a step writes into them
run exactly as on a GPU, with the paged kernel under the Triton interpreter. (The CUDA capture itself,
``Engine.record``, needs a GPU; the engine spec's GPU runs cover it.) Never run against a submission.
"""
from __future__ import annotations

import pytest
import torch

from optimized.engine import Engine
from optimized.paged_attention import kernel_supports
from reference.model import ModelConfig, Transformer

pytestmark = pytest.mark.concept("engine")

CONFIG = ModelConfig(vocab_size=64, dim=32, n_layers=2, n_heads=4, n_kv_heads=2, max_seq_len=24,
                     dtype=torch.bfloat16)


# bf16 logits of magnitude ~1: the padded batch (8 rows for 5) may round a linear layer's rows apart
# by an ulp (2^-8 relative) per layer; measured max difference: see the test's print
ATOL = 0.05   # measured 0 on the 2-core AVX-512 development CPU (2026-12-06)


class ReplayedRun:
    """Stands in for a ``torch.cuda.CUDAGraph``: ``replay()`` reruns the captured function and writes
    its result into the tensor the capture returned (as a graph's replay rewrites its output)."""

    def __init__(self, run, out):
        self.run, self.out, self.replays = run, out, 0

    def replay(self):
        self.replays += 1
        self.out.copy_(self.run())


def _engine(model):
    e = Engine(model, num_blocks=24, block_size=2, max_num_batched_tokens=16, max_num_seqs=8)
    e.use_cuda_graphs = True

    def record(run):
        out = run()
        return ReplayedRun(run, out), out
    e.record = record
    return e


def test_decode_graph_equals_the_eager_step_and_writes_only_its_rows_and_the_scratch_block():
    """Every decode-only step through the graph path: its logits equal the eager path's on the same
    state (tolerance rule, bf16), and the pools change only in the batch's own new slots and the spare
    block past the pool (where padding rows write). Batches of 5, 4, 3, 2, 1 requests exercise padded
    sizes 8, 4, 2, 1; block size 2 makes the tables grow during decode."""
    model = Transformer(CONFIG, seed=3).eval()
    q = torch.zeros(1, CONFIG.n_heads, CONFIG.head_dim, dtype=torch.bfloat16)
    if not kernel_supports(q, torch.zeros(1, 2, CONFIG.n_kv_heads, CONFIG.head_dim, dtype=torch.bfloat16)):
        pytest.skip("the paged kernel runs on CPU only under TRITON_INTERPRET=1")
    e = _engine(model)
    graph_step = e.decode_graph
    checked, diffs = [], []

    def checked_decode_graph(ids, starts, chunks):
        e.use_cuda_graphs = False                          # the eager path on the same state
        eager = e.forward(ids, starts, chunks)
        e.use_cuda_graphs = True
        pools = e.k_pool.clone(), e.v_pool.clone()
        got = graph_step(ids, starts, chunks)
        diffs.append(float((got.float() - eager.float()).abs().max()))
        torch.testing.assert_close(got, eager, atol=ATOL, rtol=0, msg=lambda m: f"decode graph, batch {len(ids)}: {m}")
        allowed = {e.slot_mapping(rid, s, s + 1)[0] for rid, s in zip(ids, starts)}
        allowed |= set(range(e.num_blocks * e.block_size, (e.num_blocks + 1) * e.block_size))
        flat = lambda pool: pool.view(CONFIG.n_layers, -1, CONFIG.n_kv_heads * CONFIG.head_dim)
        for before, after in zip(pools, (e.k_pool, e.v_pool)):
            changed = (flat(before) != flat(after)).any(-1).any(0).nonzero().flatten().tolist()
            assert set(changed) <= allowed, f"the graph step wrote slots {sorted(set(changed) - allowed)}"
        checked.append(len(ids))
        return got

    e.decode_graph = checked_decode_graph
    for i, (prompt_len, max_tokens) in enumerate([(3, 6), (5, 2), (1, 4), (4, 8), (2, 5)]):
        e.add_request(i, list(range(1, prompt_len + 1)), max_tokens=max_tokens)
    while e.has_unfinished_requests():
        e.step()
    print(f"decode graph vs eager: max |logit difference| {max(diffs):.4g} over {len(diffs)} steps")
    assert {5, 4, 3, 2, 1} <= set(checked), checked
    assert sorted(e.graphs) == [1, 2, 4, 8] and all(g["graph"].replays for g in e.graphs.values())


def test_warmup_captures_every_padded_size_once():
    """``warmup`` captures sizes 1, 2, 4, ... up to max_num_seqs (8 here), and a later step reuses them."""
    model = Transformer(CONFIG, seed=3).eval()
    e = _engine(model)
    q = torch.zeros(1, CONFIG.n_heads, CONFIG.head_dim, dtype=torch.bfloat16)
    if not kernel_supports(q, e.k_pool[0]):
        pytest.skip("the paged kernel runs on CPU only under TRITON_INTERPRET=1")
    assert e.warmup() == [1, 2, 4, 8]
    captured = dict(e.graphs)
    assert e.warmup() == [1, 2, 4, 8] and all(e.graphs[k] is captured[k] for k in captured)
