"""What a loader shows of its run when asked: a progress bar, the time
the trainer waited for each batch, a summary at close, the ids file that
verify-ids checks, and the pipeline's metrics."""

import os
import subprocess
import urllib.request

import pytest

import actorfeed


def test_progress_and_summary_on_stderr(data, capsys):
    with actorfeed.Loader(data, batch_size=64, progress=True, summary=True) as loader:
        for _ in loader:
            pass
        err = capsys.readouterr().err
        assert "epoch 0" in err and "32/32" in err, err
    err = capsys.readouterr().err
    assert "actorfeed: rank 0: 32 batches, 2000 samples in" in err
    assert "waited" in err and "p99" in err


def test_waits_are_counted_a_batch_and_in_all(data):
    with actorfeed.Loader(data, batch_size=64) as loader:
        waits = [b.wait for b in loader]
        s = loader.stats()
    assert len(waits) == 32 and all(w >= 0 for w in waits)
    assert s["batches"] == 32 and s["samples"] == 2000
    assert s["waited"] == pytest.approx(sum(waits))
    assert s["wait_max"] == max(waits) and 0 <= s["wait_p50"] <= s["wait_p99"] <= s["wait_max"]
    assert s["seconds"] >= s["waited"]


def test_emit_ids_is_what_verify_ids_checks(binary, data, tmp_path):
    """Three ranks write their ids, one stopped part way and resumed from
    its state: verify-ids finds every sample of the epoch once, and the
    two that 2,000 samples leave over three equal shares, named by rank 0
    as dropped."""
    files = [str(tmp_path / f"ids-{r}.jsonl") for r in range(3)]
    with actorfeed.Loader(data, batch_size=48, rank=0, world=3, emit_ids=files[0]) as loader:
        it = iter(loader)
        for _ in range(5):
            next(it)
        state = loader.state_dict()
    with actorfeed.Loader(data, batch_size=48, rank=0, world=3, emit_ids=files[0]) as loader:
        loader.load_state_dict(state)
        for _ in loader:
            pass
    for rank in (1, 2):
        with actorfeed.Loader(data, batch_size=48, rank=rank, world=3, emit_ids=files[rank]) as loader:
            for _ in loader:
                pass
    assert any('"dropped"' in line for line in open(files[0]))
    out = subprocess.run([binary, "verify-ids", "--data", data, "--epochs", "1", *files], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "every record of 1 epoch(s) delivered exactly once" in out.stdout


def test_emit_ids_takes_an_open_file(data, tmp_path):
    path = tmp_path / "ids.jsonl"
    with open(path, "w", encoding="utf-8") as f, actorfeed.Loader(data, batch_size=500, emit_ids=f) as loader:
        assert len(list(loader)) == 4
    assert len(path.read_text().splitlines()) == 4
    with pytest.raises(ValueError, match="emit_ids"):
        actorfeed.Loader(data, batch_size=500, emit_ids=3)


def test_metrics_are_served_while_the_loader_runs(data):
    with actorfeed.Loader(data, batch_size=64, metrics_addr="127.0.0.1:0") as loader:
        next(iter(loader))
        url = loader.metrics_url
        assert url is not None and url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(url, timeout=10) as r:
            body = r.read().decode()
        assert "actorfeed_stage_items_total" in body
    with actorfeed.Loader(data, batch_size=64) as loader:
        assert loader.metrics_url is None


def test_a_metrics_address_other_machines_reach_is_refused(data):
    with actorfeed.Loader(data, batch_size=64, metrics_addr="0.0.0.0:0") as loader:
        with pytest.raises(ValueError, match="metrics_addr.*reachable from other machines"):
            next(iter(loader))


def test_a_report_is_drawn_when_the_loader_closes(data, tmp_path):
    report = tmp_path / "report"
    with actorfeed.Loader(data, batch_size=16, report=str(report)) as loader:
        for _ in loader:
            pass
    names = sorted(os.listdir(report))
    assert names == ["actors.dot", "actors.png", "buffers.png", "throughput.png"]
    for n in names:
        if n.endswith(".png"):
            assert (report / n).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "open_files" in (report / "actors.dot").read_text()
