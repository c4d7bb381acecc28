"""Where third-party engines' own code is found: fetched, never copied into this repository.

A wrapped engine's adapter (``spec_tests/<concept>/third_party_<name>.py``) declares at module
level ``UPSTREAM = ("owner/name", "<40-hex commit>", ("path/in/repo.py", ...))`` and loads those
files from :func:`locate`. The files live under ``$INFERSPEC_UPSTREAM`` (default
``<repository>/.upstream``, git-ignored) as ``<owner>+<name>@<commit[:12]>/<path>``;
``inferspec upstream`` fetches them (``git`` with network access). Where they are absent the
must-pass test of that adapter is skipped with this reason, never failed.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

ENV = "INFERSPEC_UPSTREAM"
DEFAULT = Path(__file__).resolve().parent.parent / ".upstream"


class Unavailable(LookupError):
    """The upstream files an adapter needs are not on this machine."""


def home() -> Path:
    return Path(os.environ.get(ENV) or DEFAULT)


def checkout_dir(repo: str, commit: str) -> Path:
    return home() / f"{repo.replace('/', '+')}@{commit[:12]}"


def locate(repo: str, commit: str, paths=()) -> Path:
    """The folder holding ``repo`` at ``commit`` with every one of ``paths``; raises
    :class:`Unavailable` naming the first missing file and the command that fetches it."""
    where = checkout_dir(repo, commit)
    for rel in paths:
        if not (where / rel).is_file():
            raise Unavailable(f"{repo}@{commit[:12]}: {rel} is not under {where} "
                              f"(fetch it with `inferspec upstream`, or set ${ENV})")
    return where


def fetch(repo: str, commit: str, paths=()) -> Path:
    """Fetch ``paths`` of ``repo`` at ``commit`` from GitHub with git (a shallow fetch of that one
    commit, then a checkout of only those paths)."""
    where = checkout_dir(repo, commit)
    where.mkdir(parents=True, exist_ok=True)
    git = ["git", "-C", str(where)]
    if not (where / ".git").exists():
        subprocess.run(git + ["init", "-q"], check=True)
        subprocess.run(git + ["remote", "add", "origin", f"https://github.com/{repo}.git"], check=True)
    subprocess.run(git + ["fetch", "-q", "--depth", "1", "origin", commit], check=True)
    subprocess.run(git + ["checkout", "-q", commit, "--", *paths], check=True)
    return locate(repo, commit, paths)
