"""An implementation under test, as the tests see it, and how its contract names resolve.

A contract name ``attention.attention`` resolves, in order, as
    impl.attention.attention   (an attribute, or a submodule ``<impl>.attention`` of a package)
    impl.attention             (the bare function name at the top of the implementation)
An attribute ``attention`` counts only if it is the implementation's own module (a submodule, a
sibling file, a module object it built): a module it imported from reference/, optimized/ or
anywhere else (``from reference import paged`` for a helper) is not its concept, so its names are
never checked in the submission's stead. A name that resolves nowhere ("missing"), or a contract
function that raises ``NotImplementedError`` itself, in its own body (the student template's stubs:
"stubbed"), makes its concept "not implemented" -- never a failure. A ``NotImplementedError``
raised deeper down (a helper the function calls) is an ordinary failure.

Used on both sides of the boundary: in the judge (the bundled implementations, the mutants, a
submission's proxies) and in a submission's worker (``call_in_process``). The concepts' contract
names are data (:attr:`Implementation.contracts`): the registry's in the judge, the judge's copy in
a worker, which imports no registry.
"""
from __future__ import annotations

import ast

import functools
import hashlib
import importlib
import importlib.util
import inspect
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest



class NotImplementedInImpl(pytest.skip.Exception):
    """Raised when contract names do not resolve (``stubbed=False``: missing) or a stub raises
    ``NotImplementedError`` itself (``stubbed=True``).

    It is pytest's skip outcome, so pytest reports the test as skipped with reason
    ``not implemented: <names>`` and Hypothesis re-raises it at once instead of shrinking.
    """

    def __init__(self, impl: str, names: list[str], stubbed: bool = False):
        self.impl = impl
        self.names = list(names)
        self.stubbed = stubbed
        how = " (stubbed: raises NotImplementedError)" if stubbed else ""
        super().__init__(f"not implemented: {', '.join(self.names)}{how}", allow_module_level=True)

    def __reduce__(self):   # picklable: a forked worker (spec_tests/disagg/cluster.py) sends it back whole
        return type(self), (self.impl, self.names, self.stubbed)


def registry_contracts() -> dict[str, tuple[str, ...]]:
    """Every concept's qualified contract names, from the registry (the judge's side)."""
    from conformance.registry import CONCEPTS
    return {c.id: c.names for c in CONCEPTS.values()}


TOKEN_EXACT = "TOKEN_EXACT"


def declared_token_exact(path: Path) -> bool:
    """Whether the submission at ``path`` (a file, or a package's ``__init__.py``) declares
    ``TOKEN_EXACT = True`` at module level: read from its syntax tree, never by importing it."""
    file = path / "__init__.py" if path.is_dir() else path
    try:
        tree = ast.parse(file.read_text())
    except (OSError, SyntaxError, ValueError):
        return False
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == TOKEN_EXACT for t in targets):
                try:
                    return ast.literal_eval(node.value) is True
                except (ValueError, TypeError, SyntaxError):
                    return False
    return False


def import_path(path: Path) -> ModuleType:
    path = path.resolve()
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:8]
    if path.is_dir():
        init = path / "__init__.py"
        if not init.exists():
            raise ValueError(f"--impl {path}: a folder must be a package (no __init__.py)")
        name, location, search = f"inferspec_impl_{path.name}_{digest}", init, [str(path)]
    else:
        name, location, search = f"inferspec_impl_{path.stem}_{digest}", path, None
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, location, submodule_search_locations=search)
    if spec is None or spec.loader is None:
        raise ValueError(f"--impl {path}: cannot import this file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    # Let a student's file import its own siblings.
    sys.path.insert(0, str(path.parent if path.is_file() else path.parent))
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


class Implementation:
    """An implementation under test: a name for reports and the module that holds it, or (a
    submission) the :class:`~conformance.submission.Submission` whose workers hold it.

    Tests see it bound to a concept (:meth:`of`, a :class:`ConceptView`): a test in
    ``spec_tests/X/`` gets ``impl.of("X")`` from the ``impl`` fixture, so ``impl.get("KVCache")``
    means ``X.KVCache``, and another concept's name is asked for explicitly:
    ``impl.of("attention").get("attention")``. This object itself is the unbound view, which a
    test outside any concept folder gets: its :meth:`get` refuses and says to use :meth:`of`.
    The harness resolves qualified names (``resolve("kv_bytes.KVCache")``, ``missing(...)``)."""

    concept = None  # unbound

    def __init__(self, name: str, module: ModuleType | None, spec: str, submission=None,
                 contracts: dict[str, tuple[str, ...]] | None = None, token_exact: bool = False):
        self.name = name
        self.module = module
        self.spec = spec
        self.submission = submission
        # Whether the reference's choices (tests marked ``choice``) are enforced: the bundled
        # implementations and planted bugs always; a submission when it declares TOKEN_EXACT.
        self.token_exact = token_exact
        self._contracts = contracts
        self._concept_of: dict[str, str] | None = None
        self._cache: dict[str, Any] = {}
        self._views: dict[str, ConceptView] = {}

    @property
    def contracts(self) -> dict[str, tuple[str, ...]]:
        """Concept id -> its qualified contract names (given, or the registry's on first use)."""
        if self._contracts is None:
            self._contracts = registry_contracts()
        return self._contracts

    def concept_of(self, contract_name: str) -> str | None:
        """The concept whose contract holds the qualified ``contract_name``, or None."""
        if self._concept_of is None:
            self._concept_of = {n: cid for cid, names in self.contracts.items() for n in names}
        return self._concept_of.get(contract_name)

    @property
    def isolated(self) -> bool:
        return self.submission is not None

    def of(self, concept: str) -> "ConceptView":
        """This implementation as a test of ``concept`` sees it: bare contract names of
        ``reference/<concept>.py``."""
        view = self._views.get(concept)
        if view is None:
            view = self._views[concept] = ConceptView(self, concept)
        return view

    def resolve(self, contract_name: str) -> Any | None:
        """The object behind the qualified ``contract_name`` (``kv_bytes.KVCache``), or None if it
        does not resolve. A name that is no concept's contract name is a LookupError."""
        if contract_name in self._cache:
            return self._cache[contract_name]
        concept = self.concept_of(contract_name)
        if concept is None:
            raise LookupError(_unbound_message("resolve", contract_name, self.contracts))
        if self.submission is not None:
            self.submission.name = self.name
            found = self.submission.resolve(contract_name, concept)
        else:
            found = resolve_in(self.module, contract_name, self.name)
        self._cache[contract_name] = found
        return found

    def provides(self, *names: str) -> bool:
        """Whether every qualified name resolves."""
        return all(self.resolve(n) is not None for n in names)

    def missing(self, *names: str) -> list[str]:
        """The qualified names that do not resolve."""
        return [n for n in names if self.resolve(n) is None]

    def get(self, name: str) -> Any:
        """Unbound: refused (a test outside spec_tests/<concept>/ names the concept with
        :meth:`of`, or a ``concept`` marker binds its ``impl``)."""
        raise LookupError(_unbound_message("get", name, self.contracts))

    def call_in_process(self, fn, *args, **kwargs):
        """``fn(impl, *args, **kwargs)``, run in the process where this implementation's code runs:
        here for the bundled implementations and the mutants, in the concept's worker for a
        submission (``impl`` there resolves the submission's names directly, no proxies); ``impl``
        is bound to ``fn``'s concept (:func:`view_for`). For properties of what the implementation
        does to its own process, such as ``batch_invariant.invariant_mode()``, which patches torch's
        kernels where it runs: the test's torch calls must run there too. ``fn`` is a module-level
        function of ``spec_tests/<concept>/`` (its concept picks the worker) sent by name; its
        arguments and result cross the boundary like a call's, so the judge still makes the
        comparisons."""
        if self.submission is None:
            return fn(view_for(self, fn), *args, **kwargs)
        parts = getattr(fn, "__module__", "").split(".")
        if len(parts) < 3 or parts[0] != "spec_tests" or parts[1] not in self.contracts:
            raise ValueError(f"call_in_process: {fn!r} is not a function of a concept's spec_tests/<concept>/ module")
        self.submission.name = self.name
        return self.submission.call_in_process(parts[1], fn, args, kwargs)

    def __repr__(self) -> str:  # shown in Hypothesis's falsifying examples
        return f"Implementation({self.spec!r})"


def _unbound_message(method: str, name: str, contracts: dict) -> str:
    cid, dot, bare = str(name).partition(".")
    if dot and cid in contracts:
        ask = f"impl.of({cid!r}).{method}({bare!r})"
    else:
        ask = f"impl.of('<concept>').{method}({name!r})"
    return (f"impl.{method}({name!r}): this implementation is not bound to a concept (the test lives "
            f"outside spec_tests/<concept>/ and has no concept marker); ask {ask}, or mark the "
            "test @pytest.mark.concept('<concept>')")


class ConceptView:
    """An implementation bound to one concept, as that concept's tests see it (the ``impl`` and
    ``reference`` fixtures of a test in ``spec_tests/<concept>/``): :meth:`get`, :meth:`resolve`,
    :meth:`provides` and :meth:`missing` take the bare names of ``reference/<concept>.py``'s
    ``__all__`` and ``__optional__``. A dotted name is an error (another concept's name is asked
    for through :meth:`of`), and so is a name outside the contract: a typo in a test fails it,
    never skips it as "not implemented"."""

    def __init__(self, impl: Implementation, concept: str):
        if concept not in impl.contracts:
            raise LookupError(f"impl.of({concept!r}): unknown concept; known: {', '.join(impl.contracts)}")
        self.implementation = impl
        self.concept = concept
        self._names = {q.split(".", 1)[1]: q for q in impl.contracts[concept]}

    def qualified(self, name: str, method: str = "get") -> str:
        """``name`` as the harness resolves it (``KVCache`` -> ``kv_bytes.KVCache``), or the
        LookupError that says what is wrong with it."""
        if not isinstance(name, str):
            raise TypeError(f"impl.{method}({name!r}): a contract name is a str")
        found = self._names.get(name)
        if found is not None:
            return found
        if "." in name:
            cid, _, bare = name.partition(".")
            ask = (f"impl.{method}({bare!r})" if cid == self.concept
                   else f"impl.of({cid!r}).{method}({bare!r})")
            raise LookupError(f"impl.{method}({name!r}): this test's implementation is bound to concept "
                              f"{self.concept!r} and takes bare names; ask {ask} (another concept's "
                              "names through impl.of('<concept>'))")
        raise LookupError(f"impl.{method}({name!r}): {name!r} is not a contract name of concept "
                          f"{self.concept!r} (reference/{self.concept}.py __all__ / __optional__): "
                          f"{', '.join(self._names)}")

    @property
    def token_exact(self) -> bool:
        return self.implementation.token_exact

    def of(self, concept: str) -> "ConceptView":
        return self.implementation.of(concept)

    def resolve(self, name: str) -> Any | None:
        """The object behind the bare ``name``, or None if it does not resolve."""
        return self.implementation.resolve(self.qualified(name, "resolve"))

    def provides(self, *names: str) -> bool:
        qualified = [self.qualified(n, "provides") for n in names]
        return self.implementation.provides(*qualified)

    def missing(self, *names: str) -> list[str]:
        """The bare names that do not resolve."""
        return [n for n in names if self.implementation.resolve(self.qualified(n, "missing")) is None]

    def get(self, name: str) -> Any:
        """Resolve one bare name or raise :class:`NotImplementedInImpl` (the plugin turns it into a
        skip, naming the qualified name)."""
        qualified = self.qualified(name, "get")
        obj = self.implementation.resolve(qualified)
        if obj is None:
            raise NotImplementedInImpl(self.implementation.name, [qualified])
        return obj

    def call_in_process(self, fn, *args, **kwargs):
        """See :meth:`Implementation.call_in_process`."""
        return self.implementation.call_in_process(fn, *args, **kwargs)

    # what the tests and the plugin read of the implementation
    name = property(lambda self: self.implementation.name)
    spec = property(lambda self: self.implementation.spec)
    module = property(lambda self: self.implementation.module)
    submission = property(lambda self: self.implementation.submission)
    isolated = property(lambda self: self.implementation.isolated)

    def __repr__(self) -> str:  # shown in Hypothesis's falsifying examples: the implementation's
        return repr(self.implementation)


def view_for(impl: Implementation, fn) -> Implementation | ConceptView:
    """``impl`` bound to the concept of ``fn``'s module when it is a module of
    ``spec_tests/<concept>/``, else ``impl`` itself (``call_in_process``, here and in a worker)."""
    impl = getattr(impl, "implementation", impl)
    parts = str(getattr(fn, "__module__", "") or "").split(".")
    if len(parts) >= 3 and parts[0] == "spec_tests" and parts[1] in impl.contracts:
        return impl.of(parts[1])
    return impl


def resolve_in(module: ModuleType, contract_name: str, impl: str) -> Any | None:
    """Resolve ``contract_name`` in an imported implementation module (see the module docstring);
    stubs are wrapped so that their own ``NotImplementedError`` becomes "not implemented"."""
    mod_name, _, attr = contract_name.rpartition(".")
    found = None
    sub = getattr(module, mod_name, None) if mod_name else None
    if isinstance(sub, ModuleType) and not _defined_by(module, sub):
        sub = None  # e.g. ``from reference import paged`` for a helper: not the submission's paged
    if sub is None and mod_name and hasattr(module, "__path__"):
        try:
            sub = importlib.import_module(f"{module.__name__}.{mod_name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{module.__name__}.{mod_name}":
                raise  # the submodule exists but its own import is broken: that is a failure
            sub = None
    if isinstance(sub, ModuleType):
        found = getattr(sub, attr, None)
    if found is None:
        found = getattr(module, attr, None)
        if isinstance(found, ModuleType) and not _defined_by(module, found):
            found = None  # ``from reference import attention``: a module, not the function
    if found is not None:
        found = _wrap_not_implemented(found, impl, contract_name)
    return found


# Modules that are never a submission's own, whatever it imported: the specification, the bundled
# implementations, the tests and the harness.
FOREIGN_ROOTS = ("reference", "optimized", "spec_tests", "conformance")


def _defined_by(module: ModuleType, sub: ModuleType) -> bool:
    """Whether ``sub``, an attribute of the implementation ``module``, is the implementation's own
    module: a submodule of it, a module object its code built (no file, not an imported module),
    or a module whose file lies in the implementation's folder (a sibling file it imports) --
    never a module of reference/, optimized/, spec_tests/ or conformance/, nor one imported from
    elsewhere (site-packages, the standard library)."""
    name = getattr(sub, "__name__", "") or ""
    if name.startswith(module.__name__ + "."):
        return True
    if name.partition(".")[0] in FOREIGN_ROOTS:
        return False
    file = getattr(sub, "__file__", None)
    if file is None:
        return sys.modules.get(name) is not sub  # built by the submission, not an imported built-in
    home = getattr(module, "__file__", None)
    if home is None:
        return False
    folder = Path(home).resolve().parent
    try:
        Path(file).resolve().relative_to(folder)
    except ValueError:
        return False
    return True


def _wrap_not_implemented(obj: Any, impl: str, name: str) -> Any:
    """Turn a ``NotImplementedError`` raised directly by a stub into ``NotImplementedInImpl``.

    Functions are wrapped. A class whose methods (its own, or inherited from the submission's own
    classes) raise ``NotImplementedError`` (the student template's stubs) is replaced by a thin
    subclass whose methods are wrapped the same way, so a
    state machine driving it reports "not implemented" instead of failing; other classes are
    returned untouched.
    """
    if inspect.isclass(obj):
        stubs = {}
        for klass in reversed(obj.__mro__):  # inherited stubs too (class LFU(LRU) of a template)
            if klass.__module__ != obj.__module__:
                continue
            for k, v in vars(klass).items():
                if inspect.isfunction(v) and "NotImplementedError" in v.__code__.co_names:
                    stubs[k] = v
                elif k in stubs:
                    del stubs[k]  # overridden by a real method
        if not stubs:
            return obj
        wrapped = {k: _wrap_not_implemented(v, impl, f"{name}.{k}") for k, v in stubs.items()}
        wrapped["__module__"] = obj.__module__
        wrapped["__qualname__"] = obj.__qualname__
        wrapped["__doc__"] = obj.__doc__
        return type(obj.__name__, (obj,), wrapped)
    if not callable(obj):
        return obj

    @functools.wraps(obj)
    def wrapper(*args, **kwargs):
        try:
            return obj(*args, **kwargs)
        except NotImplementedError as exc:
            if _raised_directly_by(exc, obj):
                raise NotImplementedInImpl(impl, [name], stubbed=True) from exc
            raise

    wrapper.__wrapped_impl__ = obj
    return wrapper


def _raised_directly_by(exc: BaseException, fn: Any) -> bool:
    """True if ``exc`` was raised in ``fn``'s own body (the template's stub), not deeper down."""
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    code = getattr(inspect.unwrap(fn), "__code__", None)
    return last is not None and code is not None and last.tb_frame.f_code is code


def syntax_error(path: Path) -> tuple[str, str] | None:
    """The first syntax error of a submission's files, found by compiling (never executing) them:
    ``(summary, detail)`` as :func:`describe_import_failure` gives them, or None."""
    files = sorted(path.rglob("*.py"))[:500] if path.is_dir() else [path]
    for f in files:
        try:
            compile(f.read_bytes(), str(f), "exec", dont_inherit=True)
        except SyntaxError as exc:
            return describe_import_failure(exc, path)
        except (OSError, ValueError) as exc:
            return f"{type(exc).__name__}: {exc}", ""
    return None


# -------------------------------------------------------------- a submission's import failure
_HARNESS_DIR = Path(__file__).resolve().parent.parent   # reference/, optimized/, spec_tests/, conformance/


def submission_home(target: dict) -> Path | None:
    """The file or folder that holds a submission's own code: its path (a .py file or a package
    folder), or where its module name is found (without importing it)."""
    if target.get("path"):
        return Path(target["path"]).resolve()
    root = str(target.get("module") or "").partition(".")[0]
    try:
        spec = importlib.util.find_spec(root) if root else None
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0]).resolve()
    return Path(spec.origin).resolve() if spec.origin and spec.has_location else None


def _own_file(filename: str, home: Path | None) -> bool:
    """Whether a traceback's ``filename`` is the submission's own code: its file, or a file of its
    folder (a sibling it imports, a module of its package) that is neither the harness's
    (reference/, optimized/, spec_tests/, conformance/ of inferspec) nor an installed package."""
    if home is None or not filename or filename.startswith("<"):
        return False
    f = Path(filename).resolve()
    if f == home:
        return True
    folder = home if home.is_dir() else home.parent
    try:
        rel = f.relative_to(folder)
    except ValueError:
        return False
    if "site-packages" in rel.parts or "dist-packages" in rel.parts:
        return False
    for root in FOREIGN_ROOTS:
        try:
            f.relative_to(_HARNESS_DIR / root)
            return False
        except ValueError:
            pass
    return True


def import_failed(spec: str, exc: BaseException, home: Path | None) -> ValueError:
    """A submission loaded in-process (``--in-process``) that does not import: the error that
    stops the run (a usage error of pytest), told like an isolated submission's verdict."""
    summary, detail = describe_import_failure(exc, home)
    return ValueError(f"--impl {spec}: import failed: {summary}\n{detail}")


def describe_import_failure(exc: BaseException, home: Path | None) -> tuple[str, str]:
    """A submission's failure to import, as the student needs it: ``(summary, detail)``.

    ``summary`` is one line, the verdict's: ``SyntaxError: '(' was never closed (my_impl.py:14)``,
    ``ModuleNotFoundError: No module named 'numpyy' (my_impl.py:2)``. ``detail`` shows where:
    for a syntax error, Python's own rendering (the file and line, the offending line, a caret,
    the message); for any other exception, the deepest frame that lies in the submission's own
    files (``home``: its file or package folder, see :func:`submission_home`) with its line of
    code, then the exception line. Nothing of the harness or of importlib is shown; if no frame
    lies in the submission's files, the traceback without the harness's frames."""
    import linecache
    import traceback

    kind = type(exc).__name__
    if isinstance(exc, SyntaxError):
        where = f" ({Path(exc.filename).name}:{exc.lineno})" if exc.filename and exc.lineno else ""
        summary = f"{kind}: {exc.msg}{where}"
        return summary, "".join(traceback.format_exception_only(type(exc), exc)).rstrip()
    message = str(exc).strip()
    first = message.splitlines()[0] if message else ""
    summary = f"{kind}: {first}".rstrip(": ") if first else kind
    exc_line = "".join(traceback.format_exception_only(type(exc), exc)).rstrip()
    frames = traceback.extract_tb(exc.__traceback__)
    own = [fr for fr in frames if _own_file(fr.filename, home)]
    if own:
        fr = own[-1]
        code = (fr.line or linecache.getline(fr.filename, fr.lineno)).strip()
        summary += f" ({Path(fr.filename).name}:{fr.lineno})"
        where = f'  File "{fr.filename}", line {fr.lineno}, in {fr.name}' + (f"\n    {code}" if code else "")
        return summary, f"{where}\n{exc_line}"
    harness = str(Path(__file__).resolve().parent)
    kept = [fr for fr in frames if not fr.filename.startswith((harness, "<frozen"))]
    tb = "".join(traceback.format_list(kept))
    return summary, (f"Traceback (most recent call last):\n{tb}" if kept else "") + exc_line
