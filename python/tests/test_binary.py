"""The rule that finds the binary: ACTORFEED_BIN, then PATH, then built
from the repository."""

import os
import shutil
import subprocess

import pytest

from actorfeed import _binary


def test_env_names_the_binary(binary, monkeypatch, tmp_path):
    monkeypatch.setenv("ACTORFEED_BIN", binary)
    assert _binary.find_binary() == binary
    monkeypatch.setenv("ACTORFEED_BIN", str(tmp_path / "none"))
    with pytest.raises(FileNotFoundError, match="ACTORFEED_BIN"):
        _binary.find_binary()


def test_path_comes_next(binary, monkeypatch, tmp_path):
    monkeypatch.delenv("ACTORFEED_BIN")
    os.symlink(binary, tmp_path / "actorfeed")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert _binary.find_binary() == str(tmp_path / "actorfeed")


def test_built_from_the_repository_last(binary, monkeypatch, tmp_path):
    go = shutil.which("go")
    # The build cache stays where it is: only the binary goes to the new cache.
    gocache = subprocess.run([go, "env", "GOCACHE"], capture_output=True, text=True, check=True).stdout.strip()
    monkeypatch.setenv("GOCACHE", gocache)
    monkeypatch.delenv("ACTORFEED_BIN")
    path = os.pathsep.join([os.path.dirname(go), "/usr/bin", "/bin"])  # gcc too: the same build as before
    assert shutil.which("actorfeed", path=path) is None
    monkeypatch.setenv("PATH", path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(_binary, "_built", {})
    built = _binary.find_binary()
    assert built.startswith(str(tmp_path))
    out = subprocess.run([built, "feed", "--help"], capture_output=True, text=True, check=True).stdout
    assert "--fd" in out
    assert _binary.find_binary() == built, "built once a process"
