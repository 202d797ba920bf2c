"""Global batches: step k of an epoch is the same samples on any world, a
job stopped between steps and resumed on other worlds trains on the
uninterrupted job's steps, and each batch says its share of its step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import actorfeed

SEQ_LEN = 16
GLOBAL = 7  # no world of 2 or 3 divides it: ranks' batches differ by one


def entry(tmp_path: Path) -> str:
    """A corpus of 400 sequences, token i of sequence s being s*1000 + i."""
    prefix = str(tmp_path / "web")
    lengths = [(s * 37) % 151 for s in range(400)]
    actorfeed.write_indexed(prefix, (np.arange(n) + 1000 * s for s, n in enumerate(lengths)), dtype="int32")
    return f"megatron(seq_len={SEQ_LEN}):{prefix}.bin"


def run(data: str, *, world: int, steps: int | None, resume: list[dict[str, Any]] | None
        ) -> tuple[list[list[tuple[int, list[int]]]], list[float], list[dict[str, Any]]]:
    """Every rank of a world for up to steps steps (None: the epoch's end):
    each step's (sample id, tokens) sorted by id, each step's shares summed
    over the ranks, and the ranks' state_dicts after."""
    got: list[list[tuple[int, list[int]]]] = []
    shares: list[float] = []
    states = []
    for rank in range(world):
        with actorfeed.Loader(data, global_batch=GLOBAL, seed=3, rank=rank, world=world) as loader:
            if resume is not None:
                loader.load_state_dict(resume)
            assert loader.batch_size == GLOBAL // world + (rank < GLOBAL % world)
            for k, b in enumerate(loader):
                if k == len(got):
                    got.append([])
                    shares.append(0.0)
                got[k] += zip(b["ids"].tolist(), b["tokens"].tolist())
                shares[k] += b.step_share
                if steps is not None and k + 1 == steps:
                    break
            states.append(loader.state_dict())
    return [sorted(s) for s in got], shares, states


def test_global_steps_survive_a_resize(tmp_path: Path) -> None:
    data = entry(tmp_path)
    whole, shares, _ = run(data, world=1, steps=None, resume=None)
    assert whole and all(len(s) == GLOBAL for s in whole)
    assert shares == pytest.approx([1.0] * len(whole))
    two, _, states = run(data, world=2, steps=9, resume=None)
    three, shares, states = run(data, world=3, steps=5, resume=states)
    assert shares == pytest.approx([1.0] * 5)
    rest, _, _ = run(data, world=1, steps=None, resume=states)
    assert two + three + rest == whole


def test_global_batch_and_batch_size_exclude_each_other(tmp_path: Path) -> None:
    data = entry(tmp_path)
    with pytest.raises(ValueError, match="give batch_size .* or global_batch"):
        actorfeed.Loader(data, batch_size=4, global_batch=8)
    with pytest.raises(ValueError, match="global_batch=2 is out of range"):
        actorfeed.Loader(data, global_batch=2, rank=0, world=3)
