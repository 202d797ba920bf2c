"""Records where the repository is, so that an installed package can build
the actorfeed binary from it when neither ACTORFEED_BIN nor PATH has one."""

import os

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.realpath(__file__))


class BuildPy(build_py):
    def run(self):
        super().run()
        target = os.path.join(self.build_lib, "actorfeed", "_repo.py")
        with open(target, "w") as f:
            f.write("# Written by setup.py at install: the repository the package came from.\n")
            f.write("REPO = %r\n" % os.path.dirname(HERE))


setup(cmdclass={"build_py": BuildPy})
