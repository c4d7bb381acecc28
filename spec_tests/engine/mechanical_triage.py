"""Surviving mechanical variants of reference/engine.py and optimized/engine.py that are not gaps
of the spec (read by ``conformance.mechanical.triage`` as data). Key: (module, the source line,
the change).

Sample run (40 of the variants, ``python -m conformance power --mechanical both --concept engine
--profile mutants --sample 40``): 25 killed, 15 survivors. Gaps closed since (no entry here): the
default ``top_k`` of the optimized add_request (test_omitted_sampling_arguments_are_their_defaults)
and the exact-fill boundary ``len(prompt) + max_tokens == max_seq_len``
(test_a_request_filling_the_context_exactly_is_accepted).

Triage of the module-4 sweep's 39 survivors (a uniform sample of 112 of the 401 variants). Gaps closed
(no entry here): generate's arrival clock -- a step counter that never advances, runs backwards or
starts at -1 or 1, arrivals defaulting to something other than all 0 -- is now observable
(test_generate_adds_each_request_just_before_its_step_number: a bad request raises when it arrives,
and the running request's token count shows how many steps ran before; after idle steps by hand and
after an earlier generate; and generate is bounded, so a clock that never reaches an arrival fails
instead of hanging: the old entries for ``self.num_steps = 0`` 0 -> 1 and ``arrivals[pending[0]]``
0 -> -1 were wrong and are gone); generate's bad input (test_generate_rejects_bad_requests_and_arrivals:
a str/dict/generator ``requests``, ``arrivals`` of the wrong length, a float/bool/negative arrival);
the id of a *finished* request reused (test_request_ids_are_never_reused: the scheduler forgets
finished requests, so only the engine's own check rejects it); a 1-d integer tensor prompt
(test_a_1d_integer_tensor_prompt_is_its_list_of_ids); a bytes or int prompt / stop_token_ids
(bad-input rows: bytes iterate as ints, so the `or -> and` variants accepted them).
"""

_GRAPH = ("outside: the CUDA-graph decode path (capture, decode_graph, packed_forward_graphed) runs only on "
          "CUDA with float16/bfloat16; on CPU it is never entered (the GPU run of bench/engine_serving.py and "
          ".devscratch's GPU check exercise it)")
_GRAPH_TEST = ("outside: the test after `self.use_cuda_graphs and`, which is False unless the engine's device is CUDA "
               "and its dtype float16/bfloat16; on CPU the `and` stops there and the eager path runs whatever the "
               "rest says")
_ONE_D = ("a 1-d float/complex/bool tensor's tolist() holds floats/complexes/bools, which check_prompt's "
          "is_int test then rejects with the same TypeError naming prompt; only a tensor with a second fault "
          "(not 1-d, or empty) gets the ValueError of that fault instead, where the contract orders neither first")

TRIAGE = {
    ("optimized", "stream.wait_stream(torch.cuda.current_stream(dev))",
     "drop `stream.wait_stream(torch.cuda.current_stream(dev))`"): ("outside the contract", _GRAPH),
    ("optimized", "size = 1", "1 -> 0"): ("outside the contract", _GRAPH),
    ("optimized", 'self.use_cuda_graphs = self.device.type == "cuda" and self.k_pool.dtype in (torch.float16, torch.bfloat16)',
     "in -> not in"): ("outside the contract", _GRAPH),
    ("optimized", "h = h + attn.o_proj(out.reshape(1, total, c.n_heads * c.head_dim))", "1 -> 2"): ("outside the contract", _GRAPH),
    ("optimized", "h = h + attn.o_proj(out.reshape(1, total, c.n_heads * c.head_dim))", "* -> /"): ("outside the contract", _GRAPH),
    ("reference", 'check_int("stop_token_ids", t, minimum=0)', 'drop `check_int("stop_token_ids", t, minimum=0)`'): (
        "equivalent", "StopParams(stop_token_ids=...) built a few lines later runs the same check_int and raises the "
                      "same TypeError/ValueError naming stop_token_ids, before the scheduler or the engine changes"),
    ("reference", "need = -(-(len(prompt) + max_tokens - 1) // self.block_size)", "// -> /"): (
        "equivalent", "for an integer num_blocks, x / b > num_blocks exactly when ceil(x / b) > num_blocks: the "
                      "rejection is the same (only the message's block count reads 3.5 instead of 4)"),
    # -- the module-4 sweep's survivors -----------------------------------------------------------------
    ("reference", 'raise TypeError(f"prompt must hold integer token ids, got a {prompt.dtype} tensor")',
     'drop `raise TypeError(f"prompt must hold integer token ids, got a `'): ("equivalent", _ONE_D),
    ("reference", "if prompt.dtype.is_floating_point or prompt.dtype.is_complex or prompt.dtype == torch.bool:",
     "or -> and"): ("equivalent", "the condition is then never true (no dtype is both floating point and complex): "
                                  "the raise is dropped; " + _ONE_D),
    ("reference", 'raise ValueError(f"stop_token_ids: id {t} is outside [0, {c.vocab_size})")',
     'drop `raise ValueError(f"stop_token_ids: id {t} is outside [0, {c.`'): (
        "equivalent", "a check repeated: StopChecker(StopParams(...), [b''] * vocab_size), built a few lines later "
                      "before the scheduler or the engine changes, raises ValueError 'stop_token_ids [..] are not in "
                      "the vocab' for an id >= vocab_size (the row 'stop id = vocab' passes)"),
    ("reference", 'check_int("max_tokens", max_tokens, minimum=1)', "1 -> 0"): (
        "equivalent", "max_tokens=0 then passes the max_seq_len and block checks (both name max_tokens when they "
                      "fail) and reaches StopParams(max_tokens=0), whose check_int('max_tokens', minimum=1) raises "
                      "the same ValueError naming max_tokens before anything changes; with a second bad argument "
                      "that one may be named first, an order the contract leaves open"),
    ("reference", "need = -(-(len(prompt) + max_tokens - 1) // self.block_size)", "1 -> 2"): (
        "equivalent", "the need only shrinks (by one block where len(prompt) + max_tokens - 1 is one past a "
                      "multiple of block_size); a request it then lets through is refused by scheduler.add_request's own "
                      "blocks_for(len(prompt) + max_tokens - 1) > num_blocks check, a ValueError naming prompt and "
                      "max_tokens, before any state changes (row 'one block more than the pool' passes)"),
    ("reference", "caches.append(PagedCacheView(self.k_pool, self.v_pool, plan.block_tables[rid], self.block_size, start))",
     "PagedCacheView(a, b, ...) -> PagedCacheView(b, a, ...)"): (
        "equivalent", "the two pools have the same shape, dtype and device and start as zeros, and the reference "
                      "engine reads and writes them only through this one construction: every K lands in and is "
                      "read back from v_pool and every V from k_pool, consistently across steps and shared "
                      "prefix blocks; no contract name exposes the pools"),
    ("optimized", "return h[0]", "0 -> -1"): (
        "equivalent", "packed_forward's h is (1, total, dim) (embed_tokens of tokens[None]): h[-1] is h[0]"),
    ("optimized", 'g["graph"].replay()', 'drop `g["graph"].replay()`'): ("outside the contract", _GRAPH),
    ("optimized", "torch.cuda.current_stream(dev).wait_stream(stream)",
     "drop `torch.cuda.current_stream(dev).wait_stream(stream)`"): ("outside the contract", _GRAPH),
    ("optimized", "size = 1", "1 -> 2"): ("outside the contract", _GRAPH),
    ("optimized", "if size not in self.graphs:", "not in -> in"): ("outside the contract", _GRAPH),
    ("optimized", "size *= 2", "2 -> 3"): ("outside the contract", _GRAPH),
    ("optimized", "h = h + attn.o_proj(out.reshape(1, total, c.n_heads * c.head_dim))", "reshape(a, b, ...) -> reshape(b, a, ...)"): (
        "outside the contract", _GRAPH),
    ("optimized", "h = h + attn.o_proj(out.reshape(1, total, c.n_heads * c.head_dim))", "1 -> 0"): ("outside the contract", _GRAPH),
    ("optimized", "if self.use_cuda_graphs and all(n == 1 for n in lengths) and len(ids) <= self.max_num_seqs:", "== -> !="): (
        "outside the contract", _GRAPH_TEST),
    ("optimized", "if self.use_cuda_graphs and all(n == 1 for n in lengths) and len(ids) <= self.max_num_seqs:", "1 -> 0"): (
        "outside the contract", _GRAPH_TEST),
}
