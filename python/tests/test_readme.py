"""The README's Python section runs as written: the install command, the
loop, and the example trainer with the check of its ids."""

import contextlib
import io
import os
import re
import subprocess
import sys

import actorfeed
from conftest import REPO


def blocks(lang, heading="From PyTorch"):
    with open(os.path.join(REPO, "README.md")) as f:
        readme = f.read()
    section = readme.split("## " + heading, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```%s\n(.*?)```" % lang, section, re.S)


def workdir(binary, fashion_recordio, tmp_path):
    """A directory laid out as the README's commands expect: the command
    built as ./actorfeed, the package's sources at python/, and
    out/train.recordio as the README's convert command writes it."""
    os.symlink(binary, tmp_path / "actorfeed")
    os.symlink(os.path.join(REPO, "python"), tmp_path / "python")
    os.mkdir(tmp_path / "out")
    os.symlink(fashion_recordio, tmp_path / "out" / "train.recordio")
    return tmp_path


def run_sh(block, cwd):
    # python3 is this interpreter: the venv the package is installed in.
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    return subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def test_readme_python_section_runs(binary, fashion_recordio, tmp_path):
    install, trainer = blocks("sh")
    [loop] = blocks("python")
    assert "pip install" in install and "torch.distributed.run" in trainer
    cwd = workdir(binary, fashion_recordio, tmp_path)
    res = run_sh(install + "python3 -c 'import actorfeed'\n", cwd)
    assert res.returncode == 0, res.stderr
    steps = []
    old = os.getcwd()
    os.chdir(cwd)
    try:
        exec(loop, {"train_step": lambda images, labels: steps.append(len(labels))})
    finally:
        os.chdir(old)
    assert sum(steps) == 2 * 60000

    res = run_sh(trainer, cwd)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "every record of 2 epoch(s) delivered exactly once" in res.stdout
    assert "test accuracy" in res.stdout


def test_readme_language_model_section_runs(binary, tmp_path):
    """The README's token corpus: written by write_indexed, read by the
    Loader as packed samples, then run and checked by verify-ids."""
    [write_and_load, global_batch] = blocks("python", "Language-model data")
    [run_and_verify] = blocks("sh", "Language-model data")
    os.symlink(binary, tmp_path / "actorfeed")
    os.mkdir(tmp_path / "out")
    shapes = []
    old = os.getcwd()
    os.chdir(tmp_path)
    printed = io.StringIO()
    try:
        exec(write_and_load, {"train_step": lambda tokens, positions: shapes.append(
            (tuple(tokens.shape), str(tokens.dtype), tuple(positions.shape)))})
        with contextlib.redirect_stdout(printed):
            exec(global_batch, {"actorfeed": actorfeed})
    finally:
        os.chdir(old)
    assert shapes and shapes[0] == ((8, 1025), "torch.int64", (8, 1025))
    assert printed.getvalue().splitlines() == ["0 3 0 0.375", "1 3 0 0.375", "2 2 0 0.25"]
    res = run_sh(run_and_verify, tmp_path)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "every record of 2 epoch(s) delivered exactly once" in res.stdout
