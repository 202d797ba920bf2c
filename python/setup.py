"""Builds the actorfeed binary into the package as the wheel is built, so
that the installed package carries the engine it was built with and no
Loader builds anything at run time (docs/python.md, "Install and the
binary"). Building needs Go and this checkout, the Go module one directory
up; installing the wheel needs neither."""

from __future__ import annotations

import os
import shutil
import subprocess

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:
    from setuptools.command.bdist_wheel import bdist_wheel  # setuptools 70.1 and later
except ImportError:
    from wheel.bdist_wheel import bdist_wheel  # Debian 12's setuptools 66

REPO = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


class BuildPy(build_py):
    """Adds the binary, actorfeed/bin/actorfeed, to the package's files."""

    def run(self) -> None:
        super().run()
        build_binary(os.path.join(self.build_lib, "actorfeed", "bin", "actorfeed"))


class BinaryDistribution(Distribution):
    """A distribution with a platform's binary in it, installed as an
    extension module is (into platlib)."""

    def has_ext_modules(self) -> bool:
        return True


class PlatformWheel(bdist_wheel):
    """Tags the wheel with this platform, the binary's, for any Python 3."""

    def get_tag(self) -> tuple[str, str, str]:
        _, _, plat = super().get_tag()
        return "py3", "none", plat


def build_binary(target: str) -> None:
    """Builds cmd/actorfeed into target."""
    target = os.path.abspath(target)  # go build runs in the repository
    if not os.path.isfile(os.path.join(REPO, "go.mod")) or not os.path.isdir(os.path.join(REPO, "cmd", "actorfeed")):
        raise SystemExit(f"actorfeed: {REPO} is not a checkout of actorfeed: the wheel is built from one, "
                         "with python3 -m pip wheel ./python in its root")
    go = os.environ.get("GO") or shutil.which("go")
    if go is None:
        raise SystemExit("actorfeed: building the wheel builds its engine with Go 1.26, and no go is on PATH: "
                         "install Go or name it with GO=/path/to/go")
    os.makedirs(os.path.dirname(target), exist_ok=True)
    # Without cgo the binary needs no C compiler to build, and it still
    # loads libturbojpeg and CUDA at run time (purego).
    env = dict(os.environ, CGO_ENABLED=os.environ.get("CGO_ENABLED", "0"))
    res = subprocess.run([go, "build", "-trimpath", "-ldflags=-s -w", "-o", target, "./cmd/actorfeed"],
                         cwd=REPO, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"actorfeed: go build ./cmd/actorfeed in {REPO} failed:\n{res.stderr.strip()}")


setup(distclass=BinaryDistribution, cmdclass={"build_py": BuildPy, "bdist_wheel": PlatformWheel})
