"""The GPT example: a SentencePiece model trained on a Debian text, the text
tokenized into a Megatron-LM indexed dataset, and a small GPT trained on it
by torch.distributed (gloo) with a global batch. Killed mid-epoch as 2
processes, resumed as 3, killed again and resumed as 1, it trains at every
step on the same samples as the uninterrupted job, so its loss is the same
at every step (within 1e-4), and every sample of the epoch once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO
from test_example import torchrun

TEXT = "/usr/share/games/fortunes/computers"  # Debian's fortunes package
EXAMPLES = os.path.join(REPO, "python", "examples")


def losses(job: Path) -> list[tuple[int, float]]:
    with open(job / "loss.jsonl") as f:
        return [(d["step"], d["loss"]) for d in map(json.loads, f)]


def test_a_resized_job_has_the_uninterrupted_loss_curve(binary: str, tmp_path: Path) -> None:
    assert os.path.exists(TEXT), "apt-get install fortunes (.ci/run installs it)"
    prefix = tmp_path / "fortunes_text_document"
    subprocess.run([sys.executable, os.path.join(EXAMPLES, "tokenize_text.py"), "--text", TEXT,
                    "--model", str(tmp_path / "spm"), "--out", str(prefix)], check=True, timeout=300)
    data = f"megatron(seq_len=32):{prefix}.bin"
    train = os.path.join(EXAMPLES, "train_gpt.py")
    whole = tmp_path / "whole"
    run = torchrun(2, "--data", data, str(whole), example=train)
    assert run.returncode == 0, run.stderr[-3000:]
    job = tmp_path / "job"
    for world, kill in [(2, 25), (3, 57)]:
        killed = torchrun(world, "--data", data, "--kill-at", str(kill), str(job), example=train)
        assert killed.returncode != 0 and "SIGKILL" in killed.stdout + killed.stderr, killed.stderr[-3000:]
    resumed = torchrun(1, "--data", data, str(job), example=train)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    want, got = losses(whole), losses(job)
    assert [s for s, _ in got] == [s for s, _ in want] == list(range(len(want)))
    for (step, a), (_, b) in zip(want, got):
        assert abs(a - b) <= 1e-4 * abs(a), f"step {step}: {a} uninterrupted, {b} resized"
    final = float(resumed.stdout.split("loss ")[1].split()[0])
    assert final < 6.5, resumed.stdout[-500:]  # from ln(2000) = 7.6
    ids = sorted(str(job / f) for f in os.listdir(job) if f.startswith("ids-"))
    verify = subprocess.run([binary, "verify-ids", "--data", data, "--epochs", "1"] + ids,
                            capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "every record of 1 epoch(s) delivered exactly once" in verify.stdout
