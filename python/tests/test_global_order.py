"""The global order (run --shuffle all, Loader(shuffle="all")) over 10,000
samples (past the 4,096 whose permutation is a table: the Feistel network)
against numpy's uniform permutations: where samples land, which samples
share a batch, and how one epoch relates to the next, each by a chi-square
test at significance 0.001; and the Loader gives run's order."""

from __future__ import annotations

import json
import math
import subprocess
import warnings
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

import actorfeed

FILES, PER_FILE, BATCH, EPOCHS, SEED = 2, 5000, 10, 60, 3
N = FILES * PER_FILE
BINS = 20

Orders = npt.NDArray[np.int64]  # [epoch, position]: the data set index of the sample there
Table = npt.NDArray[np.float64]


@pytest.fixture(scope="module")
def idx_data(binary: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """gen's samples as IDX pairs, which the global order reads by position."""
    out = tmp_path_factory.mktemp("idx")
    subprocess.run([binary, "gen", "--to", "idx", "--out", str(out), "--files", str(FILES), "--samples", str(N)],
                   check=True, stdout=subprocess.DEVNULL)
    return str(out / "*images*")


@pytest.fixture(scope="module")
def orders(binary: str, idx_data: str, tmp_path_factory: pytest.TempPathFactory) -> Orders:
    """run --shuffle all's epochs: [EPOCHS, N], the data set index (file
    after file) of the sample at each position."""
    ids = tmp_path_factory.mktemp("ids") / "ids.jsonl"
    subprocess.run([binary, "run", "--data", idx_data, "--shuffle", "all", "--seed", str(SEED), "--batch", str(BATCH),
                    "--passes", str(EPOCHS), "--devices", "1", "--emit-ids", str(ids)], check=True,
                   stdout=subprocess.DEVNULL)
    batches: dict[int, list[tuple[int, list[int]]]] = {}
    for line in Path(ids).read_text().splitlines():
        rec = json.loads(line)
        if "ids" in rec:
            batches.setdefault(rec["epoch"], []).append((rec["seq"], [index(i) for i in rec["ids"]]))
    assert sorted(batches) == list(range(EPOCHS))
    return np.array([[i for _, b in sorted(batches[e]) for i in b] for e in range(EPOCHS)], dtype=np.int64)


def index(sample_id: str) -> int:
    """The data set index of a sample id, part-0000F-images-idx3-ubyte#R."""
    name, record = sample_id.rsplit("#", 1)
    return int(name.split("-")[1]) * PER_FILE + int(record)


def numpy_orders() -> Orders:
    """The reference: EPOCHS uniform permutations of N, numpy's."""
    rng = np.random.default_rng(SEED)
    return np.array([rng.permutation(N) for _ in range(EPOCHS)], dtype=np.int64)


def critical(df: int) -> float:
    """The chi-square value exceeded with probability 0.001 at df degrees of
    freedom (Wilson and Hilferty's approximation)."""
    z = 3.0902
    c = 1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))
    return df * c**3


def two_sample(a: Table, b: Table) -> float:
    """The chi-square statistic of two histograms of equal totals coming
    from one distribution (df: the bins with counts, less one)."""
    x, y = a.ravel(), b.ravel()
    both = x + y > 0
    return float(((x[both] - y[both]) ** 2 / (x[both] + y[both])).sum())


def placement(o: Orders) -> Table:
    """Where samples land: a BINS x BINS table of (data set index, position)."""
    pos = np.broadcast_to(np.arange(N), o.shape)
    table: Table = np.histogram2d(o.ravel(), pos.ravel(), bins=BINS, range=[[0, N], [0, N]])[0]
    return table


def test_samples_land_anywhere_as_numpy_s(orders: Orders) -> None:
    assert all(sorted(e) == list(range(N)) for e in orders.tolist()), "each epoch is a permutation"
    stat = two_sample(placement(orders), placement(numpy_orders()))
    assert stat < critical(BINS * BINS - 1), f"chi-square {stat:.1f} over {BINS * BINS - 1} degrees of freedom"


def neighbours_batched(o: Orders) -> int:
    """How often samples i and i+1 of the data set share a batch, over all
    epochs: a weak permutation keeps neighbours together."""
    batch_of = np.empty_like(o)
    for e, order in enumerate(o):
        batch_of[e, order] = np.arange(N) // BATCH
    return int((batch_of[:, :-1] == batch_of[:, 1:]).sum())


def test_neighbours_share_batches_as_often_as_in_numpy_s(orders: Orders) -> None:
    pairs = EPOCHS * (N - 1)
    ours, theirs = neighbours_batched(orders), neighbours_batched(numpy_orders())
    table = np.array([[ours, pairs - ours], [theirs, pairs - theirs]], dtype=float)
    expected = table.sum(axis=1, keepdims=True) * table.sum(axis=0, keepdims=True) / table.sum()
    stat = float(((table - expected) ** 2 / expected).sum())
    assert stat < critical(1), f"neighbours batched {ours} times, numpy's {theirs}: chi-square {stat:.1f}"


def successions(o: Orders) -> Table:
    """A sample's position in an epoch against its position in the next,
    BINS x BINS, over every pair of consecutive epochs."""
    where = np.empty_like(o)
    for e, order in enumerate(o):
        where[e, order] = np.arange(N)
    table: Table = np.histogram2d(where[:-1].ravel(), where[1:].ravel(), bins=BINS, range=[[0, N], [0, N]])[0]
    return table


def test_consecutive_epochs_are_unrelated_as_numpy_s(orders: Orders) -> None:
    stat = two_sample(successions(orders), successions(numpy_orders()))
    assert stat < critical(BINS * BINS - 1), f"chi-square {stat:.1f} over {BINS * BINS - 1} degrees of freedom"


def test_seeds_give_unrelated_orders(idx_data: str, orders: Orders) -> None:
    with actorfeed.Loader(idx_data, batch_size=BATCH, shuffle="all", seed=SEED + 1) as loader:
        other = np.array([index_of(i) for b in loader for i in b["ids"].tolist()])
    first = np.empty(N, dtype=int)
    first[orders[0]] = np.arange(N)
    second = np.empty(N, dtype=int)
    second[other] = np.arange(N)
    r = float(np.corrcoef(first, second)[0, 1])
    assert abs(r) < 4 / math.sqrt(N), f"positions under seeds {SEED} and {SEED + 1} correlate: {r:.3f}"


def index_of(sample_id: int) -> int:
    """The data set index of a numeric sample id: file << 40 | record."""
    return (sample_id >> 40) * PER_FILE + (sample_id & ((1 << 40) - 1))


def test_loader_gives_run_s_order(idx_data: str, orders: Orders) -> None:
    with actorfeed.Loader(idx_data, batch_size=BATCH, shuffle="all", seed=SEED) as loader:
        for epoch in range(2):
            loader.set_epoch(epoch)
            got = [index_of(i) for b in loader for i in b["ids"].tolist()]
            assert got == orders[epoch].tolist(), f"epoch {epoch}"


def test_a_bad_shuffle_is_refused(idx_data: str) -> None:
    with pytest.raises(ValueError, match="shuffle"):
        actorfeed.Loader(idx_data, batch_size=BATCH, shuffle="everything")


def test_shuffle_true_is_the_global_order_where_the_files_allow(idx_data: str, orders: Orders, data: str) -> None:
    """shuffle=True is DataLoader's: the global order over IDX files, without
    a word; over RecordIO, which is not read by position, a window of 4,096
    samples, with a warning naming the file and what to do."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with actorfeed.Loader(idx_data, batch_size=BATCH, shuffle=True, seed=SEED) as loader:
            assert [index_of(i) for b in loader for i in b["ids"].tolist()] == orders[0].tolist()
    with pytest.warns(UserWarning, match=r"window of 4096 records, not the global order: .*\.recordio is RecordIO") as said:
        with actorfeed.Loader(data, batch_size=BATCH, shuffle=True, seed=SEED) as loader:
            got = [epoch_ids(loader) for _ in range(2)]
    assert len(said) == 1, "one warning a loader, not one an epoch"
    with actorfeed.Loader(data, batch_size=BATCH, shuffle=4096, seed=SEED) as loader:
        assert got == [epoch_ids(loader) for _ in range(2)]


def epoch_ids(loader: actorfeed.Loader) -> list[int]:
    """The ids of the rest of the loader's epoch."""
    return [i for b in loader for i in b["ids"].tolist()]
