"""Surviving mechanical variants of reference/speculative.py and optimized/speculative.py that are
not gaps of the spec (read by ``conformance.mechanical.triage`` as data). Key: (module, the source
line, the change).

Gaps the first sampled runs found, closed since (no entry here): an error message that names the
argument without starting with it ("target_probs" with no positions blamed on draft_tokens:
_starts_with_the_name in test_rejects_bad_input / test_rejects_bad_randomness); a negative entry
compensated so the total is still 1, or a float64 one too small for float32 (-1e-300) (rows of
BAD); the draft_lens message naming a valid row before the bad one (rows "draft_lens > γ ...":
"row 1"); the generator's device unchecked (the "generator on another device" row of
test_rejects_arguments_on_another_device, every tensor on "meta"); the inverse CDF of a residual
whose total is one subnormal (the pinned case "a residual of one subnormal ..."). Rerun s1 (the
optimized file run with the GPU visible): the CDF summed in token order, one float64 addition after
another (the pinned case "the CDF is summed in token order ...": 0.5 then 1022 entries of 2^-55; the
reference and the optimized verify emit token 1023, the optimized's torch ops on CUDA, whose cumsum
is a parallel scan, token 770 on an H100); it kills ``draw_path != "torch"`` in _use_triton, which
sends verify on CUDA to those torch ops -- on a GPU run only: on the CPU both paths are the same ops.

Messages: the contract asks a message to START with the argument's name, with the [row, position]
for values; its wording past that is not the contract (entries below say "wording"), nor which of
several bad positions it names.

optimized/speculative.py: ``verify`` is the contract; ``verify_with``, ``verify_traced``,
``VerifyConfig`` and ``DrawTrace`` are public but no contract name, and the Triton draw with its
redraw of flagged rows runs from ``verify`` only on CUDA (the mechanical run hides the GPU; on the
CPU only ``verify_with(config=VerifyConfig(draw="triton"))`` under TRITON_INTERPRET=1 reaches it:
spec_tests/bundled/test_speculative_triton.py, never run against a submission; and the optional
``VerifyPlan``, whose runs take the kernels under the interpreter). Entries of that kind say
"outside the contract". (The CPU redraw of flagged rows that some entries named is gone: the exact
kernel ``redraw_flagged`` of optimized/_speculative_triton.py redraws them on the device.)
"""

_CHUNKS = ("_sums_mins chunks the batch rows only; each position's total and minimum are reductions over "
           "its own vocab entries: the minimum is exact in any chunking, and the total can differ only in the "
           "order of its float32 (float64) additions (a chunk with one position is summed by a reduction split "
           "across threads, a longer one row by row), which the contract leaves open: 'the sum is taken in "
           "float32 or wider', so a total within rounding of 1 +- tol may be judged either way")

TRIAGE = {
    ("reference",
     "return int(inverse_cdf(weights[None], torch.tensor([v], dtype=torch.float64, device=weights.device))[0])",
     "0 -> -1"): (
        "equivalent", "inverse_cdf of a batch of one returns a 1-element tensor: index 0 is index -1"),
    ("reference", 'raise ValueError(f"{name}[{r}, {i}] is not a probability vector: it holds NaN or inf")',
     'drop `raise ValueError(f"{name}[{r}, {i}] is not a probability vec`'): (
        "equivalent", "the two raises that follow still raise ValueError starting with name[r, i] for the same "
                      "position (NaN fails m < 0 and reaches 'sums to nan'; -inf is 'a negative entry'; +inf "
                      "'sums to inf'): wording"),
    ("reference", "if m < 0:", "< -> <="): (
        "equivalent", "only a position whose sum is off and whose minimum is exactly 0 changes: it is still a "
                      "ValueError starting with name[r, i], saying 'negative entry (0)' for 'sums to ...': wording"),
    ("reference", "ok = finite & (mins >= 0) & ((sums - 1).abs() <= tol)", "<= -> <"): (
        "equivalent", "|sums - 1| = tol is unreachable: near 1 (within 1e-2) the float64 sums lie in [0.5, 2], "
                      "so sums - 1 is exact and a multiple of 2**-53, while no tolerance (1e-6, 1e-4, 1e-2 as "
                      "float64) is one (2**53 * tol is not an integer)"),
    ("reference", "r, i = (int(v) for v in bad.nonzero()[0])", "0 -> -1"): (
        "equivalent", "names the last bad active position instead of the first: with one bad position the same "
                      "message; with several, the contract asks for the name and a bad [row, position], not which"),
    ("reference", "r, i = (int(v) for v in bad.nonzero()[0])", "0 -> -1 (#2)"): (
        "equivalent", "names the last bad active draft token instead of the first: with one the same message; "
                      "with several, the contract asks for the name and a bad [row, position], not which"),
    ("reference", "r = int(((lens < 0) | (lens > gamma)).nonzero()[0])", "0 -> -1"): (
        "equivalent", "names the last bad row of draft_lens instead of the first: with one the same message; with "
                      "several, the contract does not say which"),
    ("reference", "k, token = _verify_row(p[r, :n + 1], None if q is None else q[r, :n], x, u[r][:n], u[r][a.gamma],",
     "1 -> 2"): (
        "equivalent", "_verify_row reads p[0 .. n] and p.shape[1] only: one more target position (clipped at "
                      "γ + 1) is passed and never read"),
    ("optimized", 'return os.environ.get("TRITON_INTERPRET") == "1"', "== -> !="): (
        "outside the contract", "_interpreter_on is asked only when draw == 'triton' off CUDA, which verify (draw "
                                "'auto') never passes: only verify_with/verify_traced, no contract name"),
    ("optimized", "if config is None:", "is -> is not"): (
        "outside the contract", "_checked serves verify_with and verify_traced only; verify passes DEFAULT itself"),
    ("optimized", "if g > 0:", "> -> >="): (
        "equivalent", "with g = 0 the branch computes the same k: gathers and argmax over an empty position "
                      "dimension, and cumprod/sum over it give int64 zeros, what the else branch makes "
                      "(checked with greedy rows too)"),
    ("optimized", "validation_chunk_bytes: int = 2 << 20  # CPU validation: rows per chunk so that a chunk stays in",
     "2 -> 3"): ("equivalent", _CHUNKS),
    ("optimized", 'step = max(1, chunk_bytes // per_row) if probs.device.type == "cpu" else probs.shape[0]', "== -> !="): ("equivalent", _CHUNKS),
    ("optimized", 'step = max(1, chunk_bytes // per_row) if probs.device.type == "cpu" else probs.shape[0]', "1 -> 0"): (
        "equivalent", "max(0, c) differs from max(1, c) only for c = 0, and the split takes max(1, step); " + _CHUNKS),
    ("optimized", 'step = max(1, chunk_bytes // per_row) if probs.device.type == "cpu" else probs.shape[0]', "0 -> -1"): (
        "equivalent", "off the CPU only (then vocab rows per chunk instead of all); " + _CHUNKS),
    ("optimized", "for chunk in probs.split(max(1, step)) if probs.shape[0] else [probs]:",
     "max(a, b, ...) -> max(b, a, ...)"): ("equivalent", "max is symmetric"),
    ("optimized", "mins.append(chunk.amin(dim=2) if chunk.shape[2] else chunk.sum(dim=2))", "2 -> 3 (#3)"): (
        "equivalent", "the sum branch runs only for vocab 0, which check_inputs rejects first (vocab >= 1)"),
    ("optimized", "ri = rejected.nonzero().squeeze(1)", "1 -> 0"): (
        "equivalent", "nonzero() is (m, 1) with m >= 1 (rejected.any()): squeeze(0) gives (1,) for m = 1 and "
                      "leaves (m, 1) otherwise, and advanced indexing with (m, 1) index tensors reads and writes "
                      "the same m elements of weights"),
    ("optimized", "weights[at] = (weights[at] - 1).clamp(min=0)", "1 -> 2"): (
        "equivalent", "a sampled row is rejected at x only if u >= p(x), so p(x) < 1 and both p(x) - 1 and p(x) - 2 "
                      "clamp to 0; a greedy row's token is the argmax taken before this line"),
    ("optimized", 'trace = DrawTrace("torch", None, 0)', "DrawTrace(a, b, ...) -> DrawTrace(b, a, ...)"): (
        "outside the contract", "the trace is returned by verify_traced only; verify returns the Verified alone"),
    ("optimized", "if not (isinstance(self.block_v, int) and self.block_v >= 1 and self.block_v & (self.block_v - 1) == 0):",
     ">= -> >"): (
        "outside the contract", "VerifyConfig is no contract name; verify uses DEFAULT (block_v 1024), never block_v 1"),
    # -- rerun s1 (the optimized file's survivors of a run with the GPU visible) -----------------
    ("optimized", "_triton_draw_failure.append(exc)", "drop `_triton_draw_failure.append(exc)`"): (
        "equivalent", "reached from verify only when the Triton draw fails to build or launch on CUDA (the "
                      "environment, not an input); the record only spares later calls the failing kernel: without "
                      "it every 'auto' call tries it again, warns and returns None, and the same torch ops draw the "
                      "tokens as after a recorded failure. Only the number of warnings differs, which no contract "
                      "name returns"),
    ("optimized", 'if draw_path == "torch" or (draw_path == "auto" and _triton_draw_failure):', "== -> !="): (
        "equivalent", "it swaps which of two token-exact paths draws (on CUDA the default 'auto' then takes the "
                      "torch path, whose CDF is the CPU's sequential float64 cumsum since 5f659d9, as the reference's "
                      "order; on CPU both names reach the same torch ops): the tokens and counts are the reference's "
                      "either way, only the speed and the DrawTrace of verify_traced (no contract name) differ. Before "
                      "5f659d9 the CUDA torch path was not exact and the pinned case 'the CDF is summed in token "
                      "order' killed this variant on an H100"),
    ("optimized", "if g > 0:", "0 -> -1"): (
        "equivalent", "g > -1 is g >= 0 for the int γ, the `> -> >=` variant above: with g = 0 the branch computes "
                      "the same k (empty gathers and argmax, cumprod/sum over no position: int64 zeros)"),
    ("optimized", "if not (isinstance(self.block_v, int) and self.block_v >= 1 and self.block_v & (self.block_v - 1) == 0):",
     "and -> or"): (
        "outside the contract", "VerifyConfig is no contract name: verify uses DEFAULT (block_v 1024, valid either "
                                "way); only VerifyConfig(block_v=...) itself reaches another value (bundled "
                                "test_speculative_internals.py::test_config_rejects_what_it_cannot_run tries 24 and 0)"),
    ("optimized", "if not (isinstance(self.validation_chunk_bytes, int) and self.validation_chunk_bytes >= 1):",
     "and -> or"): (
        "outside the contract", "VerifyConfig is no contract name: verify uses DEFAULT (2 MiB, valid either way); "
                                "only VerifyConfig(validation_chunk_bytes=...) itself reaches another value (bundled "
                                "test_speculative_internals.py::test_config_rejects_what_it_cannot_run tries 0)"),
    ("optimized", 'step = max(1, chunk_bytes // per_row) if probs.device.type == "cpu" else probs.shape[0]', "1 -> 2"): (
        "equivalent", "two batch rows per chunk instead of one, only where one row is over half the chunk "
                      "(> 1 MiB); " + _CHUNKS),
    ("optimized", "for chunk in probs.split(max(1, step)) if probs.shape[0] else [probs]:", "0 -> 1"): (
        "equivalent", "the test differs only for a batch of 0 rows, where probs.split gives one empty chunk, "
                      "[probs] itself, or for 0 positions (draft_probs at γ = 0), where the chunks (k, 0, vocab) "
                      "have no totals or minima: the same empty (batch, 0) results"),
    ("optimized", "for chunk in probs.split(max(1, step)) if probs.shape[0] else [probs]:", "max -> min"): (
        "equivalent", "step >= 1, so min(1, step) = 1: one batch row per chunk, on every device; " + _CHUNKS),
    ("optimized", "torch.zeros(0, dtype=torch.int64, device=device)), DrawTrace(None, None, 0))",
     "DrawTrace(a, b, ...) -> DrawTrace(b, a, ...)"): (
        "equivalent", "both swapped arguments are None: the same call"),
}
