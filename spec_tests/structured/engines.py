"""Third-party grammar engines behind one small interface, through their PUBLIC Python APIs only:
xgrammar (``TokenizerInfo``, ``GrammarCompiler``, ``GrammarMatcher``), outlines-core (``Vocabulary``,
``Index``, ``Guide``, ``json_schema.build_regex_from_schema``) and llguidance (``LLTokenizer``,
``TokenizerWrapper``, ``LLMatcher``). Each is configured for the contract's semantics where it can be:
compact JSON (xgrammar ``any_whitespace=False, separators=(",", ":")``, outlines-core
``whitespace_pattern=""``, llguidance ``x-guidance: {whitespace_flexible: false}``), no additional
properties (``additionalProperties: false`` sent explicitly), the same token bytes, special tokens
never allowed, one EOS.

``engine_matcher(name, vocab, eos, regex=... | schema=...)`` -> an object with ``mask()`` (a bool
tensor (vocab,)), ``advance(token_id)``, ``reset()`` and, for llguidance, ``forced()`` (the bytes the
grammar forces next). ``missing(name)`` is the reason an engine cannot run here (not installed), or None.

The engine as a submission of the contract (the third-party must-pass adapters
``third_party_outlines_core.py`` and ``third_party_llguidance.py``): :func:`regex_grammar` /
:func:`schema_grammar` (the contract's validation, then the source the engine compiles per
vocabulary) and :class:`ContractMatcher` (the contract's ``TokenMatcher`` over ``engine_matcher``).
"""
from __future__ import annotations

import importlib
import json

import numpy as np
import torch

from spec_tests.structured.oracles import strict_schema

MODULES = {"xgrammar": "xgrammar", "outlines-core": "outlines_core", "llguidance": "llguidance"}
_TOKENIZERS: dict = {}


def missing(name: str) -> str | None:
    try:
        importlib.import_module(MODULES[name])
    except ImportError:
        return f"{name} is not installed (pip install {name})"
    return None


def _unpack(words, n: int) -> torch.Tensor:
    bits = np.unpackbits(np.ascontiguousarray(words).view(np.uint8), bitorder="little")[:n]
    return torch.from_numpy(bits.astype(bool))


def tokenizer(name: str, vocab, eos: int):
    """Engine ``name``'s tokenizer object for ``vocab`` (built once per vocabulary, a few cached)."""
    vocab = tuple(vocab)        # keyed by content: a submission's vocab arrives as a new copy per call
    key = (name, len(vocab), eos, hash(vocab))
    if key not in _TOKENIZERS or _TOKENIZERS[key][0] != vocab:
        if len(_TOKENIZERS) >= 8:
            _TOKENIZERS.clear()
        _TOKENIZERS[key] = (vocab, _BUILD[name](vocab, eos))
    return _TOKENIZERS[key][1]


# ----------------------------------------------------------------------------- xgrammar
def _xgrammar_tokenizer(vocab, eos):
    import xgrammar as xgr
    info = xgr.TokenizerInfo([t or b"" for t in vocab], xgr.VocabType.RAW, vocab_size=len(vocab), stop_token_ids=[eos])
    return xgr.GrammarCompiler(info, max_threads=1)


class _XGrammar:
    def __init__(self, vocab, eos, regex, schema):
        import xgrammar as xgr
        compiler = tokenizer("xgrammar", vocab, eos)
        if regex is not None:
            compiled = compiler.compile_regex(regex)
        else:
            compiled = compiler.compile_json_schema(json.dumps(strict_schema(schema)), any_whitespace=False,
                                                    separators=(",", ":"), strict_mode=True)
        self.matcher = xgr.GrammarMatcher(compiled)
        self.bitmask = xgr.allocate_token_bitmask(1, len(vocab))
        self.n = len(vocab)

    def mask(self) -> torch.Tensor:
        self.matcher.fill_next_token_bitmask(self.bitmask)
        return _unpack(self.bitmask[0].numpy(), self.n)

    def advance(self, token: int) -> None:
        assert self.matcher.accept_token(token), f"xgrammar refused token {token}"

    def reset(self) -> None:
        self.matcher.reset()


# ----------------------------------------------------------------------------- outlines-core
def _outlines_vocabulary(vocab, eos):
    import outlines_core
    table: dict[bytes, list[int]] = {}
    for i, tok in enumerate(vocab):
        if tok and i != eos:
            table.setdefault(tok, []).append(i)
    return outlines_core.Vocabulary(eos, table)


class _Outlines:
    def __init__(self, vocab, eos, regex, schema):
        import outlines_core
        if regex is None:
            regex = outlines_core.json_schema.build_regex_from_schema(json.dumps(strict_schema(schema)), whitespace_pattern="")
        self.guide = outlines_core.Guide(outlines_core.Index(regex, tokenizer("outlines-core", vocab, eos)))
        self.buffer = torch.zeros((len(vocab) + 31) // 32, dtype=torch.int32)
        self.n = len(vocab)

    def mask(self) -> torch.Tensor:
        self.buffer.zero_()
        self.guide.write_mask_into(self.buffer.data_ptr(), self.buffer.numel(), self.buffer.element_size())
        return _unpack(self.buffer.numpy(), self.n)

    def advance(self, token: int) -> None:
        self.guide.advance(token)

    def reset(self) -> None:
        self.guide.reset()


# ----------------------------------------------------------------------------- llguidance
class _Greedy:
    """What llguidance's TokenizerWrapper asks of a tokenizer: the token bytes, EOS, the special
    ids and a tokenize function (here greedy longest match over the vocabulary)."""

    def __init__(self, vocab, eos):
        self.tokens = [t or b"" for t in vocab]
        self.eos_token_id, self.bos_token_id = eos, None
        self.special_token_ids = [i for i, t in enumerate(vocab) if not t and i != eos]
        self.ids = {t: i for i, t in enumerate(vocab) if t}
        self.longest = max(len(t) for t in self.ids)

    def __call__(self, data):
        data = data.encode() if isinstance(data, str) else bytes(data)
        out, i = [], 0
        while i < len(data):
            for n in range(min(self.longest, len(data) - i), 0, -1):
                if data[i:i + n] in self.ids:
                    out.append(self.ids[data[i:i + n]])
                    i += n
                    break
            else:
                i += 1
        return out


def _llguidance_tokenizer(vocab, eos):
    import llguidance
    return llguidance.LLTokenizer(llguidance.TokenizerWrapper(_Greedy(vocab, eos)))


class _LLGuidance:
    def __init__(self, vocab, eos, regex, schema):
        import llguidance
        if regex is not None:
            grammar = llguidance.LLMatcher.grammar_from_regex(regex)
        else:
            schema = dict(strict_schema(schema))
            schema["x-guidance"] = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"}
            grammar = llguidance.LLMatcher.grammar_from_json_schema(json.dumps(schema))
        self.matcher = llguidance.LLMatcher(tokenizer("llguidance", vocab, eos), grammar, log_level=0)
        assert not self.matcher.is_error(), self.matcher.get_error()
        self.n = len(vocab)

    def mask(self) -> torch.Tensor:
        return _unpack(np.frombuffer(self.matcher.compute_bitmask(), dtype=np.uint32), self.n)

    def forced(self) -> bytes:
        return bytes(self.matcher.compute_ff_bytes())

    def advance(self, token: int) -> None:
        assert self.matcher.consume_token(token), f"llguidance refused token {token}: {self.matcher.get_error()}"

    def reset(self) -> None:
        self.matcher.reset()
        assert not self.matcher.is_error(), self.matcher.get_error()


_BUILD = {"xgrammar": _xgrammar_tokenizer, "outlines-core": _outlines_vocabulary, "llguidance": _llguidance_tokenizer}
_MATCHERS = {"xgrammar": _XGrammar, "outlines-core": _Outlines, "llguidance": _LLGuidance}


def engine_matcher(name: str, vocab, eos: int, *, regex: str | None = None, schema: dict | None = None):
    return _MATCHERS[name](vocab, eos, regex, schema)


# ----------------------------------------------------------------------------- the engine as a submission
# Shared by spec_tests/structured/third_party_<engine>.py (outlines-core, llguidance): the engine
# computes every mask and every state change; the argument checks and their messages are the
# contract's own (the reference's parser of the regex subset, its schema subset, its vocabulary and
# id checks: validation only, imported here and not at the top, so that test_engines.py does not
# depend on the reference).
class Grammar:
    """What an adapter's compile_regex / compile_json_schema return: the regex, or the schema (a
    dict), which the engine compiles for each vocabulary (in ContractMatcher)."""

    def __init__(self, regex: str | None = None, schema: dict | None = None):
        self.regex, self.schema = regex, schema


def regex_grammar(pattern) -> Grammar:
    """``compile_regex``: the contract's checks of ``pattern`` (TypeError, ValueError naming the
    position), then the pattern as the engine reads it."""
    from reference.structured import _Parser
    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be a str, got {type(pattern).__name__}")
    _Parser(pattern).parse()
    return Grammar(regex=pattern)


def schema_grammar(schema) -> Grammar:
    """``compile_json_schema``: the contract's checks of ``schema`` (its subset), then the schema
    (a dict; ``additionalProperties: false`` is made explicit where the engine compiles it)."""
    from reference.structured import json_schema_to_regex
    json_schema_to_regex(schema)
    return Grammar(schema=json.loads(schema) if isinstance(schema, str) else schema)


class ContractMatcher:
    """The contract's ``TokenMatcher`` over ``engine_matcher(ENGINE, ...)`` (a subclass names the
    engine). ``allowed_mask`` is the engine's mask (all False once EOS is taken); ``is_accepted``
    is its EOS bit; ``advance`` refuses what the engine's mask refuses (ValueError, state
    unchanged) and gives every other token but EOS to the engine. EOS is never given to the engine:
    taking it is recorded here (``is_finished``), since outlines-core's Guide has no EOS
    transition and llguidance's LLMatcher stops as soon as the text cannot grow, EOS or not."""

    ENGINE = ""

    def __init__(self, grammar, vocab, eos_token_id):
        from reference.structured import _check_vocab_and_eos
        if not isinstance(grammar, Grammar):
            raise TypeError(f"grammar must be a compiled grammar (compile_regex / compile_json_schema), "
                            f"got {type(grammar).__name__}")
        self.vocab, eos = _check_vocab_and_eos(vocab, eos_token_id)
        self.eos, self.finished = eos, False
        self.engine = engine_matcher(self.ENGINE, self.vocab, eos, regex=grammar.regex, schema=grammar.schema)

    def reset(self) -> None:
        self.engine.reset()
        self.finished = False

    def allowed_mask(self) -> torch.Tensor:
        if self.finished:
            return torch.zeros(len(self.vocab), dtype=torch.bool)
        return self.engine.mask()

    def is_accepted(self) -> bool:
        return self.finished or bool(self.engine.mask()[self.eos])

    def is_finished(self) -> bool:
        return self.finished

    def advance(self, token_id) -> None:
        from reference.structured import _check_token_id
        _check_token_id(token_id, len(self.vocab), self.finished)
        if not bool(self.engine.mask()[token_id]):
            raise ValueError(f"token_id {token_id} is not allowed by the grammar here ({self.ENGINE})")
        if token_id == self.eos:
            self.finished = True
        else:
            self.engine.advance(token_id)
