"""Planted bugs of `speculative` (each must make a speculative test fail): one realistic slip each
in reference/speculative.py (the last in optimized/speculative.py's vectorised bookkeeping). The
generator mutants touch only the path that draws its own uniforms, so only the tests that verify
with a generator (the seeded-draw pin and the chi-square tests) can see them."""
from conformance.declarations import Patch

BONUS = "    return n, _draw(p[n], v)\n"
DRAW = "    u = a.uniforms if a.uniforms is not None else draw(generator, a.batch, a.gamma, target_probs.device)\n"

MUTANTS = [
    Patch("recovered_from_p",
          "After a rejection the token is drawn from the target p instead of the residual "
          "max(p - q, 0): the rejected draft's mass is counted twice.",
          "            residual = (p[i] - qrow).clamp(min=0)\n",
          "            residual = p[i].clone()\n"),
    Patch("recovered_from_q",
          "After a rejection the token is drawn from the draft q instead of the residual.",
          "            residual = (p[i] - qrow).clamp(min=0)\n",
          "            residual = qrow.clone()\n"),
    Patch("accept_p_ge_q",
          "A draft is accepted iff p(x) >= q(x) (a deterministic threshold) instead of with "
          "probability min(1, p(x) / q(x)).",
          "            accepted = qi > 0 and u[i] * qi < pi\n",
          "            accepted = pi >= qi\n"),
    Patch("bonus_from_q",
          "When every draft is accepted, the bonus token is drawn from the last draft distribution "
          "q instead of the target p at position γ_r.",
          BONUS, "    return n, _draw(q[n - 1] if q is not None and n else p[n], v)\n"),
    Patch("bonus_skipped",
          "When every draft is accepted no bonus token is emitted (the row emits num_accepted "
          "tokens, PAD where the bonus belongs): lossless, but one token per step is lost.",
          BONUS, "    return n, PAD\n"),
    Patch("one_uniform_all_positions",
          "Every position's acceptance test uses the row's first uniform u_0: acceptances become "
          "perfectly correlated.",
          "            accepted = qi > 0 and u[i] * qi < pi\n",
          "            accepted = qi > 0 and u[0] * qi < pi\n"),
    Patch("uniforms_shared_across_rows",
          "Every row uses row 0's uniforms: rows are no longer independent.",
          "x, u[r][:n], u[r][a.gamma],\n", "x, u[0][:n], u[0][a.gamma],\n"),
    Patch("residual_next_q",
          "The residual after a rejection at position i subtracts q of position i + 1 (an "
          "off-by-one in the draft distributions; the last position keeps its own).",
          "            qrow = q[i] if q is not None else",
          "            qrow = q[min(i + 1, n - 1)] if q is not None else"),
    Patch("greedy_sampled_match",
          "Greedy rows accept a draft iff it equals a token SAMPLED from p_i with the position's "
          "uniform, instead of the argmax of p_i.",
          "            accepted = x[i] == int(p[i].argmax())\n",
          "            accepted = x[i] == _draw(p[i], u[i])\n"),
    Patch("zero_uniform_accepts",
          "Acceptance by u * q(x) <= p(x) instead of <: a uniform of exactly 0 accepts a draft of "
          "target probability 0.",
          "            accepted = qi > 0 and u[i] * qi < pi\n",
          "            accepted = qi > 0 and u[i] * qi <= pi\n"),
    Patch("q_zero_accepts",
          "No q(x) > 0 guard: a draft its own distribution gives probability 0 is accepted "
          "whenever p(x) > 0 (u * 0 < p).",
          "            accepted = qi > 0 and u[i] * qi < pi\n",
          "            accepted = u[i] * qi < pi\n"),
    Patch("empty_residual_unhandled",
          "No fallback for a residual with no positive entry (reachable only through rounding): "
          "the inverse CDF of all zeros returns the last token, whatever its probability.",
          "            if not bool((residual > 0).any()):   # only through rounding (module doc)\n"
               "                residual = p[i]\n", ""),
    Patch("draft_lens_ignored",
          "Per-row γ ignored: every row is verified over the padded width γ, reading the padding "
          "(garbage tokens and probabilities) as drafts.",
          "        n = lens[r]\n", "        n = a.gamma\n"),
    Patch("generator_float32",
          "The generator path draws float32 uniforms (then widened): other values, another "
          "generator state than the contract's torch.rand(batch, γ + 1, dtype=float64).",
          "    return torch.rand(batch, gamma + 1, generator=generator, dtype=torch.float64, device=device)\n",
          "    return torch.rand(batch, gamma + 1, generator=generator, dtype=torch.float32, device=device).double()\n"),
    Patch("generator_one_uniform_per_row",
          "The generator path draws ONE uniform per row and uses it for every acceptance test and "
          "the final draw; the explicit-uniforms path is right. Only tests that verify with a "
          "generator can see it.",
          DRAW,
          "    u = a.uniforms if a.uniforms is not None else draw(generator, a.batch, 0, target_probs.device).expand(\n"
          "        a.batch, a.gamma + 1)\n"),
    Patch("accepts_counted_not_run",
          "The optimized verifier counts every accepted draft (accept.sum) instead of the leading "
          "run of accepts: a draft accepted after a rejection is emitted too.",
          "        k = accept.to(torch.int64).cumprod(dim=1).sum(dim=1)\n",
          "        k = accept.to(torch.int64).sum(dim=1)\n", module="optimized"),
Patch("generator_drawn_with_uniforms",
          "The generator is consumed even when explicit uniforms are given (the draw happens first, "
          "then the uniforms win): the caller's generator advances for nothing.",
          DRAW,
          "    drawn = None if generator is None else draw(generator, a.batch, a.gamma, target_probs.device)\n"
          "    u = a.uniforms if a.uniforms is not None else drawn\n"),
    Patch("global_rng_draw",
          "The generator path draws from the global RNG (torch.rand without generator=): other "
          "values than the caller's generator, and torch.manual_seed's stream advances.",
          "    return torch.rand(batch, gamma + 1, generator=generator, dtype=torch.float64, device=device)\n",
          "    generator.manual_seed(generator.initial_seed())\n"
          "    return torch.rand(batch, gamma + 1, dtype=torch.float64, device=device)\n"),
    Patch("greedy_rows_skip_draft_validation",
          "draft_probs is validated only when some row samples: an all-greedy batch accepts NaN "
          "draft probabilities.",
          "    if q is not None:\n        report_bad_distributions(\"draft_probs\"",
          "    if q is not None and not bool(a.greedy.all()):\n        report_bad_distributions(\"draft_probs\""),
    Patch("sum_tolerance_loose",
          "One loose total tolerance (1e-2) for every dtype: a float32 or float64 target that sums "
          "to 1.005 passes validation.",
          "    tol = SUM_TOLERANCE[dtype]\n", "    tol = 1e-2\n"),
]

# ---- the plan/run path (VerifyPlan)
MUTANTS += [
    Patch("plan_keeps_the_callers_greedy_tensor",
          "The plan keeps the caller's greedy tensor instead of reading its values: a run reads the "
          "flags the engine has since written for its next step.",
          "        a = check_plan_inputs(target_probs, draft_probs, draft_tokens, draft_lens, greedy)\n"
          "        self._plan = dict(meta=",
          "        a = check_plan_inputs(target_probs, draft_probs, draft_tokens, draft_lens, greedy)\n"
          "        if isinstance(greedy, torch.Tensor):\n"
          "            a = a._replace(greedy=greedy)\n"
          "        self._plan = dict(meta="),
    Patch("failed_plan_forgets_previous",
          "plan drops the previous plan before validating the new one: a plan that raises leaves an "
          "object that can no longer run.",
          "        a = check_plan_inputs(target_probs, draft_probs, draft_tokens, draft_lens, greedy)\n"
          "        self._plan = dict(meta=",
          "        self._plan = None\n"
          "        a = check_plan_inputs(target_probs, draft_probs, draft_tokens, draft_lens, greedy)\n"
          "        self._plan = dict(meta="),
    Patch("run_trusts_the_tensors",
          "The optimized run skips the metadata check (it trusts the caller to pass the planned "
          "tensors): a batch of another shape is verified with the planned lengths, or fails deep "
          "inside with an error that names no argument.",
          "        check_run_arguments(pl.meta, target_probs, draft_probs, draft_tokens, uniforms, generator)\n",
          "", module="optimized"),
    Patch("run_skips_the_flagged_redraw",
          "The optimized run trusts the Triton draw's token on every row, also on the rows it flags "
          "as not certified (a target within rounding of a cumulative step, an empty residual).",
          "        redraw_flagged(p, q, x, k, lens, v, token, flag)\n", "", module="optimized"),
    Patch("run_uniforms_float32",
          "The optimized run reads the uniforms through float32 (a GPU sampler's habit): 1 - 2^-53 "
          "becomes 1, and the acceptance and draw thresholds move.",
          "        u = (uniforms.to(torch.float64) if uniforms is not None\n"
          "             else draw(generator, a.batch, a.gamma, target_probs.device))\n"
          "        return _run(",
          "        u = (uniforms.to(torch.float32).to(torch.float64) if uniforms is not None\n"
          "             else draw(generator, a.batch, a.gamma, target_probs.device))\n"
          "        return _run(", module="optimized"),
    Patch("any_greedy_row_means_all",
          "The optimized plan's shortcut for an all-greedy batch is taken as soon as one row is "
          "greedy: the sampled rows of a mixed batch are verified by argmax.",
          "        if pl.n_greedy == b:       # every row greedy: the argmax of every position\n",
          "        if pl.n_greedy:       # every row greedy: the argmax of every position\n", module="optimized"),
]
