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
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

import actorfeed


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
    ck = actorfeed.Checkpoint(out=a.out)
    start, step = ck.resume(loader=loader, model=model, opt=opt)
    ids = ck.open(name=f"ids-{time.time_ns()}-{rank}-of-{world}.jsonl")
    losses = ck.open(name="loss.jsonl") if rank == 0 else None
    loss = torch.zeros(())
    for epoch in range(start, a.epochs):
        loader.set_epoch(epoch)
        left = loader.left_out()
        if left:
            ids.write(json.dumps({"epoch": epoch, "rank": rank, "dropped": loader.sample_names(left)}) + "\n")
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
            ids.write(json.dumps({"epoch": batch.epoch, "device": rank, "seq": batch.index,
                                  "ids": loader.sample_names(batch["ids"])}) + "\n")
            if losses is not None:
                losses.write(json.dumps({"epoch": batch.epoch, "step": batch.index, "loss": loss.item()}) + "\n")
            del batch, tokens, positions  # the slot goes back to the pipeline
            if step == a.kill_at and rank == 0:
                os.kill(os.getpid(), signal.SIGKILL)
            if step % a.ckpt_every == 0:
                ck.save(loader=loader, model=model, opt=opt, epoch=epoch, step=step)
        ck.save(loader=loader, model=model, opt=opt, epoch=epoch + 1, step=step)
    loader.close()
    ck.close()
    if rank == 0:
        print(f"loss {loss.item():.4f} (perplexity {math.exp(loss.item()):.1f}) after {a.epochs} epoch(s), "
              f"{step} steps, {world} rank(s)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
