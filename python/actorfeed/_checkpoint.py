"""Checkpoint: a torch.distributed job's model, optimizer and every rank's
loader state saved together, and the record files (ids, losses) each rank
appends to cut back to it on a resume, so that a job resumed on any number
of processes trains the steps after the checkpoint again and its records
show every sample once.

The files of every job since the first are kept: a checkpoint lists the
files of the jobs before it with the sizes they had when that job resumed,
so a second resume cuts only what the last job wrote after its checkpoint
and keeps the first job's record, which verify-ids needs whole.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    import torch

    from ._loader import Loader


class Checkpoint:
    """The checkpoint in directory out (out/checkpoint.pt), written whole (a
    temporary file renamed) or not at all by rank 0, and the record files
    this rank appends to (open). Every rank calls resume once before it
    trains and save at the same steps; torch.distributed must be
    initialised."""

    def __init__(self, *, out: str) -> None:
        self.out = out
        self.path = os.path.join(out, "checkpoint.pt")
        self.files: dict[str, TextIO] = {}
        self.before: list[tuple[str, int]] = []  # earlier jobs' files, as this job found them

    def resume(self, *, loader: Loader, model: torch.nn.Module,
               opt: torch.optim.Optimizer) -> tuple[int, int]:
        """Loads the checkpoint, if any, into model, opt and loader (every
        rank's loader state: the world may have changed), cuts the record
        files back to it (rank 0), and returns its epoch and step: (0, 0)
        where there is none."""
        import torch
        import torch.distributed as dist

        if not os.path.exists(self.path):
            return 0, 0
        ck = torch.load(self.path)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        loader.load_state_dict(ck["loaders"])
        kept = dict(ck["files"])
        if dist.get_rank() == 0:
            for name in os.listdir(self.out):
                f = os.path.join(self.out, name)
                if name.endswith(".jsonl") and f not in kept:
                    os.remove(f)  # begun after the checkpoint by a job that died
            for f, size in kept.items():
                os.truncate(f, size)
        dist.barrier()  # type: ignore[no-untyped-call]  # torch 1.13 has no annotations here
        self.before = list(kept.items())
        return int(ck["epoch"]), int(ck["step"])

    def open(self, *, name: str) -> TextIO:
        """Record file name in out, opened to append: a name an earlier job
        wrote goes on from where the checkpoint left it."""
        f = open(os.path.join(self.out, name), "a")
        self.files[name] = f
        return f

    def save(self, *, loader: Loader, model: torch.nn.Module, opt: torch.optim.Optimizer,
             epoch: int, step: int) -> None:
        """Saves rank 0's model and opt, the epoch and step to resume at,
        every rank's loader state, and the sizes of every rank's record
        files and of the earlier jobs'."""
        import torch
        import torch.distributed as dist

        for f in self.files.values():
            f.flush()
            os.fsync(f.fileno())
        mine = {"loader": loader.state_dict(), "files": [(f.name, f.tell()) for f in self.files.values()]}
        every: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(every, mine)  # type: ignore[no-untyped-call]
        if dist.get_rank() == 0:
            now = [kv for e in every for kv in e["files"]]
            open_now = {name for name, _ in now}
            files = [kv for kv in self.before if kv[0] not in open_now] + now
            tmp = self.path + ".tmp"
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "epoch": epoch, "step": step,
                        "loaders": [e["loader"] for e in every], "files": files}, tmp)
            os.replace(tmp, self.path)
        dist.barrier()  # type: ignore[no-untyped-call]

    def close(self) -> None:
        """Closes the record files."""
        for f in self.files.values():
            f.close()
