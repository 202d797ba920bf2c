"""Decode and augmentation of the same JPEG shards, in one run: actorfeed's
decode map against Pillow with torchvision's transforms in a DataLoader
(docs/images.md; figures in docs/performance.md). Each contender runs
--epochs epochs in a process of its own, the contenders taking turns,
--rounds times; one core is one CPU by affinity (taskset), so that no
library's threads reach past it. The scaling is the median of each
round's 2-core over 1-core rate: a round's two runs are seconds apart,
while a shared machine's speed per core drifts over minutes. A trainer
runs many epochs; over one epoch of a few thousand images, starting
(indexing the shards, forking workers, the first batch) is a part of the
time that grows with the cores.

    python3 bench/pytorch/vision_bench.py out/jpeg-shards [--rounds 3] [--epochs 3]

The shards are WebDataset shards of NNNNNNNN.jpg and NNNNNNNN.cls
(`actorfeed gen --to wds`). Every contender decodes each image, takes a
random resized crop to 224 x 224, flips it half of the time and
normalises it with ImageNet's mean and std into float32 CHW, batches of
64. Pillow's are read into memory before the clock starts, and its
workers live across epochs (persistent_workers); actorfeed's time
includes reading the shards."""

import argparse
import io
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import time

BATCH, SIZE = 64, 224
DECODE = "decode(slot=1,size=224,crop=random,flip,normalize=imagenet)"


def binary():
    found = os.environ.get("ACTORFEED_BIN") or shutil.which("actorfeed")
    if not found:
        sys.exit("vision_bench: set ACTORFEED_BIN or put actorfeed on PATH")
    return found


def samples(shards):
    """Every (jpg bytes, class) of the shards, in memory."""
    out = []
    for name in sorted(os.listdir(shards)):
        if not name.endswith(".tar"):
            continue
        with tarfile.open(os.path.join(shards, name)) as tar:
            members = {}
            for m in tar.getmembers():
                key, _, ext = m.name.partition(".")
                members.setdefault(key, {})[ext] = tar.extractfile(m).read()
            out += [(v["jpg"], int(v["cls"])) for _, v in sorted(members.items())]
    return out


def pillow(shards, workers, epochs):
    """images/s of a DataLoader with Pillow and torchvision's transforms."""
    import torch
    from PIL import Image
    from torchvision import transforms

    torch.set_num_threads(1)
    tf = transforms.Compose([transforms.RandomResizedCrop(SIZE), transforms.RandomHorizontalFlip(),
                             transforms.ToTensor(),
                             transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    data = samples(shards)

    class Images(torch.utils.data.Dataset):
        def __len__(self):
            return len(data)

        def __getitem__(self, i):
            jpg, cls = data[i]
            return tf(Image.open(io.BytesIO(jpg)).convert("RGB")), cls

    loader = torch.utils.data.DataLoader(Images(), batch_size=BATCH, shuffle=True, num_workers=workers,
                                         persistent_workers=workers > 0)
    start, n = time.perf_counter(), 0
    for _ in range(epochs):
        for x, _ in loader:
            n += len(x)
    return n / (time.perf_counter() - start)


def actorfeed_run(shards, epochs):
    """images/s of actorfeed run with the decode map, as it reports them."""
    out = subprocess.run([binary(), "run", "--data", "wds:%s/*.tar" % shards, "--batch", str(BATCH), "--shuffle", "1024",
                          "--map", DECODE, "--passes", str(epochs), "--progress-every", "1h"],
                         capture_output=True, text=True, check=True)
    return float(re.search(r"([0-9.]+) samples/s", out.stdout).group(1))


CONTENDERS = {
    "actorfeed run, 1 core": ("0", lambda a: actorfeed_run(a.shards, a.epochs)),
    "actorfeed run, 2 cores": ("0,1", lambda a: actorfeed_run(a.shards, a.epochs)),
    "Pillow, DataLoader 0 workers, 1 core": ("0", lambda a: pillow(a.shards, 0, a.epochs)),
    "Pillow, DataLoader 2 workers, 2 cores": ("0,1", lambda a: pillow(a.shards, 2, a.epochs)),
}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("shards")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--one", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.rounds < 1 or a.epochs < 1:
        p.error("--rounds and --epochs: want 1 or more")
    if a.one:
        print(CONTENDERS[a.one][1](a))
        return
    rates = {name: [] for name in CONTENDERS}
    for _ in range(a.rounds):
        for name, (cpus, _) in CONTENDERS.items():
            out = subprocess.run(["taskset", "-c", cpus, sys.executable, __file__, a.shards, "--one", name,
                                  "--epochs", str(a.epochs)],
                                 capture_output=True, text=True, check=True)
            rates[name].append(float(out.stdout.split()[-1]))
    base = statistics.median(rates["Pillow, DataLoader 0 workers, 1 core"])
    print("%-40s %10s %14s" % ("contender", "images/s", "vs Pillow 1c"))
    for name, r in rates.items():
        print("%-40s %10.0f %14.2f" % (name, statistics.median(r), statistics.median(r) / base))
    pairs = [two / one for one, two in zip(rates["actorfeed run, 1 core"], rates["actorfeed run, 2 cores"])]
    print("actorfeed 2 cores / 1 core: %.2f (rounds: %s)" % (statistics.median(pairs), ", ".join("%.2f" % r for r in pairs)))


if __name__ == "__main__":
    main()
