"""Planted bugs of `sampling` (each must make a sampling test fail): one realistic slip each in
reference/sampling.py. ``samples_unfiltered``, ``sample_ignores_temperature``,
``generator_reseeded_each_call``, ``sample_float32_uniforms`` and ``sample_multinomial`` touch only
``sample``'s generator path (``sampling_probs`` and the explicit-uniforms path stay right), so only
the tests that draw with a generator can see them; ``uniforms_unfiltered`` only the
explicit-uniforms path. ``sample_float32_uniforms`` and ``sample_multinomial`` are lawful draws
(the right distribution): only the tests of the reference's choices (``@pytest.mark.choice``,
enforced for our own code and its mutants) catch them. Every pinned case of test_sampling.py
(``PINNED[...].mutant``) names the mutant here that it catches."""
from conformance.declarations import Patch

DRAW = "    u = uniforms if uniforms is not None else draw_uniforms(generator, batch, logits.device)\n"

MUTANTS = [
    Patch("top_p_drops_crossing_token",
          "Top-p keeps a token only while the cumulative mass INCLUDING it is <= p (masking "
          "cumsum > p instead of cumsum - q >= p), so the token that crosses p is dropped; the most "
          "likely token is always kept so a row is never empty.",
          "    kept_sorted = (above < top_p[:, None]) | (top_p[:, None] >= 1)\n",
          "    kept_sorted = (cum <= top_p[:, None]) | (top_p[:, None] >= 1)\n"
          "    kept_sorted[:, 0] = True\n"),
    Patch("top_k_breaks_ties",
          "Top-k keeps exactly k tokens: ties at the k-th value are broken by position (the first "
          "k of a stable sort) instead of keeping every token tied with the k-th.",
          "    sorted_z = torch.sort(z, dim=1, descending=True).values\n"
          "    kth = sorted_z.gather(1, (k - 1)[:, None])\n"
          "    return z >= kth\n",
          "    order = torch.sort(z, dim=1, descending=True, stable=True).indices\n"
          "    return torch.argsort(order, dim=1) < k[:, None]\n"),
    Patch("penalties_after_temperature",
          "Presence/frequency penalties applied to the temperature-scaled logits: x/T - f*c "
          "instead of (x - f*c)/T (the penalties run on x/T, then the result is scaled back).",
          "    x = apply_penalties(x, rows, prompt, output)\n",
          "    t = torch.where(rows.temperature > 0, rows.temperature, torch.ones_like(rows.temperature))[:, None]\n"
          "    x = apply_penalties(x / t, rows, prompt, output) * t\n"),
    Patch("top_p_full_vocab",
          "Top-p mass measured on the full-vocabulary distribution instead of the top-k survivors "
          "renormalised.",
          "    q = torch.softmax(zs, dim=1)\n",
          "    q = torch.softmax(z, dim=1)\n"),
    Patch("min_p_untempered",
          "Min-p threshold taken relative to the max of the distribution BEFORE temperature "
          "(exp(x - max x) >= min_p) instead of the temperature-scaled one.",
          "    keep = keep & min_p_mask(z, rows.min_p)\n",
          "    keep = keep & min_p_mask(x - x.amax(dim=1, keepdim=True), rows.min_p)\n"),
    Patch("samples_unfiltered",
          "The generator path draws from the UNFILTERED tempered softmax (top-k/top-p/min-p "
          "ignored); sampling_probs and explicit uniforms are right.",
          DRAW,
          "    if uniforms is None:\n"
          "        x, rows = processed_logits(logits, params, prompt_tokens, output_tokens)\n"
          "        probs = torch.where((rows.temperature == 0)[:, None], probs,\n"
          "                            torch.softmax(scale_temperature(x, rows.temperature), dim=1))\n"
          + DRAW),
    Patch("uniforms_unfiltered",
          "The explicit-uniforms path draws from the UNFILTERED tempered softmax (top-k/top-p/min-p "
          "ignored); sampling_probs and the generator path are right. Only the law's support check "
          "of sample with uniforms (and the reference's inverse-CDF choice) can see it.",
          DRAW,
          "    if uniforms is not None:\n"
          "        x, rows = processed_logits(logits, params, prompt_tokens, output_tokens)\n"
          "        probs = torch.where((rows.temperature == 0)[:, None], probs,\n"
          "                            torch.softmax(scale_temperature(x, rows.temperature), dim=1))\n"
          + DRAW),
    Patch("sample_ignores_temperature",
          "The generator path draws from the right support (the kept set) but with weights "
          "exp(x - max x), forgetting the temperature; sampling_probs and explicit uniforms are "
          "right. Same support, wrong weights: only a statistical test of generator draws sees it.",
          DRAW,
          "    if uniforms is None:\n"
          "        x, _ = processed_logits(logits, params, prompt_tokens, output_tokens)\n"
          "        probs = torch.where(probs > 0, torch.exp(x - x.amax(dim=1, keepdim=True)), torch.zeros_like(probs))\n"
          + DRAW),
    # ---- rules pinned by one hand-made case each (test_sampling.PINNED), and boundary values
    Patch("repetition_penalty_divides_all",
          "The repetition penalty divides every seen logit by r (CTRL's formula without the sign "
          "case): a negative logit moves TOWARD 0 and becomes more likely instead of less.",
          "    x = torch.where(seen, torch.where(x > 0, x / rp, x * rp), x)\n",
          "    x = torch.where(seen, x / rp, x)\n"),
    Patch("top_p_splits_ties",
          "Top-p keeps sorted POSITIONS whose mass above is < p (transformers' and SGLang's "
          "sorted-cumsum rule), so a tie group at the boundary is split by sort order.",
          "    v = torch.where(kept_sorted, z_sorted, torch.full_like(z_sorted, math.inf)).amin(dim=1, keepdim=True)\n"
          "    return survivors & (z >= v)\n",
          "    kept = torch.zeros_like(kept_sorted).scatter(1, order, kept_sorted)\n"
          "    return survivors & kept\n"),
    Patch("top_p_one_not_disabled",
          "top_p = 1 is not special-cased: tokens whose float32 mass above already rounds to 1.0 "
          "(probabilities below ~6e-8 next to a dominant token) are dropped.",
          "    kept_sorted = (above < top_p[:, None]) | (top_p[:, None] >= 1)\n",
          "    kept_sorted = above < top_p[:, None]\n"),
    Patch("top_k_clamped_below_vocab",
          "top_k is clamped to vocab - 1 instead of disabling at k >= vocab (an index/count "
          "off-by-one): top_k >= vocab drops the least likely token, and vocab 1 fails.",
          "    k = torch.where((top_k > 0) & (top_k < vocab), top_k, torch.full_like(top_k, vocab))\n",
          "    k = torch.where(top_k > 0, top_k.clamp(max=vocab - 1), torch.full_like(top_k, vocab))\n"),
    Patch("min_p_strict",
          "Min-p keeps p_t > min_p * p_max (strict): min_p = 1 drops even the maxima.",
          "    return torch.exp(z) >= min_p[:, None]\n",
          "    return torch.exp(z) > min_p[:, None]\n"),
    Patch("presence_penalty_sees_prompt",
          "The presence penalty is applied to every SEEN token (prompt included) instead of the "
          "output tokens only.",
          "    return x - rows.frequency_penalty[:, None] * counts - rows.presence_penalty[:, None] * (counts > 0).to(x.dtype)\n",
          "    return x - rows.frequency_penalty[:, None] * counts - rows.presence_penalty[:, None] * seen.to(x.dtype)\n"),
    Patch("bias_before_penalties",
          "Logit bias added BEFORE the penalties (vLLM's and transformers' generate() order): "
          "(x + b) / r instead of x / r + b on a repeated token.",
          "    x = apply_penalties(x, rows, prompt, output)\n    x = apply_logit_bias(x, rows)\n",
          "    x = apply_logit_bias(x, rows)\n    x = apply_penalties(x, rows, prompt, output)\n"),
    Patch("logit_bias_clamped_100",
          "Dict logit biases clamped to the OpenAI API's [-100, 100]: a -inf ban becomes -100, "
          "and the banned token comes back at a high temperature.",
          "            dense[r, t] = b\n",
          "            dense[r, t] = min(max(b, -100.0), 100.0)\n"),
    Patch("greedy_as_tiny_temperature",
          "Temperature 0 handled as T = 1e-5 (logits / max(T, eps)) instead of a one-hot argmax: "
          "a tie at the max is split instead of going to the smallest id.",
          "    z = scale_temperature(x, rows.temperature)\n"
          "    keep = top_k_mask(z, rows.top_k)\n"
          "    keep = top_p_mask(z, keep, rows.top_p)\n"
          "    keep = keep & min_p_mask(z, rows.min_p)\n"
          "    probs = masked_softmax(z, keep)\n"
          "    greedy = (rows.temperature == 0)[:, None]\n"
          "    return torch.where(greedy, greedy_probs(x), probs)\n",
          "    z = (x - x.amax(dim=1, keepdim=True)) / rows.temperature.clamp_min(1e-5)[:, None]\n"
          "    keep = top_k_mask(z, rows.top_k)\n"
          "    keep = top_p_mask(z, keep, rows.top_p)\n"
          "    keep = keep & min_p_mask(z, rows.min_p)\n"
          "    return masked_softmax(z, keep)\n"),
    Patch("tiny_temperature_is_greedy",
          "Temperatures below 1e-5 are treated as greedy (vLLM's _SAMPLING_EPS) instead of only "
          "T == 0: a tie at the max goes to one token.",
          "    greedy = (rows.temperature == 0)[:, None]\n",
          "    greedy = (rows.temperature < 1e-5)[:, None]\n"),
    Patch("temperature_divides_raw_logits",
          "z = x / T - max(x / T) (transformers' TemperatureLogitsWarper, then softmax) instead of "
          "(x - max x) / T: for T just above 0, x / T overflows float32 and the row becomes NaN.",
          "    return (x - x.amax(dim=1, keepdim=True)) / t[:, None]\n",
          "    y = x / t[:, None]\n    return y - y.amax(dim=1, keepdim=True)\n"),
    Patch("temperature_clamped_to_2",
          "Temperature clamped to the OpenAI API's maximum of 2: a larger legal temperature is "
          "silently lowered.",
          "    t = torch.where(temperature > 0, temperature, torch.ones_like(temperature))\n",
          "    t = torch.where(temperature > 0, temperature.clamp(max=2.0), torch.ones_like(temperature))\n"),
    # ---- omitted arguments and the empty batch
    Patch("default_top_k_50",
          "SamplingParams' default top_k is 50 (transformers' GenerationConfig default) instead of "
          "0 (disabled): only a call that omits params (params=None) sees it, on vocab > 50.",
          "    top_k: Rowwise = 0\n",
          "    top_k: Rowwise = 50\n"),
    Patch("empty_batch_float_tokens",
          "sample's early return for batch 0 forgets the dtype: float32 tokens instead of int64.",
          "        return torch.zeros(0, dtype=torch.int64, device=logits.device)\n",
          "        return torch.zeros(0, device=logits.device)\n"),
    # ---- the seeded draw (only the pin sample(generator=g) == sample(uniforms=<contract draw>))
    Patch("sample_float32_uniforms",
          "The generator's uniforms are drawn in float32 and widened (torch.rand's default dtype): "
          "statistically right, but not the contract's float64 draw.",
          "    return torch.rand(batch, generator=generator, dtype=torch.float64, device=device)\n",
          "    return torch.rand(batch, generator=generator, device=device).double()\n"),
    Patch("generator_reseeded_each_call",
          "The generator path draws from a FRESH generator seeded with the caller's seed "
          "(generator.initial_seed()) on every call instead of from the generator's current "
          "state: each call is a right draw, but a decode loop repeats the same tokens at every "
          "step and the caller's generator never advances.",
          "    return torch.rand(batch, generator=generator, dtype=torch.float64, device=device)\n",
          "    fresh = torch.Generator(device=device).manual_seed(generator.initial_seed())\n"
          "    return torch.rand(batch, generator=fresh, dtype=torch.float64, device=device)\n"),
    Patch("sample_multinomial",
          "The generator path draws with torch.multinomial(probs, 1, generator=g): statistically "
          "right, but not the contract's inverse CDF of one float64 uniform per row.",
          DRAW + "    return inverse_cdf(probs, u)\n",
          "    if uniforms is None:\n"
          "        return torch.multinomial(probs, 1, generator=generator).flatten()\n"
          "    return inverse_cdf(probs, uniforms)\n"),
    # ---- validation (the bad-input tables)
    Patch("top_p_zero_accepted",
          "top_p's range check is [0, 1] instead of (0, 1]: top_p = 0 is accepted (and keeps "
          "nothing: the row comes out NaN) instead of being rejected.",
          '    _check_range(fields["top_p"], "top_p", lambda v: 0 < v <= 1, "in (0, 1] (1 disables)")\n',
          '    _check_range(fields["top_p"], "top_p", lambda v: 0 <= v <= 1, "in (0, 1] (1 disables)")\n'),
    Patch("draws_before_validation",
          "sample draws its uniforms BEFORE validating params, logit_bias and tokens: valid calls "
          "are unchanged, but a rejected call has already advanced the caller's generator.",
          "    probs = sampling_probs(logits, params, prompt_tokens=prompt_tokens, output_tokens=output_tokens)\n"
          "    if batch == 0:\n"
          "        return torch.zeros(0, dtype=torch.int64, device=logits.device)\n"
          + DRAW,
          DRAW +
          "    probs = sampling_probs(logits, params, prompt_tokens=prompt_tokens, output_tokens=output_tokens)\n"
          "    if batch == 0:\n"
          "        return torch.zeros(0, dtype=torch.int64, device=logits.device)\n"),
    Patch("empty_vocab_unchecked",
          "logits with vocab 0 are not rejected up front: the call fails later inside torch "
          "(a RuntimeError about an empty reduction) instead of a ValueError naming logits.",
          "    if logits.shape[1] == 0:\n"
          '        raise ValueError("logits: vocab (dim 1) must be >= 1")\n',
          ""),
    Patch("uniforms_one_accepted",
          "uniforms are checked against [0, 1] instead of [0, 1): u = 1 is accepted (an "
          "off-by-one at the boundary of the draw).",
          "    if batch and not bool(((uniforms >= 0) & (uniforms < 1)).all()):\n",
          "    if batch and not bool(((uniforms >= 0) & (uniforms <= 1)).all()):\n"),
    Patch("generator_optional_global_rng",
          "sample without a generator (and without uniforms) silently draws from torch's global "
          "RNG instead of raising: results then depend on hidden global state.",
          '        raise ValueError("generator: sample needs an explicit torch.Generator (or explicit uniforms)")\n',
          "        return\n"),
    Patch("dense_bias_first_row_only",
          "A dense logit_bias of shape (vocab,) is applied to the first row only (the other rows "
          "get zeros) instead of to every row.",
          "        return bias.to(device=device, dtype=dtype).expand(batch, vocab)\n",
          "        b = bias.to(device=device, dtype=dtype)\n"
          "        if b.dim() == 2:\n"
          "            return b\n"
          "        return torch.cat([b[None], torch.zeros(batch - 1, vocab, dtype=dtype, device=device)])\n"),
    # ---- the plan/run path (SamplerPlan)
    Patch("failed_plan_forgets_previous",
          "plan drops the previous plan before validating the new one: a plan that raises leaves an "
          "object that can no longer run.",
          "        dtype, rows, prompt, output = check_sampling_inputs(logits, params, prompt_tokens, output_tokens)\n"
          "        check_bias_bans_no_row(rows.logit_bias)\n",
          "        self._plan = None\n"
          "        dtype, rows, prompt, output = check_sampling_inputs(logits, params, prompt_tokens, output_tokens)\n"
          "        check_bias_bans_no_row(rows.logit_bias)\n"),
    Patch("run_reads_planned_logits",
          "The plan keeps a copy of the logits it was given and run samples that copy instead of the "
          "values at run time: right until the engine writes the next step's logits into the buffer.",
          "                          seen=seen, counts=counts)\n\n"
          "    def run(self, logits, *, uniforms: torch.Tensor | None = None,\n"
          "            generator: torch.Generator | None = None) -> torch.Tensor:\n",
          "                          seen=seen, counts=counts, x=logits.detach().clone())\n\n"
          "    def run(self, logits, *, uniforms: torch.Tensor | None = None,\n"
          "            generator: torch.Generator | None = None) -> torch.Tensor:\n"
          "        logits = self._plan[\"x\"] if self._plan is not None else logits\n"),
    Patch("run_checks_the_batch_only",
          "run compares only the logits' batch with the plan's, trusting the caller for the vocab: "
          "logits of another vocabulary run against the planned penalties and bias.",
          "    check_as_planned(\"logits\", logits, planned, \"batch, vocab\")\n",
          "    if isinstance(logits, torch.Tensor) and logits.dim() == 2:   # the vocab taken from the logits\n"
          "        planned = ((planned[0][0], logits.shape[1]), *planned[1:])\n"
          "    check_as_planned(\"logits\", logits, planned, \"batch, vocab\")\n"),
    Patch("replan_keeps_stale_penalties",
          "A re-plan of the same shape without penalties keeps the previous plan's penalty tensors "
          "(an engine reusing its count buffers): the next batch is penalised for the old batch's tokens.",
          "        penalty = penalty_tensors(rows, prompt, output, batch, vocab, dtype, device)\n",
          "        penalty = penalty_tensors(rows, prompt, output, batch, vocab, dtype, device)\n"
          "        if penalty is None and self._plan is not None and self._plan[\"meta\"][0] == tuple(logits.shape):\n"
          "            penalty = self._plan[\"penalty\"]\n", file="optimized/sampling/plan.py"),
    Patch("all_greedy_from_first_row",
          "The plan decides 'every row is greedy' (run = argmax) from the first row's temperature: a "
          "batch whose first row is greedy and another samples returns argmax tokens for every row.",
          "        if batch > 0 and all(t == 0 for t in rows.host[\"temperature\"]):\n",
          "        if batch > 0 and rows.host[\"temperature\"][0] == 0:\n", file="optimized/sampling/plan.py"),
]
