"""The rule that finds the binary: ACTORFEED_BIN, then the one the wheel
carries, then PATH; and a wheel that carries its engine, installed and run
where there is no Go."""

import os
import subprocess
import sys
import zipfile

import pytest

from actorfeed import _binary
from conftest import REPO


def test_env_names_the_binary(binary, monkeypatch, tmp_path):
    monkeypatch.setenv("ACTORFEED_BIN", binary)
    assert _binary.find_binary() == binary
    monkeypatch.setenv("ACTORFEED_BIN", str(tmp_path / "none"))
    with pytest.raises(FileNotFoundError, match="ACTORFEED_BIN"):
        _binary.find_binary()


def test_the_package_s_own_binary_comes_next(binary, monkeypatch, tmp_path):
    """The package under test was installed from its wheel (./dev.sh)."""
    monkeypatch.delenv("ACTORFEED_BIN")
    os.symlink(binary, tmp_path / "actorfeed")
    monkeypatch.setenv("PATH", str(tmp_path))
    found = _binary.find_binary()
    assert found == _binary.PACKAGED and found.startswith(sys.prefix)
    out = subprocess.run([found, "feed", "--help"], capture_output=True, text=True, check=True).stdout
    assert "--fd" in out


def test_path_comes_last_and_nothing_is_built(binary, monkeypatch, tmp_path):
    monkeypatch.delenv("ACTORFEED_BIN")
    monkeypatch.setattr(_binary, "PACKAGED", str(tmp_path / "not-installed"))
    os.symlink(binary, tmp_path / "actorfeed")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert _binary.find_binary() == str(tmp_path / "actorfeed")
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable))  # no actorfeed there; go is not looked for
    with pytest.raises(FileNotFoundError, match="not installed from its wheel"):
        _binary.find_binary()


def test_a_wheel_carries_its_engine_to_a_machine_without_go(data, tmp_path):
    """pip wheel builds a platform wheel with the binary inside; a venv of
    Debian's interpreter installs it and reads batches with no go, no
    ACTORFEED_BIN and no cache of a build anywhere it can look."""
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-build-isolation", "--no-index",
                    "--no-deps", "-w", str(wheels), os.path.join(REPO, "python")],
                   check=True, stdin=subprocess.DEVNULL)
    [whl] = os.listdir(wheels)
    assert whl.startswith("actorfeed-") and whl.endswith("-py3-none-linux_x86_64.whl"), whl
    with zipfile.ZipFile(wheels / whl) as z:
        mode = z.getinfo("actorfeed/bin/actorfeed").external_attr >> 16
    assert mode & 0o111, "the binary is executable"

    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)], check=True)
    bare = {"PATH": f"{venv}/bin:/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    subprocess.run([f"{venv}/bin/python", "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
                    str(wheels / whl)], check=True, env=bare, stdin=subprocess.DEVNULL)
    script = ("import actorfeed, actorfeed._binary as b, sys\n"
              "with actorfeed.Loader(sys.argv[1], batch_size=100) as loader:\n"
              "    n = sum(len(x['ids']) for x in loader)\n"
              "print(n, b.find_binary())\n")
    out = subprocess.run([f"{venv}/bin/python", "-c", script, data], check=True, env=bare, capture_output=True,
                         text=True, stdin=subprocess.DEVNULL).stdout.split()
    assert out[0] == "2000"
    assert out[1].startswith(str(venv)) and out[1].endswith("actorfeed/bin/actorfeed")
    assert not (tmp_path / ".cache").exists(), "nothing was built at run time"
