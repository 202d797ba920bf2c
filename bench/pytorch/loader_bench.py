"""actorfeed's Python Loader against PyTorch's DataLoader, in one run, on
the same Fashion-MNIST images: full shuffle, batch 128, one epoch each
after a warm-up epoch, samples/s and the ratio (docs/performance.md).

    python3 bench/pytorch/loader_bench.py out/train.recordio

The DataLoaders read the same 60,000 images from memory (a TensorDataset:
their best case, no decode, no file reads), with 0 and 2 worker processes;
actorfeed reads them from the RecordIO file that actorfeed convert writes."""

import argparse
import gzip
import statistics
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

import actorfeed

FASHION = "/usr/share/datasets/fashion-mnist/train-%s-idx%d-ubyte.gz"


def rate(loader, key):
    start, n = time.perf_counter(), 0
    for b in loader:
        n += len(b[key])
    return n / (time.perf_counter() - start)


def epochs(loader, key, n, set_epoch=None):
    rates = []
    for e in range(n + 1):  # epoch 0 warms up (actorfeed: starts and indexes)
        if set_epoch:
            set_epoch(e)
        r = rate(loader, key)
        if e > 0:
            rates.append(r)
    return statistics.median(rates)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("data", help="Fashion-MNIST's training set as RecordIO (actorfeed convert)")
    p.add_argument("--epochs", type=int, default=3)
    a = p.parse_args()
    images = np.frombuffer(gzip.open(FASHION % ("images", 3)).read()[16:], np.uint8).reshape(-1, 28, 28)
    labels = np.frombuffer(gzip.open(FASHION % ("labels", 1)).read()[8:], np.uint8).astype(np.int64)
    ds = TensorDataset(torch.from_numpy(images.copy()), torch.from_numpy(labels))
    out = {}
    with actorfeed.Loader(a.data, batch_size=128, shuffle=60000, seed=1, torch=True) as loader:
        out["actorfeed, torch tensors"] = epochs(loader, "ids", a.epochs, loader.set_epoch)
    with actorfeed.Loader(a.data, batch_size=128, shuffle=60000, seed=1) as loader:
        out["actorfeed, numpy arrays"] = epochs(loader, "ids", a.epochs, loader.set_epoch)
    for workers in (0, 2):
        dl = DataLoader(ds, batch_size=128, shuffle=True, num_workers=workers)
        out["DataLoader, %d workers" % workers] = epochs(dl, 1, a.epochs)
    best = max(v for k, v in out.items() if k.startswith("DataLoader"))
    for k, v in out.items():
        print("%-26s %9.0f samples/s  %.2fx the best DataLoader" % (k, v, v / best))


if __name__ == "__main__":
    main()
