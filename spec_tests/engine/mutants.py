"""Planted bugs of `engine` (each must make an engine test fail)."""
from conformance.declarations import Patch


MUTANTS = [
    Patch("prefill_ignores_computed_offset",
          "while a request has generated nothing, its scheduled tokens are taken from the start of its "
          "prompt, ignoring num_computed_tokens: after a prefix hit or an earlier chunk the first "
          "tokens are fed again, at the positions after the hit.",
          "            new = self.requests[rid].tokens[start:start + n]",
          "            new = (self.requests[rid].tokens[start:start + n] if self.requests[rid].output\n"
          "                   else self.requests[rid].tokens[:n])"),
    Patch("shared_generator",
          "one sampling generator for the whole engine (seeded by the first request): a request's "
          "draws depend on which requests sampled before it.",
          "torch.Generator().manual_seed(seed), stopper)",
          "self.__dict__.setdefault('_generator', torch.Generator().manual_seed(seed)), stopper)"),
    Patch("stream_repeats_after_prefill",
          "the streamed count advances only on decode steps: the token sampled at the end of a "
          "(chunked) prefill is streamed again with the next token.",
          "            request.num_streamed = len(request.output)",
          "            if plan.num_scheduled_tokens[rid] == 1:\n"
          "                request.num_streamed = len(request.output)"),
    Patch("stale_table_after_preemption",
          "a preempted request keeps its old block table on the engine: when it is scheduled again its "
          "recomputed KV goes to blocks it no longer owns (and other requests' KV is read).",
          "        for rid in plan.preempted:              # its blocks were freed: its table is rebuilt on return\n"
          "            self.tables.pop(rid, None)\n",
          "", module="optimized"),
    Patch("prefix_hit_context_dropped",
          "a prefill chunk attends only to its own tokens: the KV already in its blocks (a prefix "
          "hit, earlier chunks, is never read.",
          "            ctx = [starts[i] + lengths[i] for i in prefill]\n"
          "            context = torch.tensor([x for i, c in zip(prefill, ctx) for x in self.slot_mapping(ids[i], 0, c)],",
          "            ctx = [lengths[i] for i in prefill]\n"
          "            context = torch.tensor([x for i, c in zip(prefill, ctx)\n"
          "                                    for x in self.slot_mapping(ids[i], starts[i], starts[i] + c)],", module="optimized"),
    Patch("one_uniform_for_the_batch",
          "the batched sampler draws one uniform from the first request's generator and uses it for "
          "every row.",
          "        u = torch.cat([draw_uniforms(r.generator, 1, \"cpu\") for r in requests]).to(logits.device)",
          "        u = draw_uniforms(requests[0].generator, 1, \"cpu\").expand(len(requests)).to(logits.device)",
          module="optimized"),
    Patch("decode_misses_its_own_key",
          "decode attention's seq_lens count the cached tokens but not the token being decoded: its "
          "own K/V (written this step) is never attended.",
          "[starts[i] + 1 for i in decode]", "[starts[i] for i in decode]", module="optimized"),
]
