"""Surviving mechanical variants of reference/engine.py and optimized/engine.py that are not gaps
of the spec (read by ``conformance.mechanical.triage`` as data). Key: (module, the source line,
the change).

Sample run (40 of the variants, ``python -m conformance power --mechanical both --concept engine
--profile mutants --sample 40``): 25 killed, 15 survivors. Gaps closed since (no entry here): the
default ``top_k`` of the optimized add_request (test_omitted_sampling_arguments_are_their_defaults)
and the exact-fill boundary ``len(prompt) + max_tokens == max_seq_len``
(test_a_request_filling_the_context_exactly_is_accepted).
"""

_GRAPH = ("outside: the CUDA-graph decode path (capture, decode_graph, packed_forward_graphed) runs only on "
          "CUDA with float16/bfloat16; on CPU it is never entered (the GPU run of bench/engine_serving.py and "
          ".devscratch's GPU check exercise it)")
_ARRIVALS = ("equivalent: generate() returns every request's tokens, which by the law do not depend on the "
             "step a request arrives at; shifting the arrival clock changes only which steps it shares")

TRIAGE = {
    ("optimized", "stream.wait_stream(torch.cuda.current_stream(dev))",
     "drop `stream.wait_stream(torch.cuda.current_stream(dev))`"): ("outside the contract", _GRAPH),
    ("optimized", "size = 1", "1 -> 0"): ("outside the contract", _GRAPH),
    ("optimized", 'self.use_cuda_graphs = self.device.type == "cuda" and self.k_pool.dtype in (torch.float16, torch.bfloat16)',
     "in -> not in"): ("outside the contract", _GRAPH),
    ("optimized", 'return paged_attention_unchecked(q, k_pool[layer], v_pool[layer], g["tables"], g["seq_lens"], lens=lens)',
     "paged_attention_unchecked(a, b, ...) -> paged_attention_unchecked(b, a, ...)"): ("outside the contract", _GRAPH),
    ("optimized", "v = attn.v_proj(x).view(total, c.n_kv_heads, c.head_dim)", "view(a, b, ...) -> view(b, a, ...) (#2)"): (
        "outside the contract", _GRAPH),
    ("optimized", 'g["seq_lens"][:batch] = torch.tensor([s + 1 for s in starts], dtype=torch.int32, device=self.device)',
     "+ -> -"): ("outside the contract", _GRAPH),
    ("optimized", 'g["seq_lens"][:batch] = torch.tensor([s + 1 for s in starts], dtype=torch.int32, device=self.device)',
     "1 -> 0"): ("outside the contract", _GRAPH),
    ("optimized", "h = h + attn.o_proj(out.reshape(1, total, c.n_heads * c.head_dim))", "1 -> 2"): ("outside the contract", _GRAPH),
    ("optimized", "h = h + attn.o_proj(out.reshape(1, total, c.n_heads * c.head_dim))", "* -> /"): ("outside the contract", _GRAPH),
    ("reference", 'check_int("stop_token_ids", t, minimum=0)', 'drop `check_int("stop_token_ids", t, minimum=0)`'): (
        "equivalent", "StopParams(stop_token_ids=...) built a few lines later runs the same check_int and raises the "
                      "same TypeError/ValueError naming stop_token_ids, before the scheduler or the engine changes"),
    ("reference", "self.num_steps = 0", "0 -> 1"): ("equivalent", _ARRIVALS),
    ("reference", "while pending and arrivals[pending[0]] <= self.num_steps:", "0 -> -1"): ("equivalent", _ARRIVALS),
    ("reference", "need = -(-(len(prompt) + max_tokens - 1) // self.block_size)", "// -> /"): (
        "equivalent", "for an integer num_blocks, x / b > num_blocks exactly when ceil(x / b) > num_blocks: the "
                      "rejection is the same (only the message's block count reads 3.5 instead of 4)"),
}
