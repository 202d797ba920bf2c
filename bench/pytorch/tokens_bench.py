"""actorfeed's Loader over token corpora against the two loaders language
models use today, in one run, on the same synthetic Megatron-LM indexed
datasets: the time to the first batch, tokens/s delivered to a PyTorch
trainer at seq_len 2048, and the peak RSS, each contender in a process of
its own (docs/performance.md, "Token corpora").

    python3 bench/pytorch/tokens_bench.py [--tokens 1e7 1e9] [--corpora 1 10] [--rounds 3]

Contenders:
- the Loader: megatron(seq_len=S) entries, one a corpus, in the global
  order (shuffle=True), torch tensors;
- the Loader, blend: the same corpora as a weighted mixture, weights 1 to
  N (docs/tokens.md, "Weighted mixtures"), over several corpora only;
- Megatron-style: Megatron-LM's GPTDataset index building as it is
  published, in NumPy (a document index shuffled for the epoch, a sample
  index of where each sample of S+1 tokens starts in it, a shuffle index
  over the samples), for every corpus, then samples read through np.memmap;
- nanoGPT-style: np.memmap of each .bin and random offsets, as nanoGPT's
  get_batch does (no epoch: samples repeat and are missed).

The corpora are sparse files: documents of 1 to 1,999 tokens (1,000 on
average) whose .bin is a hole of the right size, so that 10^9 tokens take
no disk. Each contender prints the seconds from its start (torch and
actorfeed imported) to its first batch, its tokens/s over the batches after it, and its peak RSS: the
process's, plus its feed's for the Loader. Each contender runs once a
round, the contenders in turn, and the table gives the median of its
rounds: a timed window is a tenth of a second or less, and a shared
machine's speed moves from one minute to the next."""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

SEQ_LEN, BATCH = 2048, 8


def write_corpus(prefix: str, tokens: int, seed: int) -> None:
    """A uint16 indexed dataset of about tokens tokens in documents of 1 to
    1,999 tokens, its .bin a hole (a sparse file of the right size)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 2000, size=max(1, tokens // 1000), dtype=np.int64)
    pointers = np.zeros(len(lengths), dtype="<i8")
    pointers[1:] = np.cumsum(lengths[:-1] * 2)
    with open(f"{prefix}.idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, len(lengths), len(lengths) + 1))
        f.write(lengths.astype("<i4").tobytes())
        f.write(pointers.tobytes())
        f.write(np.arange(len(lengths) + 1, dtype="<i8").tobytes())
    with open(f"{prefix}.bin", "wb") as f:
        f.truncate(int(lengths.sum()) * 2)


def peak_rss_mb(child_kb: int = 0) -> float:
    """This process's peak RSS plus child_kb (a child's own peak), in MB."""
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss + child_kb) / 1024


def vm_hwm_kb(pid: int) -> int:
    """A live process's peak RSS since its exec, in KB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmHWM for process {pid}")


def loader(prefixes: list[str], batches: int, start: float, *, blend: bool = False) -> dict[str, float]:
    import actorfeed

    data: list[Any] = [f"megatron(seq_len={SEQ_LEN}):{p}.bin" for p in prefixes]
    if blend:  # weights 1, 2, ..., one a corpus: a weighted mixture, not their concatenation
        data = [(float(c + 1), e) for c, e in enumerate(data)]
    with actorfeed.Loader(data, batch_size=BATCH, seed=1, torch=True) as lo:
        it = iter(lo)
        first = next(it)
        assert tuple(first["tokens"].shape) == (BATCH, SEQ_LEN + 1)
        t_first = time.perf_counter() - start
        got = timed(it, batches, lambda b: b["tokens"])
        feed = vm_hwm_kb(lo._feed.proc.pid)
    return dict(first=t_first, tokens_per_s=got, rss=peak_rss_mb(feed))


def timed(batches: Iterator[Any], n: int, tokens: Any) -> float:
    """Tokens/s over the next n batches, each touched as a trainer would."""
    t0, seen = time.perf_counter(), 0
    for _ in range(n):
        t = tokens(next(batches))
        seen += int(t.numel())
        int(t[:, -1].sum())
    return seen / (time.perf_counter() - t0)


class MegatronStyle:
    """Megatron-LM's GPTDataset indexes for one epoch of the corpus at
    prefix, built as published: the document index (the documents,
    shuffled), the sample index (each sample's first document and offset
    into it) and the shuffle index (the samples, shuffled); and the .bin
    and .idx, mapped."""

    def __init__(self, prefix: str, rng: np.random.Generator) -> None:
        raw = np.memmap(f"{prefix}.idx", mode="r", dtype=np.uint8)
        n = int(np.frombuffer(raw[18:26].tobytes(), dtype="<u8")[0])
        self.lengths = np.frombuffer(raw, dtype="<i4", count=n, offset=34).astype(np.int64)
        self.pointers = np.frombuffer(raw, dtype="<i8", count=n, offset=34 + 4 * n)
        self.document = rng.permutation(n).astype(np.int32)
        ends = np.cumsum(self.lengths[self.document])
        samples = (int(ends[-1]) - 1) // SEQ_LEN
        starts = np.arange(samples + 1, dtype=np.int64) * SEQ_LEN
        doc = np.searchsorted(ends, starts, side="right")
        self.sample = np.stack([doc, starts - (ends[doc] - self.lengths[self.document[doc]])], axis=1)
        self.shuffle = rng.permutation(samples).astype(np.int64)
        self.bin = np.memmap(f"{prefix}.bin", mode="r", dtype="<u2")

    def get(self, k: int) -> npt.NDArray[np.int64]:
        """The k-th sample of the epoch, S+1 tokens read document after
        document as GPTDataset reads them."""
        i = int(self.shuffle[k % len(self.shuffle)])
        (d0, o0), (d1, o1) = self.sample[i], self.sample[i + 1]
        parts = []
        for d in range(int(d0), int(d1) + 1):
            seq = int(self.document[d])
            lo = int(o0) if d == d0 else 0
            hi = int(o1) + 1 if d == d1 else int(self.lengths[seq])
            at = int(self.pointers[seq]) // 2
            parts.append(self.bin[at + lo:at + hi])
        out: npt.NDArray[np.int64] = np.concatenate(parts).astype(np.int64)
        return out


def megatron(prefixes: list[str], batches: int, start: float) -> dict[str, float]:
    import torch

    rng = np.random.default_rng(1)
    built = [MegatronStyle(p, rng) for p in prefixes]

    def batches_of() -> Iterator[Any]:
        k = 0
        while True:
            rows = []
            for _ in range(BATCH):
                rows.append(torch.from_numpy(built[k % len(built)].get(k // len(built))))
                k += 1
            yield torch.stack(rows)

    it = batches_of()
    first = next(it)
    assert tuple(first.shape) == (BATCH, SEQ_LEN + 1)
    t_first = time.perf_counter() - start
    return dict(first=t_first, tokens_per_s=timed(it, batches, lambda b: b), rss=peak_rss_mb())


def nanogpt(prefixes: list[str], batches: int, start: float) -> dict[str, float]:
    import torch

    data = [np.memmap(f"{p}.bin", mode="r", dtype=np.uint16) for p in prefixes]
    gen = torch.Generator().manual_seed(1)

    def batches_of() -> Iterator[Any]:
        k = 0
        while True:
            d = data[k % len(data)]
            k += 1
            ix = torch.randint(len(d) - SEQ_LEN - 1, (BATCH,), generator=gen)
            yield torch.stack([torch.from_numpy(d[i:i + SEQ_LEN + 1].astype(np.int64)) for i in ix.tolist()])

    it = batches_of()
    first = next(it)
    t_first = time.perf_counter() - start
    return dict(first=t_first, tokens_per_s=timed(it, batches, lambda b: b), rss=peak_rss_mb())


def blended(prefixes: list[str], batches: int, start: float) -> dict[str, float]:
    return loader(prefixes, batches, start, blend=True)


CONTENDERS: dict[str, Callable[[list[str], int, float], dict[str, float]]] = {"actorfeed Loader": loader, "actorfeed Loader, blend": blended, "Megatron-style indexes": megatron,
              "nanoGPT-style memmap": nanogpt}


def child(name: str, prefixes: list[str], batches: int) -> None:
    import torch  # noqa: F401 (imported before the clock starts, by every contender alike)

    import actorfeed  # noqa: F401

    start = time.perf_counter()
    print(json.dumps(CONTENDERS[name](prefixes, batches, start)))


def run_child(name: str, prefixes: list[str], batches: int) -> dict[str, float]:
    """One run of contender name in a process of its own: what it printed."""
    res = subprocess.run([sys.executable, __file__, "--batches", str(batches), "--child", name, json.dumps(prefixes)],
                         capture_output=True, text=True, check=False)
    if res.returncode != 0:
        sys.exit(f"{name}: {res.stderr[-2000:]}")
    r: dict[str, float] = json.loads(res.stdout.splitlines()[-1])
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=float, nargs="+", default=[1e7, 1e9], help="tokens a corpus")
    ap.add_argument("--corpora", type=int, nargs="+", default=[1, 10])
    ap.add_argument("--batches", type=int, default=200, help="batches timed after the first")
    ap.add_argument("--rounds", type=int, default=3, help="runs of every contender, in turn; the medians are shown")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.batches < 1 or a.rounds < 1:
        ap.error(f"--batches {a.batches} and --rounds {a.rounds}: both must be at least 1")
    if a.child:
        child(a.child[0], json.loads(a.child[1]), a.batches)
        return
    from actorfeed._binary import find_binary

    find_binary()  # a missing binary fails here, before any contender runs
    print(f"{'contender':<24} {'corpora':>7} {'tokens':>9} {'first batch s':>13} {'tokens/s':>11} {'peak RSS MB':>11}")
    with tempfile.TemporaryDirectory() as tmp:
        for tokens in a.tokens:
            for corpora in a.corpora:
                prefixes = [os.path.join(tmp, f"c{int(tokens)}-{corpora}-{c}") for c in range(corpora)]
                for c, p in enumerate(prefixes):
                    write_corpus(p, int(tokens), seed=c)
                names = [n for n in CONTENDERS if not (n.endswith("blend") and corpora == 1)]
                runs: dict[str, list[dict[str, float]]] = {n: [] for n in names}
                for _ in range(a.rounds):
                    for name in names:
                        runs[name].append(run_child(name, prefixes, a.batches))
                for name in names:
                    r = {k: statistics.median(x[k] for x in runs[name]) for k in ("first", "tokens_per_s", "rss")}
                    print(f"{name:<24} {corpora:>7} {tokens:>9.0e} {r['first']:>13.3f} {r['tokens_per_s']:>11.3g} {r['rss']:>11.1f}", flush=True)
                for p in prefixes:
                    os.remove(f"{p}.bin")
                    os.remove(f"{p}.idx")


if __name__ == "__main__":
    main()
