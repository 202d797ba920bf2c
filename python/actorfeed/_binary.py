"""Finding the actorfeed binary the loader runs (docs/python.md):
ACTORFEED_BIN, then `actorfeed` on PATH, then built from the repository
with `go build`, once per process, into the user's cache."""

from __future__ import annotations

import hashlib
import importlib
import os
import shutil
import subprocess
import threading

_built: dict[str, str] = {}
_lock = threading.Lock()


def _repository() -> str | None:
    """The checkout the package belongs to: ACTORFEED_REPO, the one recorded
    at install, or the one this file sits in."""
    env = os.environ.get("ACTORFEED_REPO")
    if env:
        return env
    try:
        # Written by setup.py at install, so absent from a checkout: looked
        # up by name, which a type checker need not find.
        repo = str(importlib.import_module(f"{__package__}._repo").REPO)
        if os.path.isfile(os.path.join(repo, "go.mod")):
            return repo
    except ImportError:
        pass
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if os.path.isfile(os.path.join(here, "go.mod")) and os.path.isdir(os.path.join(here, "cmd", "actorfeed")):
        return here
    return None


def find_binary() -> str:
    """The path of the actorfeed binary, found or built by the rule above."""
    env = os.environ.get("ACTORFEED_BIN")
    if env:
        if not (os.path.isfile(env) and os.access(env, os.X_OK)):
            raise FileNotFoundError(f"ACTORFEED_BIN={env} is not an executable file")
        return env
    on_path = shutil.which("actorfeed")
    if on_path:
        return on_path
    repo = _repository()
    if repo is None:
        raise FileNotFoundError(
            "no actorfeed binary: set ACTORFEED_BIN, put actorfeed on PATH "
            "(go build -o actorfeed ./cmd/actorfeed in the repository), or set ACTORFEED_REPO to a checkout")
    return _build(repo)


def _build(repo: str) -> str:
    with _lock:
        if repo in _built:
            return _built[repo]
        go = shutil.which("go")
        if go is None:
            raise FileNotFoundError(
                f"no actorfeed binary and no go to build one from {repo}: set ACTORFEED_BIN or put actorfeed on PATH")
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        key = hashlib.sha256(os.path.abspath(repo).encode()).hexdigest()[:16]
        out = os.path.join(cache, "actorfeed", key, "actorfeed")
        os.makedirs(os.path.dirname(out), exist_ok=True)
        # go build writes its output whole (a temporary file renamed into
        # place), and is a no-op when nothing changed.
        res = subprocess.run([go, "build", "-o", out, "./cmd/actorfeed"], cwd=repo,
                             stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if res.returncode != 0:
            last = (res.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise RuntimeError(f"building actorfeed in {repo} failed: {last}")
        _built[repo] = out
        return out
