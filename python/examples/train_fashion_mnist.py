"""Trains a classifier of Fashion-MNIST with torch.distributed (gloo),
each rank fed its disjoint share by actorfeed's Loader; model, optimizer
and every rank's loader state are checkpointed together, so that a job
killed mid-epoch resumes exactly, on any number of processes.

    actorfeed convert /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz --out out/train.recordio
    python3 -m torch.distributed.run --standalone --nproc_per_node 2 \\
        python/examples/train_fashion_mnist.py --data out/train.recordio --out out/job

Each rank writes the ids of the batches it trained on to OUT/ids-*.jsonl,
cut back to the checkpoint on a resume: `actorfeed verify-ids --data
out/train.recordio --epochs N 'out/job/ids-*.jsonl'` checks every sample of
every epoch was trained on exactly once.
"""

import argparse
import gzip
import json
import os
import signal
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

import actorfeed

TEST = "/usr/share/datasets/fashion-mnist/t10k-%s-idx%d-ubyte.gz"


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="the training set, as actorfeed convert writes it")
    p.add_argument("--out", required=True, help="directory of the checkpoint and the ids files")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=64, help="batch size of each rank")
    p.add_argument("--ckpt-every", type=int, default=100, help="steps between checkpoints")
    p.add_argument("--kill-at", type=int, default=0, help="rank 0 kills itself (SIGKILL) at this step, for the demo")
    return p.parse_args()


def model():
    torch.manual_seed(0)  # every rank starts from the same weights
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))


def evaluate(net):
    images = np.frombuffer(gzip.open(TEST % ("images", 3)).read()[16:], np.uint8).reshape(-1, 28, 28)
    labels = np.frombuffer(gzip.open(TEST % ("labels", 1)).read()[8:], np.uint8)
    with torch.no_grad():
        pred = net(torch.from_numpy(images.astype(np.float32) / 255)).argmax(1).numpy()
    return float((pred == labels).mean())


def main():
    a = parse()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    os.makedirs(a.out, exist_ok=True)
    net = torch.nn.parallel.DistributedDataParallel(model())
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    loader = actorfeed.Loader(a.data, batch_size=a.batch, shuffle=True, seed=1, map="to_tensor",
                              names=["image", "label"], torch=True)
    ck = actorfeed.Checkpoint(out=a.out)
    start, step = ck.resume(loader=loader, model=net.module, opt=opt)
    ids = ck.open(name="ids-%d-%d-of-%d.jsonl" % (time.time_ns(), rank, dist.get_world_size()))
    for epoch in range(start, a.epochs):
        loader.set_epoch(epoch)
        left = loader.left_out()
        if left:
            ids.write(json.dumps({"epoch": epoch, "rank": rank, "dropped": loader.sample_names(left)}) + "\n")
        for batch in loader:
            opt.zero_grad()
            F.cross_entropy(net(batch["image"]), batch["label"]).backward()
            opt.step()
            step += 1
            ids.write(json.dumps({"epoch": batch.epoch, "device": rank, "seq": batch.index,
                                  "ids": loader.sample_names(batch["ids"])}) + "\n")
            del batch  # its slot goes back to the pipeline
            if step == a.kill_at and rank == 0:
                os.kill(os.getpid(), signal.SIGKILL)
            if step % a.ckpt_every == 0:
                ck.save(loader=loader, model=net.module, opt=opt, epoch=epoch, step=step)
        ck.save(loader=loader, model=net.module, opt=opt, epoch=epoch + 1, step=step)
    loader.close()
    ck.close()
    if rank == 0:
        print("test accuracy %.4f after %d epochs, %d steps" % (evaluate(net.module), a.epochs, step), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
