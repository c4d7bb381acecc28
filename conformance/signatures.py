"""The contract's signatures, checked before any property runs (in the spirit of array-api-tests'
``test_signatures``): every contract name an implementation provides must accept every call the
contract allows, or the concept's cell gets one line naming the name and the parameter:

    wrong signature: paged.BlockAllocator.append: no parameter 'n' (the contract: append(self, seq, n=1))

Rules, for each parameter of the contract's signature (``reference/X.py``; for a class, its
constructor and those of its public methods that the implementation's class also has):

- a parameter the contract passes by position sits at the same position with the same name (tests
  pass it either way), and is not keyword-only;
- a keyword-only parameter (after ``*``) exists by that name, and is keyword-only too: taking it by
  position as well is a different signature;
- a parameter with a default has a default (callers may leave it out); a default's *value* is left
  to the properties (a wrong default is a behaviour, pinned by the tests that omit it);
- ``*args`` / ``**kwargs`` of the contract are there too; the implementation's own ``*args`` /
  ``**kwargs`` accept what they can (a catch-all wrapper is not held against it);
- no parameter the contract does not have is required.

Extra optional parameters, and methods the contract's class lacks, are allowed. A name whose
signature cannot be read (a builtin, an object of a C extension) is not judged. A missing method is
left to the properties that call it.

The shape of a signature is plain data (:func:`shapes`), computed where the implementation lives
(in the judge for the bundled implementations and mutants, in the concept's worker for a
submission), and compared in the judge (:func:`problems`).
"""
from __future__ import annotations

import enum
import importlib
import inspect
from typing import Any

POSITIONAL = ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD")

# one parameter: (name, kind, has_default, the default's repr for messages); kind is
# inspect.Parameter.kind's name
Param = tuple[str, str, bool, str]

RULE = ("every contract name takes the contract's parameters: the same positions and names, "
        "keyword-only where the contract says so, a default where it has one")


def parameters(fn: Any, drop_first: bool = False) -> list[Param] | None:
    """The parameters of ``fn``'s signature as plain data, or None if it cannot be read."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    params = [(p.name, p.kind.name, p.default is not inspect.Parameter.empty, _short(p.default))
              for p in sig.parameters.values()]
    return params[1:] if drop_first and params and params[0][1] in POSITIONAL else params


def _short(default: Any) -> str:
    if default is inspect.Parameter.empty:
        return ""
    try:
        text = repr(default)
    except Exception:  # noqa: BLE001
        text = "..."
    return text if len(text) <= 20 else "..."


def _method(cls: type, name: str) -> list[Param] | None:
    """The parameters a call ``obj.name(...)`` takes (``self`` dropped), None if not a method."""
    try:
        raw = inspect.getattr_static(cls, name)
    except AttributeError:
        return None
    if isinstance(raw, staticmethod):
        return parameters(raw.__func__)
    if isinstance(raw, classmethod):
        return parameters(raw.__func__, drop_first=True)
    if inspect.isfunction(raw):
        return parameters(raw, drop_first=True)
    return None  # a property, a data attribute, a C slot: not judged


def public_methods(cls: type) -> list[str]:
    """The public methods a contract class defines itself or inherits from the reference (not from
    ``object``, ``nn.Module`` or other libraries' bases)."""
    names = []
    for klass in cls.__mro__:
        if klass is object or not klass.__module__.startswith("reference"):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_") or name in names:
                continue
            if isinstance(value, (staticmethod, classmethod)) or inspect.isfunction(value):
                names.append(name)
    return names


def shape(obj: Any, methods: list[str] = ()) -> dict | None:
    """``{"call": params, "methods": {name: params}}`` of a contract object: its call (a class: its
    constructor) and, for a class, the given methods it has."""
    if obj is None:
        return None
    out = {"call": parameters(obj), "methods": {}}
    if isinstance(obj, type):
        for name in methods:
            params = _method(obj, name)
            if params is not None:
                out["methods"][name] = params
    return out


def shapes(impl, wanted: dict[str, list[str]]) -> dict[str, dict | None]:
    """The shape of each qualified contract name of ``wanted`` (name -> the methods to describe)
    that ``impl`` provides. ``impl`` is an unbound :class:`conformance.implementation.Implementation`; run
    where its code lives (``Submission.call_in_process`` for a submission)."""
    return {name: shape(impl.resolve(name), methods) for name, methods in wanted.items()}


# ------------------------------------------------------------------------------- the judge's side
def _show(params: list[Param], name: str) -> str:
    parts, star = [], False
    for pname, kind, default, shown in params:
        if kind == "KEYWORD_ONLY" and not star:
            parts.append("*")
            star = True
        if kind == "VAR_POSITIONAL":
            star = True
            parts.append(f"*{pname}")
        elif kind == "VAR_KEYWORD":
            parts.append(f"**{pname}")
        else:
            parts.append(f"{pname}={shown}" if default else pname)
    return f"{name}({', '.join(parts)})"


def compare(label: str, contract: list[Param], got: list[Param] | None) -> str | None:
    """The first way ``got`` refuses a call ``contract`` allows, as one line, or None."""
    if got is None:
        return None
    want_pos = [p for p in contract if p[1] in POSITIONAL]
    got_pos = [p for p in got if p[1] in POSITIONAL]
    by_name = {p[0]: p for p in got}
    var_pos = any(p[1] == "VAR_POSITIONAL" for p in got)
    var_kw = any(p[1] == "VAR_KEYWORD" for p in got)
    bare = label.rpartition(".")[2]
    the = f"(the contract: {_show(contract, bare)})"

    def fail(text: str) -> str:
        return f"{label}: {text} {the}"

    for i, (name, kind, default, _) in enumerate(want_pos):
        if i < len(got_pos):
            gname, gkind, gdefault = got_pos[i][:3]
            if gname != name and kind == "POSITIONAL_OR_KEYWORD" and not (gkind == "POSITIONAL_ONLY" and var_kw):
                return fail(f"parameter {i + 1} is {gname!r}, the contract's is {name!r}")
            if default and not gdefault:
                return fail(f"{gname!r} has no default (callers may leave it out)")
            continue
        other = by_name.get(name)
        if other is not None and other[1] == "KEYWORD_ONLY":
            return fail(f"{name!r} is keyword-only; the contract takes it by position too")
        if not var_pos:
            return fail(f"no parameter {name!r}")
    for name, kind, default, _ in contract:
        other = by_name.get(name)
        if kind == "KEYWORD_ONLY":
            if other is None:
                if not var_kw:
                    return fail(f"no keyword-only parameter {name!r}")
                continue
            if other[1] in POSITIONAL:
                return fail(f"{name!r} is positional; the contract makes it keyword-only (after *)")
            if default and not other[2]:
                return fail(f"{name!r} has no default (callers may leave it out)")
        elif kind == "VAR_POSITIONAL" and not var_pos:
            return fail(f"no *{name}")
        elif kind == "VAR_KEYWORD" and not var_kw:
            return fail(f"no **{name}")
    wanted = {p[0] for p in contract}
    for i, (name, kind, default, _) in enumerate(got):
        if default or kind in ("VAR_POSITIONAL", "VAR_KEYWORD") or name in wanted:
            continue
        if kind in POSITIONAL and i < len(want_pos):
            continue  # a renamed positional parameter, reported above
        return fail(f"requires {name!r}, which the contract does not have")
    return None


def problems(contract: dict[str, dict | None], got: dict[str, dict | None]) -> list[str]:
    """One line per contract name whose signature in ``got`` refuses a call ``contract`` allows."""
    out = []
    for name, want in contract.items():
        have = got.get(name)
        if want is None or have is None:
            continue
        text = compare(name, want["call"] or [], have["call"]) if want["call"] is not None else None
        if text:
            out.append(text)
            continue
        for method, params in want["methods"].items():
            if method in have["methods"]:
                text = compare(f"{name}.{method}", params, have["methods"][method])
                if text:
                    out.append(text)
                    break
    return out


def contract_shapes(concept) -> tuple[dict[str, dict | None], dict[str, list[str]]]:
    """The reference's shapes of a :class:`conformance.registry.Concept`'s names, and what to ask of
    an implementation (each name -> the methods to describe)."""
    module = importlib.import_module(f"reference.{concept.id}")
    contract, wanted = {}, {}
    for qualified in concept.names:
        obj = getattr(module, qualified.split(".", 1)[1], None)
        if obj is None or (isinstance(obj, type) and issubclass(obj, enum.Enum)):
            continue  # an enum's call is the enum machinery's, not the contract's
        methods = public_methods(obj) if isinstance(obj, type) else []
        contract[qualified] = shape(obj, methods)
        wanted[qualified] = methods
    return contract, wanted
