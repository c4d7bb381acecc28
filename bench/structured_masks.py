"""Structured output (07.08-07.09): mask time per step and compile time on a 131,072-token
vocabulary, optimized/structured.py against xgrammar, outlines-core and llguidance, on this CPU,
in one run.

    python -m bench.structured_masks [--repeats 7] [--json out.json]

Vocabulary: Tekken (mistral-common's ``tekken_240911.json``, 131,072 ids, EOS 2). Grammars: a JSON
Schema (an object of 7 properties: integer, strings, an array of strings, a number, a boolean, a
nested object with an optional property) and a regex (an e-mail address with an optional phone
number). The path: the Tekken tokenization of one valid text (every engine takes the same tokens).

Per engine and grammar:
- ``tokenizer_s``: the engine's once-per-vocabulary set-up (xgrammar ``TokenizerInfo`` +
  ``GrammarCompiler``, outlines-core ``Vocabulary``, llguidance ``LLTokenizer``; ours the
  ``TokenTable`` layout);
- ``compile_s``: grammar -> a matcher ready for its first mask (xgrammar ``compile_*`` +
  ``GrammarMatcher``; outlines-core ``Index`` + ``Guide``, which builds every state's token set;
  llguidance ``LLMatcher``; ours ``compile_*`` + ``TokenMatcher`` + ``Grammar.precompute`` (every
  state's mask));
- ``mask_us``: the median over the path's steps of the best of ``repeats`` calls of the engine's
  mask call at that step, each filling a packed bitmask of 4,096 int32 words (xgrammar
  ``fill_next_token_bitmask`` into a preallocated bitmask, outlines-core ``write_mask_into``,
  llguidance ``compute_bitmask`` (returns new bytes), ours ``fill_next_token_bitmask``, an
  optimized-only method); ``allowed_mask_us``: ours as the contract returns it, a fresh bool
  tensor of 131,072 entries; ``mask_us_first_pass``: ours without ``precompute``,
  the mean over the path of the first call at each step (a state's mask is computed on its first
  visit).
Threads: torch is set to 1 intra-op thread (``torch.set_num_threads(1)``), xgrammar's compiler to
``max_threads=1``; the machine is shared, so take the ratios within one run.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import torch

SCHEMA = {"type": "object", "properties": {
    "id": {"type": "integer"}, "name": {"type": "string"}, "email": {"type": "string"},
    "tags": {"type": "array", "items": {"type": "string"}}, "score": {"type": "number"},
    "active": {"type": "boolean"},
    "address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"},
                                                 "zip": {"type": "string"}}, "required": ["street", "city"]}},
    "required": ["id", "name", "email"]}
SCHEMA_TEXT = json.dumps({"id": 4211, "name": "Ada Lovelace", "email": "ada@example.org",
                          "tags": ["math", "engines", "notes"], "score": 97.5, "active": True,
                          "address": {"street": "12 St James's Square", "city": "London"}}, separators=(",", ":"))
REGEX = r"[a-z0-9._]+@[a-z0-9-]+\.[a-z]{2,6}( \+[0-9]{1,3} [0-9]{3}-[0-9]{4})?"
REGEX_TEXT = "ada.lovelace_1815@analytical-engine.org +44 207-9460"


def _best_us(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best * 1e6


def _ours(vocab, eos, grammar, path, repeats):
    import optimized.structured as opt
    t = time.perf_counter()
    opt.TokenTable.of(vocab, eos)
    tok_s = time.perf_counter() - t
    t = time.perf_counter()
    g = opt.compile_json_schema(grammar) if isinstance(grammar, dict) else opt.compile_regex(grammar)
    m = opt.TokenMatcher(g, vocab, eos)
    g.precompute(vocab, eos)
    compile_s = time.perf_counter() - t
    import numpy as np
    words = np.zeros((len(vocab) + 31) // 32, dtype=np.int32)
    steps, bools = [], []
    for tok in path:
        steps.append(_best_us(lambda: m.fill_next_token_bitmask(words), repeats))
        bools.append(_best_us(m.allowed_mask, repeats))
        if tok != eos:
            m.advance(tok)
    # first pass: a fresh grammar, no precompute
    g = opt.compile_json_schema(grammar) if isinstance(grammar, dict) else opt.compile_regex(grammar)
    m = opt.TokenMatcher(g, vocab, eos)
    first = []
    for tok in path:
        t = time.perf_counter()
        m.allowed_mask()
        first.append((time.perf_counter() - t) * 1e6)
        if tok != eos:
            m.advance(tok)
    return {"tokenizer_s": tok_s, "compile_s": compile_s, "states": g.num_states,
            "mask_us": statistics.median(steps), "allowed_mask_us": statistics.median(bools),
            "mask_us_first_pass": statistics.mean(first)}


def _engine(name, vocab, eos, grammar, path, repeats):
    from spec_tests.structured import engines
    t = time.perf_counter()
    engines.tokenizer(name, vocab, eos)
    tok_s = time.perf_counter() - t
    kw = {"schema": grammar} if isinstance(grammar, dict) else {"regex": grammar}
    t = time.perf_counter()
    m = engines.engine_matcher(name, vocab, eos, **kw)
    compile_s = time.perf_counter() - t
    call = {"xgrammar": lambda: m.matcher.fill_next_token_bitmask(m.bitmask),
            "outlines-core": lambda: m.guide.write_mask_into(m.buffer.data_ptr(), m.buffer.numel(), 4),
            "llguidance": lambda: m.matcher.compute_bitmask()}[name]
    steps = []
    for tok in path:
        steps.append(_best_us(call, repeats))
        if tok != eos:
            m.advance(tok)
    return {"tokenizer_s": tok_s, "compile_s": compile_s, "mask_us": statistics.median(steps)}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer
    import mistral_common
    from spec_tests.structured.engines import missing
    from spec_tests.structured.vocab import tekken
    vocab, eos = tekken()
    tk = Tekkenizer.from_file(f"{mistral_common.__path__[0]}/data/tekken_240911.json")
    result = {"cpu": platform.processor() or platform.machine(), "vocab": len(vocab), "rows": []}
    try:
        result["cpu"] = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if "model name" in line)
    except (OSError, StopIteration):
        pass
    for gname, grammar, text in (("json-schema", SCHEMA, SCHEMA_TEXT), ("regex", REGEX, REGEX_TEXT)):
        path = tk.encode(text, bos=False, eos=False) + [eos]
        for name in ("optimized", "xgrammar", "outlines-core", "llguidance"):
            if name != "optimized" and missing(name):
                continue
            if name == "optimized":
                row = _ours(vocab, eos, grammar, path, args.repeats)
            else:
                row = _engine(name, vocab, eos, grammar, path, args.repeats)
            row.update(grammar=gname, engine=name, steps=len(path))
            result["rows"].append(row)
            print(f"{gname:12s} {name:14s} tokenizer {row['tokenizer_s']:7.3f} s  compile {row['compile_s']:7.3f} s  "
                  f"mask {row['mask_us']:8.1f} us/step" + (f"  (allowed_mask {row['allowed_mask_us']:.1f} us; first pass "
                                                          f"{row['mask_us_first_pass']:.0f} us/step, {row['states']} states)"
                                                          if name == "optimized" else ""),
                  flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
