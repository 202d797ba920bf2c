"""The benchmark against DataLoader runs and reports every contender (its
figures are docs/performance.md's; nothing here times anything)."""

import os
import subprocess
import sys

from conftest import REPO


def test_loader_bench_reports_every_contender(fashion_recordio):
    out = subprocess.run([sys.executable, os.path.join(REPO, "bench", "pytorch", "loader_bench.py"), fashion_recordio,
                          "--rounds", "1"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = {line[:30].strip(): line.split() for line in out.stdout.splitlines()[1:-1]}
    assert len(rows) == 9, out.stdout
    for name in ("Loader, numpy arrays", "Loader, torch tensors", "Go pipeline in process", "Loader, torch, global, IDX",
                 "Go pipeline, global, IDX",
                 "DataLoader, memory, 0 workers", "DataLoader, file, 2 workers"):
        assert float(rows[name][-4]) > 0, out.stdout  # samples/s
    assert rows["Go pipeline in process"][-3] == "1.00"


def test_vision_bench_reports_every_contender(binary, tmp_path):
    shards = str(tmp_path / "shards")
    subprocess.run([binary, "gen", "--to", "wds", "--out", shards, "--files", "2", "--samples", "128",
                    "--image-size", "64"], check=True, stdout=subprocess.DEVNULL)
    out = subprocess.run([sys.executable, os.path.join(REPO, "bench", "pytorch", "vision_bench.py"), shards,
                          "--rounds", "1"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    rows = {line[:40].strip(): line.split() for line in lines[1:-1]}
    assert len(rows) == 4, out.stdout
    for name, row in rows.items():
        assert float(row[-2]) > 0, out.stdout  # images/s
    assert lines[-1].startswith("actorfeed 2 cores / 1 core: ")


def test_tokens_bench_reports_every_contender():
    out = subprocess.run([sys.executable, os.path.join(REPO, "bench", "pytorch", "tokens_bench.py"), "--tokens", "1e6",
                          "--corpora", "1", "2", "--batches", "5", "--rounds", "2"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = {(line[:25].strip(), line.split()[-5]): line.split() for line in out.stdout.splitlines()[1:]}
    # A blend needs two corpora, so its contender has no one-corpus row.
    contenders = {("actorfeed Loader", "1"), ("Megatron-style indexes", "1"), ("nanoGPT-style memmap", "1"),
                  ("actorfeed Loader", "2"), ("actorfeed Loader, blend", "2"), ("Megatron-style indexes", "2"),
                  ("nanoGPT-style memmap", "2")}
    assert set(rows) == contenders, out.stdout
    for row in rows.values():
        first, tokens_per_s, rss = (float(v) for v in row[-3:])
        assert first > 0 and tokens_per_s > 0 and rss > 0, out.stdout
