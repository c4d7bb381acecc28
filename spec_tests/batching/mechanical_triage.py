"""Surviving mechanical variants of reference/batching.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line stripped, the change).

From a uniform sample of 40 of the module's 526 variants (`python -m conformance power --mechanical
both --concept batching --profile mutants --sample 40`): 29 killed, 11 survivors, all triaged below.
Nine are in the vocabulary classes ``Request`` and ``LengthDistribution``: the tests build them
from the judge's own reference/batching.py, so a submission's copy of their checks is never what a
test constructs (a variant there changes no contract name's behaviour on the values the judge sends).
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
    ("reference", "return attn.o_proj(out.transpose(1, 2).reshape(1, total, attn.n_heads * attn.head_dim))",
     "1 -> 0 (#2)"): (
        "equivalent", "out is (1, heads, total, head_dim): transpose(0, 2) gives (total, heads, 1, head_dim), whose "
                      "elements reshape to (1, total, heads * head_dim) in the same order as transpose(1, 2)'s"),
    ("reference", "return sum((-1) ** (j + 1) * math.comb(b, j) / (1 - q ** j) for j in range(1, b + 1))",
     "1 -> 2 (#3)"): (
        "equivalent", "range(1, b + 2) adds the term j = b + 1, whose binomial coefficient math.comb(b, b + 1) is 0 "
                      "(exactly, in Fractions)"),
}
