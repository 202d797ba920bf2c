"""Trains a small GPT on a token corpus with torch.distributed (gloo), each
rank fed its slice of every global step by actorfeed's Loader; model,
optimizer and every rank's loader state are checkpointed together, so that
a job killed mid-epoch resumes on any number of processes and trains on the
same samples at every step, its loss curve the uninterrupted job's.

    python3 python/examples/tokenize_text.py --text /usr/share/games/fortunes/computers \\
        --model out/fortunes-spm --out out/fortunes_text_document
    python3 -m torch.distributed.run --standalone --nproc_per_node 2 python/examples/train_gpt.py \\
        --data 'megatron(seq_len=32):out/fortunes_text_document.bin' --out out/gpt

Rank 0 writes each step's loss (the mean over the step's tokens, on any
world) to OUT/loss.jsonl, and each rank the ids of its batches to
OUT/ids-*.jsonl, both cut back to the checkpoint on a resume: `actorfeed
verify-ids` over the ids checks every sample of every epoch was trained on
once.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import time
from typing import Any, TextIO

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import actorfeed  # noqa: E402


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="the corpus entry, megatron(seq_len=N):PREFIX.bin")
    p.add_argument("--out", required=True, help="directory of the checkpoint, the losses and the ids files")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--global-batch", type=int, default=16, help="samples of every step, over all ranks")
    p.add_argument("--vocab", type=int, default=2000, help="the tokenizer's vocabulary size")
    p.add_argument("--ckpt-every", type=int, default=10, help="steps between checkpoints")
    p.add_argument("--kill-at", type=int, default=0, help="rank 0 kills itself (SIGKILL) at this step, for the demo")
    return p.parse_args()


class GPT(torch.nn.Module):
    """Token and position embeddings, causal self-attention blocks, and a
    head tied to the token embedding. Positions restart at each document
    (the loader's positions), so a document reads the same wherever it
    was packed."""

    def __init__(self, vocab: int, seq: int, dim: int = 64, layers: int = 2, heads: int = 4) -> None:
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, dim)
        self.pos = torch.nn.Embedding(seq, dim)
        block = torch.nn.TransformerEncoderLayer(dim, heads, dim_feedforward=4 * dim, dropout=0.0, batch_first=True)
        self.blocks = torch.nn.TransformerEncoder(block, layers)
        self.norm = torch.nn.LayerNorm(dim)
        self.register_buffer("mask", torch.triu(torch.full((seq, seq), float("-inf")), diagonal=1))
        for e in (self.tok, self.pos):
            torch.nn.init.normal_(e.weight, std=0.02)  # GPT-2's: logits start near uniform

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.tok(tokens) + self.pos(positions), mask=self.mask)
        return self.norm(x) @ self.tok.weight.T


def checkpoint_path(out: str) -> str:
    return os.path.join(out, "checkpoint.pt")


def save(out: str, net: torch.nn.Module, opt: torch.optim.Optimizer, epoch: int, step: int,
         loader: actorfeed.Loader, files: dict[str, TextIO], before: list[tuple[str, int]]) -> None:
    """Every rank's loader state and its files' sizes, and those of the
    jobs before (before), with rank 0's model: written whole (a temporary
    file renamed) or not at all."""
    for f in files.values():
        f.flush()
        os.fsync(f.fileno())
    mine = {"loader": loader.state_dict(), "files": [(f.name, f.tell()) for f in files.values()]}
    every: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(every, mine)
    if dist.get_rank() == 0:
        tmp = checkpoint_path(out) + ".tmp"
        torch.save({"model": net.state_dict(), "opt": opt.state_dict(), "epoch": epoch, "step": step,
                    "loaders": [e["loader"] for e in every],
                    "files": before + [kv for e in every for kv in e["files"]]}, tmp)
        os.replace(tmp, checkpoint_path(out))
    dist.barrier()


def resume(out: str, net: torch.nn.Module, opt: torch.optim.Optimizer,
           loader: actorfeed.Loader) -> tuple[int, int, list[tuple[str, int]]]:
    """Loads the checkpoint, if any, and cuts the losses and ids files back
    to it: the steps after it are trained again, by this job's ranks. The
    ids files it keeps are the later checkpoints' too; the losses file
    goes on."""
    path = checkpoint_path(out)
    if not os.path.exists(path):
        return 0, 0, []
    ck = torch.load(path)
    net.load_state_dict(ck["model"])
    opt.load_state_dict(ck["opt"])
    loader.load_state_dict(ck["loaders"])  # every rank's: the world may have changed
    if dist.get_rank() == 0:
        kept = dict(ck["files"])
        for name in os.listdir(out):
            f = os.path.join(out, name)
            if name.endswith(".jsonl") and f not in kept:
                os.remove(f)  # written after the checkpoint by a job that died
        for f, size in kept.items():
            os.truncate(f, size)
    dist.barrier()
    loss = os.path.join(out, "loss.jsonl")
    return ck["epoch"], ck["step"], [(f, n) for f, n in ck["files"] if f != loss]


def main() -> None:
    a = parse()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)  # the same reductions in every process, on any machine
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    os.makedirs(a.out, exist_ok=True)
    loader = actorfeed.Loader(a.data, global_batch=a.global_batch, seed=1, torch=True)
    seq = int(a.data.split("seq_len=")[1].split(")")[0])  # the model reads N tokens of each N + 1
    torch.manual_seed(0)  # every rank starts from the same weights
    model = GPT(a.vocab, seq)
    net = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(net.parameters(), lr=3e-3)
    start, step, before = resume(a.out, model, opt, loader)
    files: dict[str, TextIO] = {"ids": open(os.path.join(a.out, f"ids-{time.time_ns()}-{rank}-of-{world}.jsonl"), "a")}
    if rank == 0:
        files["loss"] = open(os.path.join(a.out, "loss.jsonl"), "a")
    loss = torch.zeros(())
    for epoch in range(start, a.epochs):
        loader.set_epoch(epoch)
        left = loader.left_out()
        if left:
            files["ids"].write(json.dumps({"epoch": epoch, "rank": rank, "dropped": loader.sample_names(left)}) + "\n")
        for batch in loader:
            tokens, positions = batch["tokens"], batch["positions"]
            logits = net(tokens[:, :-1], positions[:, :-1])
            mean = F.cross_entropy(logits.reshape(-1, a.vocab), tokens[:, 1:].reshape(-1))
            # DDP averages the ranks' gradients: weighted by its share of
            # the step, a rank's mean makes that average the step's mean.
            opt.zero_grad()
            (mean * batch.step_share * world).backward()
            opt.step()
            step += 1
            loss = mean.detach() * batch.step_share
            dist.all_reduce(loss)  # the step's mean over its samples
            files["ids"].write(json.dumps({"epoch": batch.epoch, "device": rank, "seq": batch.index,
                                           "ids": loader.sample_names(batch["ids"])}) + "\n")
            if rank == 0:
                files["loss"].write(json.dumps({"epoch": batch.epoch, "step": batch.index, "loss": loss.item()}) + "\n")
            del batch, tokens, positions  # the slot goes back to the pipeline
            if step == a.kill_at and rank == 0:
                os.kill(os.getpid(), signal.SIGKILL)
            if step % a.ckpt_every == 0:
                save(a.out, model, opt, epoch, step, loader, files, before)
        save(a.out, model, opt, epoch + 1, step, loader, files, before)
    loader.close()
    for f in files.values():
        f.close()
    if rank == 0:
        print(f"loss {loss.item():.4f} (perplexity {math.exp(loss.item()):.1f}) after {a.epochs} epoch(s), "
              f"{step} steps, {world} rank(s)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
