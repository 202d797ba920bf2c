"""The example trainer: two processes of torch.distributed (gloo), killed
mid-epoch, resumed as three, killed again and resumed as two, reach the
accuracy a classifier of Fashion-MNIST should, and every sample of every
epoch was trained on exactly once: the second resume keeps the first
job's ids files, cut back to its checkpoint."""

import os
import socket
import subprocess
import sys
import uuid

from conftest import REPO

EXAMPLE = os.path.join(REPO, "python", "examples", "train_fashion_mnist.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(nproc, *args, example=EXAMPLE):
    # Debian's torch 1.13 on Python 3.11 cannot parse the launcher's
    # default --redirects and --tee of 0, so both are given. --standalone's
    # rendezvous is always localhost:29400: two suites on one machine
    # would join each other's jobs, so each job takes a port of its own.
    rdzv = ["--nnodes", "1", "--rdzv_backend", "c10d", "--rdzv_endpoint", "127.0.0.1:%d" % free_port(),
            "--rdzv_id", uuid.uuid4().hex]
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", *rdzv, "--nproc_per_node", str(nproc),
                           "--redirects", "1", "--tee", "1", "--log_dir", args[-1] + "-logs-%d" % nproc, example]
                          + list(args[:-1]) + ["--out", args[-1]], capture_output=True, text=True, timeout=600)


def test_killed_and_resumed_on_another_world(binary, fashion_recordio, tmp_path):
    data = fashion_recordio
    job = str(tmp_path / "job")
    for world, kill in [(2, 250), (3, 450)]:
        killed = torchrun(world, "--data", data, "--epochs", "2", "--kill-at", str(kill), job)
        assert killed.returncode != 0, f"rank 0 killed itself at step {kill}"
        assert "SIGKILL" in killed.stdout + killed.stderr
    resumed = torchrun(2, "--data", data, "--epochs", "2", job)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    line = [l for l in resumed.stdout.splitlines() if "test accuracy" in l][0]
    assert float(line.split("test accuracy ")[1].split()[0]) >= 0.80, line
    ids = sorted(os.path.join(job, f) for f in os.listdir(job) if f.startswith("ids-"))
    assert len(ids) == 7, "2 ranks' and 3 ranks' files cut back to their checkpoints, and 2 ranks' of the last job"
    verify = subprocess.run([binary, "verify-ids", "--data", data, "--epochs", "2"] + ids, capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "every record of 2 epoch(s) delivered exactly once" in verify.stdout
