"""Weighted mixtures: data as (weight, file) pairs blends corpora in the
weights' proportions at every global step, the small corpus runs through
epochs of its own, the weights change at a named step, and a blended job
resized between steps trains on the uninterrupted job's steps."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import actorfeed

SEQ_LEN = 8
GLOBAL = 10


def corpora(tmp_path: Path) -> list[tuple[float, str]]:
    """web: 300 sequences whose tokens are below 100,000; code: 20 whose
    tokens are 100,000 and up, so a sample says which corpus it is of."""
    web, code = str(tmp_path / "web"), str(tmp_path / "code")
    actorfeed.write_indexed(web, (np.arange(1 + s % 40) + 100 * s for s in range(300)), dtype="int32")
    actorfeed.write_indexed(code, (np.arange(1 + s % 30) + 100_000 + 100 * s for s in range(20)), dtype="int32")
    return [(0.7, f"megatron(seq_len={SEQ_LEN}):{web}.bin"), (0.3, f"megatron(seq_len={SEQ_LEN}):{code}.bin")]


def run(data: list[tuple[float, str]], *, world: int, steps: int | None, resume: list[dict[str, Any]] | None,
        service: list[str] | None = None) -> tuple[list[list[tuple[int, list[int]]]], list[dict[str, Any]]]:
    """Every rank of a world for up to steps steps (None: the epoch's
    end), through service's workers if given: each step's (sample id,
    tokens) sorted, and the ranks' states."""
    got: list[list[tuple[int, list[int]]]] = []
    states = []
    for rank in range(world):
        with actorfeed.Loader(data, global_batch=GLOBAL, seed=5, rank=rank, world=world, torch=True,
                              weights_from=[(12, [0.1, 0.9])], service=service) as loader:
            if resume is not None:
                loader.load_state_dict(resume)
            for k, b in enumerate(loader):
                if k == len(got):
                    got.append([])
                got[k] += zip(b["ids"].tolist(), b["tokens"].tolist())
                if steps is not None and k + 1 == steps:
                    break
            states.append(loader.state_dict())
    return [sorted(s) for s in got], states


def test_blend_keeps_its_weights_and_steps_across_a_resize(tmp_path: Path) -> None:
    data = corpora(tmp_path)
    whole, _ = run(data, world=1, steps=None, resume=None)
    assert len(whole) > 12
    for k, step in enumerate(whole):
        of_code = sum(1 for _, tokens in step if tokens[0] >= 100_000)
        share = 0.3 if k < 12 else 0.9
        assert abs(of_code - share * GLOBAL) < 2.5, f"step {k}: {of_code} samples of code"
    two, states = run(data, world=2, steps=7, resume=None)
    three, states = run(data, world=3, steps=4, resume=states)
    rest, _ = run(data, world=1, steps=None, resume=states)
    assert two + three + rest == whole
    # code holds 20 sequences, about 37 samples: a blended epoch runs it
    # through several epochs of its own, each in an order of its own.
    firsts = {i & ((1 << 40) - 1): t[0] for step in whole for i, t in step if t[0] >= 100_000}
    assert sorted(firsts) == list(range(len(firsts))) and len(firsts) > 80
    n = (sum(1 + s % 30 for s in range(20)) - 1) // SEQ_LEN  # code's samples an epoch of its own
    assert [firsts[q] for q in range(n)] != [firsts[q] for q in range(n, 2 * n)]


def test_blend_reads_through_service_workers(tmp_path: Path, binary: str) -> None:
    """Two ranks of the blend, its weights changing at step 12, read
    through an actorfeed serve worker train on the steps of one process."""
    data = corpora(tmp_path)
    whole, _ = run(data, world=1, steps=None, resume=None)
    p = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--root", str(tmp_path)],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert p.stdout is not None
        line = p.stdout.readline()
        assert line.startswith("serving on "), line
        served, _ = run(data, world=2, steps=None, resume=None, service=[line.split()[2].rstrip(",")])
    finally:
        p.terminate()
        p.communicate(timeout=10)
    assert served == whole


def test_blend_refuses_what_it_cannot_blend(tmp_path: Path) -> None:
    data = corpora(tmp_path)
    with pytest.raises(ValueError, match="not a .weight, file. pair"):
        actorfeed.Loader([(-1.0, data[0][1]), data[1]], global_batch=GLOBAL)
    with pytest.raises(ValueError, match="weights_from names global steps"):
        actorfeed.Loader(data, batch_size=4, weights_from=[(3, [1, 0])])
    with pytest.raises(ValueError, match="weights_from: .* is not"):
        actorfeed.Loader(data, global_batch=GLOBAL, weights_from=[(3, [1])])
