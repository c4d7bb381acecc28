"""Planted bugs of `sampling` (each must make a sampling test fail): one realistic slip each in
reference/sampling.py. The last two touch only ``sample``'s generator path (``sampling_probs`` and
the explicit-uniforms path stay right), so only the tests that draw with a generator can see them."""
from conformance.mutants import Patch

REF = "reference/sampling.py"
DRAW = "    u = uniforms if uniforms is not None else draw_uniforms(generator, batch, logits.device)\n"

MUTANTS = [
    Patch("top_p_drops_crossing_token",
          "Top-p keeps a token only while the cumulative mass INCLUDING it is <= p (masking "
          "cumsum > p instead of cumsum - q >= p), so the token that crosses p is dropped; the most "
          "likely token is always kept so a row is never empty.",
          REF,
          "    kept_sorted = (above < top_p[:, None]) | (top_p[:, None] >= 1)\n",
          "    kept_sorted = (cum <= top_p[:, None]) | (top_p[:, None] >= 1)\n"
          "    kept_sorted[:, 0] = True\n"),
    Patch("top_k_breaks_ties",
          "Top-k keeps exactly k tokens: ties at the k-th value are broken by position (the first "
          "k of a stable sort) instead of keeping every token tied with the k-th.",
          REF,
          "    sorted_z = torch.sort(z, dim=1, descending=True).values\n"
          "    kth = sorted_z.gather(1, (k - 1)[:, None])\n"
          "    return z >= kth\n",
          "    order = torch.sort(z, dim=1, descending=True, stable=True).indices\n"
          "    return torch.argsort(order, dim=1) < k[:, None]\n"),
    Patch("penalties_after_temperature",
          "Presence/frequency penalties applied to the temperature-scaled logits: x/T - f*c "
          "instead of (x - f*c)/T (the penalties run on x/T, then the result is scaled back).",
          REF,
          "    x = apply_penalties(x, rows, prompt, output)\n",
          "    t = torch.where(rows.temperature > 0, rows.temperature, torch.ones_like(rows.temperature))[:, None]\n"
          "    x = apply_penalties(x / t, rows, prompt, output) * t\n"),
    Patch("top_p_full_vocab",
          "Top-p mass measured on the full-vocabulary distribution instead of the top-k survivors "
          "renormalised.",
          REF,
          "    q = torch.softmax(zs, dim=1)\n",
          "    q = torch.softmax(z, dim=1)\n"),
    Patch("min_p_untempered",
          "Min-p threshold taken relative to the max of the distribution BEFORE temperature "
          "(exp(x - max x) >= min_p) instead of the temperature-scaled one.",
          REF,
          "    keep = keep & min_p_mask(z, rows.min_p)\n",
          "    keep = keep & min_p_mask(x - x.amax(dim=1, keepdim=True), rows.min_p)\n"),
    Patch("samples_unfiltered",
          "The generator path draws from the UNFILTERED tempered softmax (top-k/top-p/min-p "
          "ignored); sampling_probs and explicit uniforms are right.",
          REF,
          DRAW,
          "    if uniforms is None:\n"
          "        x, rows = processed_logits(logits, params, prompt_tokens, output_tokens)\n"
          "        probs = torch.where((rows.temperature == 0)[:, None], probs,\n"
          "                            torch.softmax(scale_temperature(x, rows.temperature), dim=1))\n"
          + DRAW),
    Patch("sample_ignores_temperature",
          "The generator path draws from the right support (the kept set) but with weights "
          "exp(x - max x), forgetting the temperature; sampling_probs and explicit uniforms are "
          "right. Same support, wrong weights: only a statistical test of generator draws sees it.",
          REF,
          DRAW,
          "    if uniforms is None:\n"
          "        x, _ = processed_logits(logits, params, prompt_tokens, output_tokens)\n"
          "        probs = torch.where(probs > 0, torch.exp(x - x.amax(dim=1, keepdim=True)), torch.zeros_like(probs))\n"
          + DRAW),
]
