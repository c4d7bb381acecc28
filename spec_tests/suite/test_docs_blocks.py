"""The concept pages state what the tests demand: every bad-input row of every
concept (``Bad`` rows of ``@bad_cases`` tests and the state machines' ``BAD_CALLS``) is in its
page's generated bad-input block, with its error type and the words its message must contain; a
page whose tests reject bools says so; the page's ``--forbid-reference`` block says exactly what
the worker's guard lets a submission import; a new page gets both blocks from ``inferspec docs``."""
from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import shutil
import subprocess
import sys

import pytest

from conformance import docs
from conformance.registry import CONCEPTS, DOCS_DIR, ROOT, SPEC_DIR, allowed_imports

pytestmark = pytest.mark.meta


def _block(cid: str, markers: tuple[str, str]) -> str:
    text = (DOCS_DIR / f"{cid}.md").read_text()
    assert markers[0] in text and markers[1] in text, f"docs/{cid}.md has no {markers[0]} block: run `inferspec docs`"
    return text.split(markers[0], 1)[1].split(markers[1], 1)[0]


def _errors(error) -> list[str]:
    return [e.__name__ for e in (error if isinstance(error, tuple) else (error,))]


def _spec_rows(cid: str) -> tuple[list, list]:
    """Found here without conformance/docs.py: the Bad rows every test of the concept is
    parametrized with, and the (op, error, words) of every module-level BAD_CALLS."""
    rows, calls = [], []
    for path in sorted((SPEC_DIR / cid).glob("test_*.py")):
        module = importlib.import_module(f"spec_tests.{cid}.{path.stem}")
        for name, fn in vars(module).items():
            if name.startswith("test") and callable(fn):
                for mark in getattr(fn, "pytestmark", ()):
                    if mark.name == "parametrize" and mark.args[0] == "bad":
                        rows += list(mark.args[1])
        calls += [(op, make, error, tuple(words)) for op, make, error, words in getattr(module, "BAD_CALLS", ())]
    return rows, calls


def _literal_bad_ids(cid: str) -> set[str]:
    """The id of every ``Bad("...", ...)`` written in the concept's test files."""
    ids = set()
    for path in (SPEC_DIR / cid).glob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Bad"
                    and node.args and isinstance(node.args[0], ast.Constant)):
                ids.add(node.args[0].value)
    return ids


def _has_row(block: str, first_cell: str, error, words) -> bool:
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and cells[0] == first_cell and all(f"`{e}`" in line for e in _errors(error)) \
                and all(f"`{w}`" in line for w in words):
            return True
    return False


@pytest.mark.parametrize("cid", list(CONCEPTS))
def test_every_bad_row_is_on_its_page(cid):
    """Each row the spec demands is a line of the page's bad-input block: the case, its error
    type(s) and the words its message must contain; each BAD_CALLS row too (its method, error
    and words); and no Bad written in the tests is missing (an inline one included)."""
    block = _block(cid, docs.BADINPUT)
    rows, calls = _spec_rows(cid)
    missing = [b.id for b in rows if not _has_row(block, b.id.replace("|", "/"), b.error, b.words)]
    assert not missing, f"docs/{cid}.md: bad-input rows not on the page (run `inferspec docs`): {missing}"
    cells = [line.split("|")[1].strip() for line in block.splitlines() if line.startswith("| ")]
    absent = sorted(i for i in _literal_bad_ids(cid) if i.replace("|", "/") not in cells)
    assert not absent, f"docs/{cid}.md: Bad rows of the tests not on the page: {absent}"
    for op, _, error, words in calls:
        ok = any(re.search(rf"^\| ``?\w+\.{op}\(", line) and all(f"`{e}`" in line for e in _errors(error))
                 and all(f"`{w}`" in line for w in words) for line in block.splitlines())
        assert ok, f"docs/{cid}.md: BAD_CALLS row {op} -> {error} naming {words} is not on the page"
    if calls:
        assert sum(1 for line in block.splitlines() if re.match(r"^\| ``?\w+\.\w+\(", line)) >= len(calls)


@pytest.mark.parametrize("cid", list(CONCEPTS))
def test_bool_rows_are_stated(cid):
    """A concept whose tests pass a bool where an int (a count, an id, a number) is asked and
    demand TypeError says so on its page: 'A bool is not an int' and each such argument."""
    rows, calls = _spec_rows(cid)

    def holds_bool(v) -> bool:
        import torch
        if isinstance(v, bool) or (isinstance(v, torch.Tensor) and v.dtype == torch.bool):
            return True
        if isinstance(v, (list, tuple)):
            return any(holds_bool(x) for x in v)
        return False

    demanded = [b.words[0] for b in rows if TypeError in (b.error if isinstance(b.error, tuple) else (b.error,))
                and (re.search(r"\bbools?\b", b.id, re.I) or
                     (not callable(b.change) and any(holds_bool(v) for v in b.change.values())))]
    demanded += [words[0] for _, make, error, words in calls if error is TypeError and holds_bool(
        make(*[[0, 1]] * len(inspect.signature(make).parameters)))]
    if not demanded:
        return
    text = (DOCS_DIR / f"{cid}.md").read_text()
    sentence = next((line for line in text.splitlines() if line.startswith("**A bool is not an int.**")), "")
    assert sentence, f"docs/{cid}.md: its tests reject bools for {sorted(set(demanded))}; the page must say so"
    missing = sorted({w for w in demanded if f"`{w}`" not in sentence})
    assert not missing, f"docs/{cid}.md: the bool sentence does not name {missing}"


def test_radix_page_states_the_bool_rows_and_the_default_policy():
    """Two gaps the pages once left open, in words: bools are rejected for n_tokens and page_size,
    and under --forbid-reference the default LRU is the submission's own."""
    text = (DOCS_DIR / "radix.md").read_text()
    assert "`evict(True)`" in text and "`RadixCache(page_size=True)`" in text
    assert "The default policy under `--forbid-reference`" in text
    assert "may **not** import `reference.eviction.LRU`" in text


def test_eviction_policies_are_not_lent_to_other_concepts():
    """--forbid-reference stays meaningful for eviction (and radix): no concept's allowed imports
    hold a policy class or the radix cache, so none can be passed by re-exporting the reference."""
    allowed = allowed_imports()
    lent = {(m, n) for m, names in allowed.items() for n in names
            if n in ("LRU", "LFU", "Hybrid", "RadixCache", "BlockAllocator", "PrefixCache")}
    assert not lent, lent


_GUARD_PROBE = r"""
import importlib, json, sys
from conformance.verdict import ForbiddenReference
from conformance.registry import allowed_imports
from conformance.worker import _Guard
guard = _Guard(allowed_imports())
out = {}
for module, name in json.loads(sys.stdin.read()):
    was = guard.enter()
    try:
        getattr(importlib.import_module(module), name)
        out[f"{module}.{name}"] = True
    except ForbiddenReference:
        out[f"{module}.{name}"] = False
    finally:
        guard.leave(was)
print(json.dumps(out))
"""


def test_forbid_reference_blocks_agree_with_the_guard():
    """What each page's --forbid-reference block calls importable imports under the worker's real
    guard, and what it calls not importable raises ForbiddenReference (one subprocess)."""
    allowed = allowed_imports()
    claims: dict[str, bool] = {}
    for cid, c in CONCEPTS.items():
        block = _block(cid, docs.IMPORTS)
        own = f"reference.{cid}"
        for name in allowed[own] + docs._public_constants(own):
            assert f"`{name}`" in block, f"docs/{cid}.md: {own}.{name} is importable; the block does not say so"
            claims[f"{own}.{name}"] = True
        page = (DOCS_DIR / f"{cid}.md").read_text()
        for module, name in docs.reference_imports(cid) + docs.page_mentions(page):
            if module == own or not name:
                continue
            ok = docs._guard_lets_through(module, name, allowed)
            claims[f"{module}.{name}"] = ok
            if not ok:
                assert f"`{module}.{name}`" in block, \
                    f"docs/{cid}.md: {module}.{name} is forbidden; the block does not say so"
    pairs = [k.rsplit(".", 1) for k in claims]
    r = subprocess.run([sys.executable, "-c", _GUARD_PROBE], input=json.dumps(pairs), capture_output=True,
                       text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    real = json.loads(r.stdout.strip().splitlines()[-1])
    wrong = {k: (claims[k], real[k]) for k in claims if claims[k] != real[k]}
    assert not wrong, f"(block says importable, guard lets it through): {wrong}"
    assert real["reference.eviction.LRU"] is False and real["reference.radix.MatchResult"] is True


def test_a_page_without_the_blocks_gets_them(tmp_path):
    """`inferspec docs` adds the imports and bad-input blocks to a page that has only the contract
    markers (a new concept's page), at the end of its contract section; `--check` calls it stale."""
    shutil.copytree(DOCS_DIR, tmp_path / "docs", ignore=shutil.ignore_patterns("img", "results"))
    page = tmp_path / "docs" / "eviction.md"
    text = page.read_text()
    for begin, end in (docs.IMPORTS, docs.BADINPUT):
        head, rest = text.split(begin, 1)
        text = head.rsplit("\n", 2)[0] + "\n" + rest.split(end, 1)[1].lstrip("\n")
    page.write_text(text)
    assert docs.BADINPUT[0] not in text and docs.IMPORTS[0] not in text
    assert any("eviction.md" in s for s in docs.check(tmp_path / "docs"))
    docs.write(tmp_path / "docs")
    assert page.read_text() == (DOCS_DIR / "eviction.md").read_text()
    assert docs.check(tmp_path / "docs") == []


# A number or line still to be filled in: a helper's marker (``MECHANICAL_LINE``), a TODO, "TBD".
PLACEHOLDER = re.compile(r"\b[A-Z]+_(?:PLACEHOLDER|LINE)\b|\bPLACEHOLDER\b|\bTODO\b|\bTBD\b|\bXXX\b")


def test_no_docs_page_holds_a_placeholder():
    """No page of docs/ nor the README states a number still to be filled in."""
    pages = sorted(DOCS_DIR.glob("*.md")) + [ROOT / "README.md"]
    found = [f"{p.relative_to(ROOT)}:{i}: {line.strip()[:80]}" for p in pages
             for i, line in enumerate(p.read_text().splitlines(), 1) if PLACEHOLDER.search(line)]
    assert not found, "placeholders in the docs:\n" + "\n".join(found)


@pytest.mark.parametrize("cid", list(CONCEPTS))
def test_every_page_says_what_its_spec_cannot_see(cid):
    """Issue 22, item 5: each concept page has a "What this spec cannot see" section with content,
    so that a reader knows the limits of a green verdict."""
    text = (DOCS_DIR / f"{cid}.md").read_text()
    m = re.search(r"^(#{2,3}) What th(?:is|e) spec cannot see\n", text, re.M)
    assert m, f"docs/{cid}.md has no '## What this spec cannot see' section"
    body = re.split(r"^#{2,3} ", text[m.end():], maxsplit=1, flags=re.M)[0].strip()
    assert len(body) >= 200, f"docs/{cid}.md: the 'What this spec cannot see' section is nearly empty: {body!r}"
