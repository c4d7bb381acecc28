"""Planted bugs of `lora` (each must make a lora test fail): the slips of multi-adapter batching,
patched into reference/lora.py."""
from conformance.declarations import Patch

MUTANTS = [
    Patch("scaling_alpha_only", "The LoRA term scaled by alpha instead of alpha / r (the rank forgotten).",
          "    scaling = alpha / lora_a.shape[1]\n", "    scaling = alpha\n"),
    Patch("scaling_ignores_alpha", "The LoRA term scaled by 1 / r: alpha never applied.",
          "    scaling = alpha / lora_a.shape[1]\n", "    scaling = 1.0 / lora_a.shape[1]\n"),
    Patch("none_rows_get_last_adapter", "Rows of id -1 index the stacks with -1 (Python's last element): "
          "they get the LAST adapter instead of the base alone.",
          "        if adapter == NO_ADAPTER:\n            continue\n", ""),
    Patch("first_rows_adapter_for_all", "The whole batch runs the first row's adapter (single-adapter "
          "batching applied to a mixed batch).",
          "        rows = (adapter_ids == adapter).nonzero()[:, 0]\n",
          "        rows = (adapter_ids >= 0).nonzero()[:, 0]\n        adapter = int(adapter_ids[rows[0]])\n"),
    Patch("adapter_replaces_base", "An adapter's rows get the LoRA term instead of the base plus it "
          "(y = delta, the base product overwritten).",
          "        y[rows] += scaling * (shrink @ lora_b[adapter].to(cdt).T)\n",
          "        y[rows] = scaling * (shrink @ lora_b[adapter].to(cdt).T)\n"),
    Patch("merge_scaling_alpha_only", "merge_lora adds alpha B A, not (alpha / r) B A.",
          "    merged = base_weight.to(cdt) + (alpha / rank) * (lora_b.to(cdt) @ lora_a.to(cdt))\n",
          "    merged = base_weight.to(cdt) + alpha * (lora_b.to(cdt) @ lora_a.to(cdt))\n"),
    Patch("merge_forgets_base", "merge_lora returns the update (alpha / r) B A alone.",
          "    merged = base_weight.to(cdt) + (alpha / rank) * (lora_b.to(cdt) @ lora_a.to(cdt))\n",
          "    merged = (alpha / rank) * (lora_b.to(cdt) @ lora_a.to(cdt))\n"),
]
