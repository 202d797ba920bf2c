"""actorfeed's Python Loader against the Go pipeline in process and
PyTorch's DataLoader, in one run, on the same Fashion-MNIST images: full
shuffle, batch 128, 3 epochs, the contenders alternating, each in a
process of its own (docs/performance.md).

    python3 bench/pytorch/loader_bench.py out/train.recordio [--rounds 3]

Contenders: the Loader (numpy arrays, torch tensors); `actorfeed run`, the
same pipeline read in process (one device with no step); both in the
global order (shuffle="all", --shuffle all) over the raw IDX files, which
it reads by position, where the others shuffle a window of the whole
RecordIO file; DataLoader with 0 and 2 workers over the images in memory
(a TensorDataset) and over the raw IDX file on disk (a Dataset that reads
its rows through np.memmap). Each
prints samples/s over its 3 epochs (actorfeed's from before its pipeline
is built; a DataLoader's after its dataset is loaded) and its peak
RSS: the process's, plus its largest child's (the Loader's feed, read from
/proc before it exits; a DataLoader's worker)."""

import argparse
import gzip
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

FASHION = "/usr/share/datasets/fashion-mnist/train-%s-idx%d-ubyte.gz"
BATCH, EPOCHS, WINDOW = 128, 3, 60000


def peak_rss_mb(child_kb=None):
    """The process's peak RSS plus its largest child's, in MB. child_kb, when
    given, is an exec'd child's own peak: RUSAGE_CHILDREN would report at
    least this process's RSS when it forked the child (Linux keeps the
    pre-exec peak), counting an imported torch twice."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if child_kb is None:
        child_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return (own + child_kb) / 1024


def vm_hwm_kb(pid):
    """A live process's peak RSS since its exec, in KB (/proc/PID/status)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM for process %d" % pid)


def loader(data, as_torch, shuffle=WINDOW):
    import actorfeed

    with actorfeed.Loader(data, batch_size=BATCH, shuffle=shuffle, seed=1, torch=as_torch) as lo:
        # Timed from before the child starts, as run's time includes
        # building its pipeline (indexing the file).
        start, n = time.perf_counter(), 0
        for _ in range(EPOCHS):
            for b in lo:
                n += len(b["ids"])
        rate = n / (time.perf_counter() - start)
        return rate, vm_hwm_kb(lo._feed.proc.pid)  # the feed, before it exits


def go_in_process(data, shuffle=WINDOW):
    binary = os.environ.get("ACTORFEED_BIN") or shutil.which("actorfeed")
    out = subprocess.run([binary, "run", "--data", data, "--batch", str(BATCH), "--shuffle", str(shuffle),
                          "--seed", "1", "--passes", str(EPOCHS), "--progress-every", "1h"],
                         capture_output=True, text=True, check=True).stdout
    return float(re.search(r"samples in .*: (\d+) samples/s", out).group(1))


def dataloader(raw, workers, in_memory):
    import numpy as np
    import torch
    from torch.utils.data import DataLoader, Dataset, TensorDataset

    labels = torch.from_numpy(np.fromfile(idx(raw, "labels"), np.uint8, offset=8).astype(np.int64))
    if in_memory:
        # Read, not copied out of a memory map: the map's pages would stay
        # resident beside the copy and count in this contender's RSS.
        images = np.fromfile(idx(raw, "images"), np.uint8, offset=16).reshape(-1, 28, 28)
        ds = TensorDataset(torch.from_numpy(images), labels)
    else:
        images = np.memmap(idx(raw, "images"), np.uint8, "r", offset=16).reshape(-1, 28, 28)

        class OnDisk(Dataset):
            def __len__(self):
                return len(images)

            def __getitem__(self, i):
                return torch.from_numpy(np.array(images[i])), labels[i]

        ds = OnDisk()
    dl = DataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=workers)
    start, n = time.perf_counter(), 0
    for _ in range(EPOCHS):
        for x, _ in dl:
            n += len(x)
    return n / (time.perf_counter() - start)


def idx(raw, kind):
    """The raw IDX file of kind (images, labels) in the directory raw, named
    as Fashion-MNIST's, so that a reader pairs them."""
    return os.path.join(raw, "train-%s-idx%d-ubyte" % (kind, 3 if kind == "images" else 1))


CONTENDERS = {
    "Loader, numpy arrays": lambda a: loader(a.data, False),
    "Loader, torch tensors": lambda a: loader(a.data, True),
    "Go pipeline in process": lambda a: go_in_process(a.data),
    "Loader, torch, global, IDX": lambda a: loader("idx:" + idx(a.raw, "images"), True, "all"),
    "Go pipeline, global, IDX": lambda a: go_in_process("idx:" + idx(a.raw, "images"), "all"),
    "DataLoader, memory, 0 workers": lambda a: dataloader(a.raw, 0, True),
    "DataLoader, memory, 2 workers": lambda a: dataloader(a.raw, 2, True),
    "DataLoader, file, 0 workers": lambda a: dataloader(a.raw, 0, False),
    "DataLoader, file, 2 workers": lambda a: dataloader(a.raw, 2, False),
}


def one(name, data, raw):
    """Runs one contender in this process and prints its result as JSON."""
    a = argparse.Namespace(data=data, raw=raw)
    rate, child_kb = CONTENDERS[name](a), None
    if isinstance(rate, tuple):
        rate, child_kb = rate
    print(json.dumps({"rate": rate, "rss_mb": peak_rss_mb(child_kb)}))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("data", help="Fashion-MNIST's training set as RecordIO (actorfeed convert)")
    p.add_argument("--rounds", type=int, default=3, help="rounds of every contender, taking turns")
    p.add_argument("--one", help=argparse.SUPPRESS)
    p.add_argument("--raw", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.one:
        return one(a.one, a.data, a.raw)
    with tempfile.TemporaryDirectory() as tmp:
        raw = tmp
        for kind, dims in (("images", 3), ("labels", 1)):
            with gzip.open(FASHION % (kind, dims)) as src, open(idx(raw, kind), "wb") as dst:
                shutil.copyfileobj(src, dst)
        got = {name: [] for name in CONTENDERS}
        for _ in range(a.rounds):
            for name in CONTENDERS:
                out = subprocess.run([sys.executable, __file__, a.data, "--one", name, "--raw", raw],
                                     capture_output=True, text=True, check=True).stdout
                got[name].append(json.loads(out.splitlines()[-1]))
    # Ratios are taken within a round, where the contenders ran minutes
    # apart at most, and their median reported: the machine's speed drifts
    # by more than the differences measured over a run of rounds.
    go = [r["rate"] for r in got["Go pipeline in process"]]
    best = [max(got[n][i]["rate"] for n in got if n.startswith("DataLoader")) for i in range(a.rounds)]
    print("%-30s %12s %8s %8s %12s" % ("contender", "samples/s", "vs Go", "vs torch", "peak RSS MB"))
    for name, rs in got.items():
        rate = statistics.median(r["rate"] for r in rs)
        vs_go = statistics.median(r["rate"] / g for r, g in zip(rs, go))
        vs_torch = statistics.median(r["rate"] / b for r, b in zip(rs, best))
        rss = statistics.median(r["rss_mb"] for r in rs)
        print("%-30s %12.0f %8.2f %8.2f %12.0f" % (name, rate, vs_go, vs_torch, rss))
    print("medians of %d rounds; ratios within a round, vs torch against its fastest DataLoader" % a.rounds)


if __name__ == "__main__":
    main()
