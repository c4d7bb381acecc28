"""Surviving mechanical variants of reference/batching.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line stripped, the change).

From a uniform sample of 40 of the module's 526 variants (`python -m conformance power --mechanical
both --concept batching --profile mutants --sample 40`): 29 killed, 11 survivors, all triaged below.
Nine are in the vocabulary classes ``Request`` and ``LengthDistribution``: the tests build them
from the judge's own reference/batching.py, so a submission's copy of their checks is never what a
test constructs (a variant there changes no contract name's behaviour on the values the judge sends).

Second sample (the module-4 sweep: 113 variants, 13 survivors), triaged: ten more in ``Request`` and
``LengthDistribution`` and two swapped ``transpose`` dims (below); one gap closed (no entry):
``_check_batch`` read ``t.min()`` for both ends (``min -> max``), so a negative id beside a good one
passed -- bad-input rows ``token id -1 after a good one`` and ``token id = vocab before a good one``.
"""

_VOCAB = ("the vocabulary class {cls} is constructed by the tests from the judge's reference/batching.py; a "
          "submission's (here: the variant's) copy of its __post_init__ checks is never run on what the judge "
          "sends, so no contract name's behaviour changes")
_REQUEST, _DIST = _VOCAB.format(cls="Request"), _VOCAB.format(cls="LengthDistribution")

TRIAGE = {
    ("reference", 'check_int("seed", self.seed)', "check_int(a, b, ...) -> check_int(b, a, ...)"): (
        "outside the contract", _REQUEST),
    ("reference", 'object.__setattr__(self, "prompt", tuple(int(t) for t in self.prompt.tolist()))',
     "__setattr__(a, b, ...) -> __setattr__(b, a, ...)"): ("outside the contract", _REQUEST),
    ("reference", "if self.prompt.dim() != 1 or self.prompt.dtype.is_floating_point or self.prompt.dtype.is_complex \\",
     "1 -> 0"): ("outside the contract", _REQUEST),
    ("reference", 'if self.kind == "geometric":', "== -> !="): ("outside the contract", _DIST),
    ("reference", "if not 0 < p <= 1:", "not x -> x"): ("outside the contract", _DIST),
    ("reference", "if not 0 < p <= 1:", "< -> <="): ("outside the contract", _DIST),
    ("reference", "if not 0 < p <= 1:", "0 -> -1"): ("outside the contract", _DIST),
    ("reference", "if not 0 < p <= 1:", "1 -> 0"): ("outside the contract", _DIST),
    ("reference", "if isinstance(self.param, float) and not math.isfinite(self.param):", "not x -> x"): (
        "outside the contract", _DIST),
    # second sample (the module-4 sweep, 113 variants), triaged b1
    ("reference", "arrival: int = 0", "0 -> 1"): ("outside the contract", _REQUEST),
    ("reference", 'if isinstance(self.prompt, (str, bytes)) or not hasattr(self.prompt, "__iter__"):', "or -> and"): (
        "outside the contract", _REQUEST),
    ("reference", 'check_int("max_new_tokens", self.max_new_tokens, minimum=1)', "1 -> 0"): (
        "outside the contract", _REQUEST),
    ("reference", 'check_int("param", self.param, minimum=1)', 'drop `check_int("param", self.param, minimum=1)`'): (
        "outside the contract", _DIST),
    ("reference", 'check_int("param", self.param, minimum=1)', "1 -> 2"): ("outside the contract", _DIST),
    ("reference", 'raise ValueError(f"param must be finite, got {self.param}")',
     'drop `raise ValueError(f"param must be finite, got {self.param}")`'): ("outside the contract", _DIST),
    ("reference", "if isinstance(self.param, bool) or not isinstance(self.param, (int, float, Fraction)):", "or -> and"): (
        "outside the contract", _DIST),
    ("reference", "if isinstance(self.param, bool) or not isinstance(self.param, (int, float, Fraction)):", "not x -> x"): (
        "outside the contract", _DIST),
    ("reference", "if isinstance(self.param, float) and not math.isfinite(self.param):", "and -> or"): (
        "outside the contract", _DIST),
    ("reference", "if isinstance(self.param, float) and not math.isfinite(self.param):",
     "isinstance(a, b, ...) -> isinstance(b, a, ...)"): ("outside the contract", _DIST),
    ("reference", "k = attn.k_proj(x).view(1, total, attn.n_kv_heads, attn.head_dim).transpose(1, 2)",
     "transpose(a, b, ...) -> transpose(b, a, ...)"): (
        "equivalent", "Tensor.transpose(d0, d1) swaps the two dims, a symmetric operation: transpose(2, 1) is the "
                      "same view as transpose(1, 2) for every tensor"),
    ("reference", "h = h + attn.o_proj(out.transpose(1, 2).reshape(batch, n, attn.n_heads * attn.head_dim))",
     "transpose(a, b, ...) -> transpose(b, a, ...)"): (
        "equivalent", "Tensor.transpose(d0, d1) swaps the two dims, a symmetric operation: transpose(2, 1) is the "
                      "same view as transpose(1, 2) for every tensor"),
    ("reference", "return attn.o_proj(out.transpose(1, 2).reshape(1, total, attn.n_heads * attn.head_dim))",
     "1 -> 0 (#2)"): (
        "equivalent", "out is (1, heads, total, head_dim): transpose(0, 2) gives (total, heads, 1, head_dim), whose "
                      "elements reshape to (1, total, heads * head_dim) in the same order as transpose(1, 2)'s"),
    ("reference", "return sum((-1) ** (j + 1) * math.comb(b, j) / (1 - q ** j) for j in range(1, b + 1))",
     "1 -> 2 (#3)"): (
        "equivalent", "range(1, b + 2) adds the term j = b + 1, whose binomial coefficient math.comb(b, b + 1) is 0 "
                      "(exactly, in Fractions)"),
}
