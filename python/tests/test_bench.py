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
    assert len(rows) == 7, out.stdout
    for name in ("Loader, numpy arrays", "Loader, torch tensors", "Go pipeline in process",
                 "DataLoader, memory, 0 workers", "DataLoader, file, 2 workers"):
        assert float(rows[name][-4]) > 0, out.stdout  # samples/s
    assert rows["Go pipeline in process"][-3] == "1.00"
