"""The serving engine on the optimized parts: reference/engine.py's loop and contract (its docstring
is the contract), with the forward pass, the attention, the sampler and the stopper swapped.

What changes against the reference loop:

* **One packed forward, written for the paged pool.** The reference runs ``forward_batch`` with
  a per-request cache view that gathers every request's K/V into a contiguous copy at every layer.
  Here every scheduled token of the step is one row of a packed (total, ...) batch: the linear
  layers, norms and RoPE run once over all rows; the new K/V rows are scattered into the pool in one
  indexed store per layer (a *slot mapping*: position j of a request goes to flat slot
  ``block_table[j // block_size] * block_size + j % block_size``); only the last row of each request
  reaches the final norm and ``lm_head`` (the logits of the other rows are never needed).
* **Decode rows: paged attention straight from the block tables** (``optimized.paged_attention``,
  the split-KV Triton kernel; no gather), one query row per request.
* **Prefill rows (whole prompts, chunks, recomputes after preemption, the rest after a prefix
  hit): FlashAttention varlen** (``optimized.flash_attention.attention_varlen``): the chunk's
  queries packed end to end, each attending causally, bottom-right aligned, to its request's
  context (the earlier chunks / prefix-hit blocks plus itself), gathered from the pool once per
  layer.
* **One batched sampler call** (``optimized.sampling.sample``, sort-free) with per-row parameters
  and each request's own uniform (drawn from its own generator exactly as the reference does), so a
  request's draws still do not depend on its batch.
* **The incremental stopper** (``optimized.stopping.StopChecker``).
* **Block tables kept on the engine** per request and extended by the blocks a step adds (the
  device copy of a step's tables is built from them); a preempted request's table is dropped
  (its blocks were freed) and rebuilt when it is scheduled again.
* **CUDA graphs for decode** (CUDA only, ``use_cuda_graphs``; off on CPU): a step whose every
  request decodes one token replays a graph captured once per padded batch size (1, 2, 4, 8, ...,
  ``max_num_seqs``) over static input buffers; padding rows have ``seq_len`` 0 (paged attention
  then reads nothing) and write to a scratch slot past the pool.

The scheduler is ``optimized.scheduler.Scheduler`` (the reference's decisions, flat step cost in
the waiting queue's length). A step's metadata (tokens, positions, slot mapping, tables, lengths)
is built as host ints and copied to the device in a few transfers, never one small tensor per
request. Prefix caching is the scheduler's block-hash pool (vLLM v1's design);
``optimized/radix.py`` (SGLang's radix tree) is the alternative design and is not used here.

Numerics: on float32/float64 models the attention kernels take the reference's PyTorch path and
the tokens equal the reference engine's except where rounding of the packed shapes decides a
near-tie; on float16/bfloat16 (the kernels' dtypes; on CPU under ``TRITON_INTERPRET=1``) the
tokens follow the tolerance rule (spec_tests/engine/).
"""
from __future__ import annotations

import torch

from optimized.flash_attention import attention_varlen
from optimized.paged_attention import paged_attention
from optimized.sampling import sample
from optimized.scheduler import Scheduler
from optimized.stopping import StopChecker
from reference.engine import Engine as _ReferenceEngine
from reference.engine import RequestOutput
from reference.model import rope_cos_sin, rotate_half
from reference.sampling import SamplingParams, draw_uniforms

__all__ = ["Engine", "RequestOutput"]


class Engine(_ReferenceEngine):
    """reference.engine.Engine (same constructor, methods and contract), on the optimized parts
    (module doc)."""

    def __init__(self, model, *, num_blocks: int, block_size: int, max_num_batched_tokens: int,
                 max_num_seqs: int, enable_chunked_prefill: bool = True, enable_prefix_caching: bool = False):
        super().__init__(model, num_blocks=num_blocks, block_size=block_size,
                         max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs,
                         enable_chunked_prefill=enable_chunked_prefill, enable_prefix_caching=enable_prefix_caching)
        self.scheduler = Scheduler(num_blocks, block_size, max_num_batched_tokens, max_num_seqs,
                                   enable_chunked_prefill=enable_chunked_prefill,
                                   enable_prefix_caching=enable_prefix_caching)
        c = self.config
        # one spare block past the pool: the scratch slots CUDA-graph padding rows write to
        shape = (c.n_layers, num_blocks + 1, block_size, c.n_kv_heads, c.head_dim)
        self.k_pool = self.k_pool.new_zeros(shape)
        self.v_pool = self.v_pool.new_zeros(shape)
        self.device = self.k_pool.device
        self.tables: dict = {}
        self.max_num_seqs = max_num_seqs
        self.use_cuda_graphs = self.device.type == "cuda" and self.k_pool.dtype in (torch.float16, torch.bfloat16)
        self.graphs: dict = {}

    def add_request(self, request_id, prompt, *, max_tokens: int, temperature: float = 0.0,
                    top_k: int = 0, top_p: float = 1.0, seed: int = 0, stop_token_ids=()) -> None:
        super().add_request(request_id, prompt, max_tokens=max_tokens, temperature=temperature, top_k=top_k,
                            top_p=top_p, seed=seed, stop_token_ids=stop_token_ids)
        request = self.requests[request_id]
        request.stopper = StopChecker(request.stopper.params, [b""] * self.config.vocab_size)

    # --- the loop ---------------------------------------------------------------------------
    @torch.no_grad()
    def step(self) -> list[RequestOutput]:
        self.num_steps += 1
        plan = self.scheduler.schedule()
        self.last_schedule = dict(plan.num_scheduled_tokens)
        for rid in plan.preempted:              # its blocks were freed: its table is rebuilt on return
            self.tables.pop(rid, None)
        if not plan.num_scheduled_tokens:
            self.scheduler.update(plan, {}, ())
            return []
        ids, starts, chunks = [], [], []
        for rid, n in plan.num_scheduled_tokens.items():
            start = plan.num_computed_tokens[rid]
            table = self.tables.setdefault(rid, [])
            table.extend(plan.block_tables[rid][len(table):])
            ids.append(rid)
            starts.append(start)
            chunks.append(self.requests[rid].tokens[start:start + n])
        logits = self.forward(ids, starts, chunks)
        done = [i for i, rid in enumerate(ids) if starts[i] + len(chunks[i]) == len(self.requests[rid].tokens)]
        sampled, stopped, outputs = {}, [], []
        if done:
            tokens = self.sample([ids[i] for i in done], logits[done])
            for i, token in zip(done, tokens):
                rid, request = ids[i], self.requests[ids[i]]
                request.output.append(token)
                sampled[rid] = token
                verdict = request.stopper.append(token)
                if verdict.finished:
                    request.finished, request.finish_reason = True, verdict.reason
                    stopped.append(rid)
                    self.tables.pop(rid, None)
                outputs.append(RequestOutput(rid, request.output[request.num_streamed:], request.finished,
                                             request.finish_reason))
                request.num_streamed = len(request.output)
        self.scheduler.update(plan, sampled, stopped)
        return outputs

    def sample(self, ids: list, logits: torch.Tensor) -> list[int]:
        """One sampler call for the rows of ``ids``: per-row parameters, each row's uniform from
        its request's own generator (the reference's draw)."""
        requests = [self.requests[rid] for rid in ids]
        params = SamplingParams(temperature=[r.params.temperature for r in requests],
                                top_k=[r.params.top_k for r in requests],
                                top_p=[r.params.top_p for r in requests])
        u = torch.cat([draw_uniforms(r.generator, 1, "cpu") for r in requests]).to(logits.device)
        return sample(logits, params, uniforms=u).tolist()

    # --- the packed forward -------------------------------------------------------------------
    def slot_mapping(self, rid, start: int, stop: int) -> list[int]:
        """Flat pool slots (block * block_size + offset) of positions start..stop-1 of ``rid``, as
        host ints: a step's metadata is built on the host and copied to the device once."""
        table, size = self.tables[rid], self.block_size
        return [table[j // size] * size + j % size for j in range(start, stop)]

    def forward(self, ids: list, starts: list[int], chunks: list[list[int]]) -> torch.Tensor:
        """Logits (len(ids), vocab) of the last scheduled token of each request; writes the K/V of
        every scheduled token into the pools."""
        lengths = [len(c) for c in chunks]
        if self.use_cuda_graphs and all(n == 1 for n in lengths) and len(ids) <= self.max_num_seqs:
            return self.decode_graph(ids, starts, chunks)
        dev = self.device
        first = [0]                                   # each request's first packed row
        for n in lengths:
            first.append(first[-1] + n)
        tokens = torch.tensor([t for c in chunks for t in c], dtype=torch.long, device=dev)
        positions = torch.tensor([j for s, n in zip(starts, lengths) for j in range(s, s + n)], device=dev)
        slots = torch.tensor([x for rid, s, n in zip(ids, starts, lengths) for x in self.slot_mapping(rid, s, s + n)],
                             dtype=torch.long, device=dev)
        decode = [i for i, n in enumerate(lengths) if n == 1 and starts[i] > 0]
        prefill = [i for i, n in enumerate(lengths) if not (n == 1 and starts[i] > 0)]
        attend = self.eager_attention(ids, starts, lengths, first, decode, prefill)
        h = self.packed_forward(tokens, positions, slots, attend)
        return self.logits(h[torch.tensor(first[1:], device=dev) - 1])

    def eager_attention(self, ids, starts, lengths, first, decode, prefill):
        """``attend(q, layer)`` of a mixed step: decode rows through paged attention straight from the
        block tables, prefill rows through FlashAttention varlen over their gathered context."""
        dev, (k_flat, v_flat) = self.device, self.flat_pools()
        if decode:
            width = max(len(self.tables[ids[i]]) for i in decode)
            decode_rows = torch.tensor([first[i] for i in decode], device=dev)
            tables = torch.tensor([self.tables[ids[i]] + [0] * (width - len(self.tables[ids[i]])) for i in decode],
                                  dtype=torch.int32, device=dev)
            seq_lens = torch.tensor([starts[i] + 1 for i in decode], dtype=torch.int32, device=dev)
        if prefill:
            ctx = [starts[i] + lengths[i] for i in prefill]
            context = torch.tensor([x for i, c in zip(prefill, ctx) for x in self.slot_mapping(ids[i], 0, c)],
                                   dtype=torch.long, device=dev)
            cu_q = torch.tensor([0] + [lengths[i] for i in prefill], device=dev).cumsum(0).to(torch.int32)
            cu_k = torch.tensor([0] + ctx, device=dev).cumsum(0).to(torch.int32)
            prefill_rows = torch.tensor([j for i in prefill for j in range(first[i], first[i] + lengths[i])], device=dev)

        def attend(q, layer):
            out = torch.empty_like(q)
            if decode:
                out[decode_rows] = paged_attention(q[decode_rows], self.k_pool[layer], self.v_pool[layer], tables,
                                                   seq_lens)
            if prefill:
                out[prefill_rows] = attention_varlen(q[prefill_rows], k_flat[layer, context], v_flat[layer, context],
                                                     cu_q, cu_k, causal=True)
            return out
        return attend

    def flat_pools(self):
        """The pools as (layers, slots, kv_heads, head_dim): a slot mapping indexes them directly."""
        c = self.config
        return (self.k_pool.view(c.n_layers, -1, c.n_kv_heads, c.head_dim),
                self.v_pool.view(c.n_layers, -1, c.n_kv_heads, c.head_dim))

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        m = self.model
        return m.lm_head(m.model.norm(h[None]))[0]

    def packed_forward(self, tokens, positions, slots, attend) -> torch.Tensor:
        """The decoder over packed rows (total, dim): RoPE at ``positions``, the new K/V scattered to
        ``slots`` of the pools, attention by ``attend(q, layer)`` (eager: decode and prefill rows
        apart; in a CUDA graph: the unchecked paged kernel). No host sync: it is also what a decode
        graph captures."""
        m, c = self.model, self.config
        total = tokens.shape[0]
        cos, sin = rope_cos_sin(positions, c.head_dim, c.rope_theta, m.dtype)
        cos, sin = cos[:, None], sin[:, None]                          # (total, 1, head_dim)
        h = m.model.embed_tokens(tokens[None])                          # (1, total, dim)
        k_flat, v_flat = self.flat_pools()
        for layer, block in enumerate(m.model.layers):
            attn, x = block.self_attn, block.input_layernorm(h)
            q = attn.q_proj(x).view(total, c.n_heads, c.head_dim)
            k = attn.k_proj(x).view(total, c.n_kv_heads, c.head_dim)
            v = attn.v_proj(x).view(total, c.n_kv_heads, c.head_dim)
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
            k_flat[layer, slots] = k
            v_flat[layer, slots] = v
            out = attend(q, layer)
            h = h + attn.o_proj(out.reshape(1, total, c.n_heads * c.head_dim))
            h = h + block.mlp(block.post_attention_layernorm(h))
        return h[0]

    # --- CUDA graphs for decode ---------------------------------------------------------------
    def warmup(self) -> list[int]:
        """Capture the decode graph of every padded batch size now (vLLM captures its graphs at
        start-up) instead of at the first step that needs each; returns the sizes captured (none on
        CPU or without ``use_cuda_graphs``). Changes no request state."""
        if not self.use_cuda_graphs:
            return []
        size = 1
        while True:
            size = min(size, self.max_num_seqs)
            if size not in self.graphs:
                self.graphs[size] = self.capture(size)
            if size == self.max_num_seqs:
                return sorted(self.graphs)
            size *= 2

    def decode_graph(self, ids, starts, chunks) -> torch.Tensor:
        """A decode-only step replayed from a CUDA graph of its padded batch size (module doc)."""
        batch = len(ids)
        size = 1
        while size < batch:
            size *= 2
        size = min(size, self.max_num_seqs)
        if size not in self.graphs:
            self.graphs[size] = self.capture(size)
        g = self.graphs[size]
        width, pad_block = g["tables"].shape[1], self.num_blocks
        scratch = self.num_blocks * self.block_size                     # the spare block's first slot
        longs = [[c[0] for c in chunks] + [0] * (size - batch), starts + [0] * (size - batch),
                 [self.slot_mapping(rid, s, s + 1)[0] for rid, s in zip(ids, starts)] + [scratch] * (size - batch)]
        ints = [s + 1 for s in starts] + [0] * (size - batch)
        for rid in ids:
            table = self.tables[rid]
            ints += table
            ints += [pad_block] * (width - len(table))
        ints += [pad_block] * (width * (size - batch))
        g["longs"].copy_(torch.tensor(longs, dtype=torch.long))         # two host-to-device copies a step
        g["ints"].copy_(torch.tensor(ints, dtype=torch.int32))
        g["graph"].replay()
        return g["logits"][:batch].clone()

    def capture(self, size: int) -> dict:
        """Static buffers and the captured decode forward for ``size`` rows: ``longs`` (3, size) holds
        tokens, positions and slots; ``ints`` the rows' seq_lens then their tables (size, width)."""
        from optimized.paged_attention import paged_attention_unchecked
        dev, c = self.device, self.config
        width = -(-c.max_seq_len // self.block_size)
        g = dict(longs=torch.zeros(3, size, dtype=torch.long, device=dev),
                 ints=torch.zeros(size * (1 + width), dtype=torch.int32, device=dev))
        g["longs"][2].fill_(self.num_blocks * self.block_size)
        g["ints"][size:].fill_(self.num_blocks)
        tokens, positions, slots = g["longs"]
        seq_lens, tables = g["ints"][:size], g["ints"][size:].view(size, width)
        g["tables"] = tables
        lens = [c.max_seq_len] * size          # the split plan of the longest context: fits every step
        k_pool, v_pool = self.k_pool, self.v_pool

        def attend(q, layer):
            return paged_attention_unchecked(q, k_pool[layer], v_pool[layer], tables, seq_lens, lens=lens)

        def run():
            return self.logits(self.packed_forward(tokens, positions, slots, attend))

        g["graph"], g["logits"] = self.record(run)
        return g

    def record(self, run):
        """``run`` warmed up on a side stream (its kernels compiled outside the capture), then captured
        in a CUDA graph: ``(graph, the output tensor its replays rewrite)``."""
        dev = self.device
        stream = torch.cuda.Stream(device=dev)
        stream.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(stream):
            for _ in range(2):
                run()
        torch.cuda.current_stream(dev).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = run()
        return graph, out
