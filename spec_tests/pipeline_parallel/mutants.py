"""Planted bugs of `pipeline_parallel` (each must make a test fail): the slips of stages, micro-batches
and schedules."""
from conformance.declarations import Patch

MUTANTS = [
    Patch("bubble_over_m", "The bubble as (p - 1)/m, its ratio to the useful time, instead of its share of "
          "the whole (p - 1)/(m + p - 1).",
          "    return Fraction(n_stages - 1, n_microbatches + n_stages - 1)\n",
          "    return Fraction(n_stages - 1, n_microbatches)\n"),
    Patch("extra_layers_dropped", "n_layers // p layers a stage: the n_layers % p left over are never run.",
          "        stop = start + base + (1 if s < extra else 0)\n", "        stop = start + base\n"),
    Patch("remainder_dropped", "Micro-batches of batch // m sequences each: the batch % m left over are lost.",
          "    return [base + (1 if j < extra else 0) for j in range(n_microbatches)]\n",
          "    return [base] * n_microbatches\n"),
    Patch("strided_microbatches", "Micro-batch j takes sequences j, j+m, j+2m, ... (a strided split) and the "
          "logits are concatenated as if contiguous: rows permuted.",
          "    for micro in torch.split(tokens, sizes, dim=0):\n",
          "    for micro in [tokens[j::n_microbatches] for j in range(n_microbatches)]:\n"),
    Patch("sends_after_the_whole_batch", "A stage runs every micro-batch before sending any: the next stage "
          "waits for the whole batch, no two stages ever overlap (bubble (p-1)/p whatever m).",
          "        else:\n            h = h.contiguous()\n"
          "            sends.append((dist.isend(h, group=group, group_dst=stage + 1), h))\n"
          "    for work, _ in sends:\n        work.wait()\n",
          "        else:\n            sends.append(h.contiguous())\n"
          "    for h in sends:\n        dist.send(h, group=group, group_dst=stage + 1)\n"),
    Patch("pipeline_bytes_counts_p_boundaries", "Activations counted across p boundaries: the last stage's "
          "output (the logits' input) is not sent anywhere.",
          "    return (n_stages - 1) * batch * seq_len", "    return n_stages * batch * seq_len"),
    Patch("backward_ignores_next_stage", "The simulation starts B(s, j) once F(s, j) is done, without waiting "
          "for the gradient of stage s+1.",
          '                    deps = [("F", s, j)] + ([("B", s + 1, j)] if s < p - 1 else [])\n',
          '                    deps = [("F", s, j)]\n'),
    Patch("bubble_of_stage_zero", "The bubble measured on stage 0 alone: right for equal stages, wrong when "
          "the stages' times differ.",
          '            "bubble": 1 - sum(busy, Fraction(0)) / (p * makespan),',
          '            "bubble": 1 - busy[0] / makespan,'),
    Patch("one_f_one_b_warmup_off_by_one", "1F1B warms up with p - s forwards instead of p - s - 1: one more "
          "micro-batch's activations held on every stage.",
          "        warmup = min(p - 1 - s, m)\n", "        warmup = min(p - s, m)\n"),
    Patch("inference_1f1b_has_backwards", "training=False honoured by GPipe only: the inference 1F1B schedule "
          "keeps its backward steps.",
          "    if not training:\n        return [list(forwards) for _ in range(p)]\n",
          '    if not training and kind == "gpipe":\n        return [list(forwards) for _ in range(p)]\n'),
]
