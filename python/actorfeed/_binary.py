"""Finding the actorfeed binary the loader runs (docs/python.md):
ACTORFEED_BIN, then the one the package was built with, then
`actorfeed` on PATH. Nothing is built at run time."""

from __future__ import annotations

import os
import shutil

PACKAGED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "actorfeed")


def find_binary() -> str:
    """The path of the actorfeed binary, found by the rule above."""
    env = os.environ.get("ACTORFEED_BIN")
    if env:
        if not (os.path.isfile(env) and os.access(env, os.X_OK)):
            raise FileNotFoundError(f"ACTORFEED_BIN={env} is not an executable file")
        return env
    if os.path.isfile(PACKAGED) and os.access(PACKAGED, os.X_OK):
        return PACKAGED
    on_path = shutil.which("actorfeed")
    if on_path:
        return on_path
    raise FileNotFoundError(
        "no actorfeed binary: this actorfeed package was not installed from its wheel "
        "(python3 -m pip install ./python builds one with the binary), and neither ACTORFEED_BIN "
        "nor PATH names one (go build -o actorfeed ./cmd/actorfeed in the repository)")
