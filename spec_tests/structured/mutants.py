"""Planted bugs of `structured` (each must make a test fail): the slips of a grammar compiler, a
token matcher and a masked sampler."""
from conformance.declarations import Patch

MUTANTS = [
    Patch("dot_matches_newline", "'.' matches every character, newline included (Python's DOTALL, not the contract).",
          '            return ("set", ALL_ASCII - {ord("\\n")}, True)\n',
          '            return ("set", ALL_ASCII, True)\n'),
    Patch("negated_class_ascii_only", "[^...] built as the ASCII complement only: no non-ASCII character matches it.",
          '        return ("set", ALL_ASCII - ascii_set, True) if negated else ("set", ascii_set, False)\n',
          '        return ("set", ALL_ASCII - ascii_set, False) if negated else ("set", ascii_set, False)\n'),
    Patch("bounded_repeat_one_short", "{m,n} builds n - m - 1 optional copies: the longest repetition is refused.",
          "            for _ in range(n - m):\n", "            for _ in range(n - m - 1):\n"),
    Patch("open_repeat_is_exact", "{m,} read as {m,m}: an open upper bound is dropped.",
          "        n = m if not comma else (int(hi) if hi else None)\n",
          "        n = m if not comma else (int(hi) if hi else m)\n"),
    Patch("utf8_overlong", "The UTF-8 table lets E0 take any continuation byte: overlong 3-byte forms are allowed.",
          "    [(0xE0, 0xE0), (0xA0, 0xBF), (0x80, 0xBF)],\n", "    [(0xE0, 0xE0), (0x80, 0xBF), (0x80, 0xBF)],\n"),
    Patch("eos_always_allowed", "EOS is always allowed: generation may stop in the middle of the grammar.",
          "            return self.is_accepted()\n", "            return True\n"),
    Patch("first_byte_only", "A token is checked on its first byte only (a per-byte mask reused for whole tokens).",
          "        return bool(tok) and self.grammar.walk(self.state, tok) is not None\n",
          "        return bool(tok) and self.grammar.walk(self.state, tok[:1]) is not None\n"),
    Patch("empty_token_allowed", "An empty token (b'') counts as allowed: it matches anywhere and makes no progress.",
          "        return bool(tok) and self.grammar.walk(self.state, tok) is not None\n",
          "        return tok is not None and self.grammar.walk(self.state, tok) is not None\n"),
    Patch("advance_unchecked", "advance() trusts the sampler: a disallowed token is taken and the matcher dies.",
          "        if not self.allows(token_id):\n", "        if token_id == self.eos_token_id and not self.allows(token_id):\n"),
    Patch("integer_leading_zeros", "JSON integers as [0-9]+: leading zeros (007) are produced, which JSON forbids.",
          'JSON_INTEGER = r"-?(?:0|[1-9][0-9]*)"\n', 'JSON_INTEGER = r"-?[0-9]+"\n'),
    Patch("optional_first_keeps_comma", "An object whose leading optional properties are absent still writes the "
          "comma of the next one: {,\"b\":1}.",
          '            rest_first, rest_more = f"(?:{first}|{rest_first})", f"(?:,{item})?{rest_more}"\n',
          '            rest_first, rest_more = f"(?:{first}|{rest_more})", f"(?:,{item})?{rest_more}"\n'),
    Patch("probs_not_renormalised", "The mask applied after softmax: allowed probabilities are p_t, not renormalised "
          "over the allowed set.",
          "    return e / e.sum(dim=1, keepdim=True)\n",
          "    full = torch.exp(logits.to(torch.float64) - x.max(dim=1, keepdim=True).values)\n"
          "    return e / full.sum(dim=1, keepdim=True)\n"),
    Patch("mask_logits_zero", "Disallowed logits set to 0 instead of -inf: they keep probability.",
          '    return logits.masked_fill(~mask, float("-inf"))\n', "    return logits.masked_fill(~mask, 0.0)\n"),
    Patch("generate_ignores_mask", "generate_constrained samples from the raw logits and only then asks the matcher.",
          "        token = int(constrained_sample(logits[None], mask[None], generator, uniforms=step_u)[0])\n",
          "        token = int(constrained_sample(logits[None], torch.ones_like(mask)[None], generator, uniforms=step_u)[0])\n"),
]
