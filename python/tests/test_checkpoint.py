"""actorfeed.Checkpoint: one call saves the model, the optimizer and every
rank's loader state, one call resumes from them, and the record files a
job appends to are cut back to the checkpoint, every earlier job's kept."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

import actorfeed
from test_example import free_port


@pytest.fixture
def one_rank() -> Iterator[None]:
    """A torch.distributed world of this process alone (gloo)."""
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def job(data: str, out: Path, *, steps: int, save_at: int) -> tuple[int, list[str], float]:
    """A job of steps steps (or to the epoch's end) that checkpoints after
    step save_at: its first step, the ids it trained on, and a weight of
    its model as it began (1 more for every step trained before)."""
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ck = actorfeed.Checkpoint(out=str(out))
    with actorfeed.Loader(data, batch_size=50, seed=1, shuffle=False) as loader:
        epoch, step = ck.resume(loader=loader, model=model, opt=opt)
        first, weight = step, float(model.weight[0, 0])
        ids = ck.open(name=f"ids-{step}.jsonl")
        trained: list[str] = []
        for batch in loader:
            names = loader.sample_names(batch["ids"])
            ids.write(json.dumps({"epoch": batch.epoch, "device": 0, "seq": batch.index, "ids": names}) + "\n")
            trained += names
            step += 1
            model.weight.data += 1  # the model changes at every step
            if step == save_at:
                ck.save(loader=loader, model=model, opt=opt, epoch=epoch, step=step)
            if step == steps:
                break
        ck.close()
    return first, trained, weight


def test_a_job_killed_twice_resumes_at_its_checkpoints(binary: str, data: str, tmp_path: Path,
                                                       one_rank: None) -> None:
    out = tmp_path / "job"
    out.mkdir()
    # data is 2,000 samples: an epoch of 40 batches of 50.
    first, a, w0 = job(data, out, steps=15, save_at=10)  # dies at 15: steps 11-15 are lost
    assert first == 0 and len(a) == 15 * 50
    first, b, w = job(data, out, steps=30, save_at=25)  # resumes at 10, dies at 30
    assert first == 10 and b[0] == a[10 * 50] and w == pytest.approx(w0 + 10)
    first, c, w = job(data, out, steps=0, save_at=-1)  # resumes at 25, to the epoch's end
    assert first == 25 and c[0] == b[(25 - 10) * 50] and w == pytest.approx(w0 + 25)
    files = sorted(os.listdir(out))
    assert files == ["checkpoint.pt", "ids-0.jsonl", "ids-10.jsonl", "ids-25.jsonl"], files
    lines = [json.loads(line) for f in files[1:] for line in open(out / f)]
    assert [d["seq"] for d in lines] == list(range(40)), "each job's file cut back to its checkpoint"
    verify = actorfeed_verify(binary, data, [str(out / f) for f in files[1:]])
    assert "every record of 1 epoch(s) delivered exactly once" in verify


def actorfeed_verify(binary: str, data: str, ids: list[str]) -> str:
    run = subprocess.run([binary, "verify-ids", "--data", data, "--epochs", "1", *ids], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout
