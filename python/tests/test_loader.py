"""The loader against actorfeed run: the same order, every sample once,
exact resume (also on another world), rank shards, zero-copy arrays."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import actorfeed
from conftest import gone_within


def epoch_ids(loader):
    return [b["ids"].tolist() for b in loader]


def flat(batches):
    return [i for b in batches for i in b]


def test_batches_are_run_s_order(binary, data, tmp_path):
    ids = tmp_path / "ids.jsonl"
    subprocess.run([binary, "run", "--data", data, "--batch", "64", "--shuffle", "500", "--seed", "9",
                    "--passes", "2", "--devices", "1", "--emit-ids", str(ids)], check=True, stdout=subprocess.DEVNULL)
    want = {}
    for line in ids.read_text().splitlines():
        rec = json.loads(line)
        if "ids" in rec:
            want.setdefault(rec["epoch"], []).append((rec["seq"], rec["ids"]))
    with actorfeed.Loader(data, batch_size=64, shuffle=500, seed=9) as loader:
        for epoch in range(2):
            loader.set_epoch(epoch)
            assert len(loader) == 32
            got = [loader.sample_names(b["ids"]) for b in loader]
            assert got == [names for _, names in sorted(want[epoch])]


def test_every_sample_once_and_epochs_differ(data):
    with actorfeed.Loader(data, batch_size=100, seed=1, names=["image", "label"]) as loader:
        e0 = epoch_ids(loader)
        e1 = epoch_ids(loader)
        assert sorted(flat(e0)) == sorted(flat(e1))
        assert len(set(flat(e0))) == 2000
        assert flat(e0) != flat(e1)
        loader.set_epoch(0)
        assert epoch_ids(loader) == e0, "an epoch is a function of the seed and its number"


def test_braces_name_files_as_webdataset_lists_do(data):
    """"part-0000{0..3}.recordio" is the glob's data, in the same order."""
    braced = data.replace("*.recordio", "part-0000{0..3}.recordio")
    with actorfeed.Loader(data, batch_size=100, seed=1) as a, actorfeed.Loader(braced, batch_size=100, seed=1) as b:
        assert [a.sample_names(x["ids"]) for x in a] == [b.sample_names(x["ids"]) for x in b]


def test_arrays_are_named_views_of_the_ring(data):
    with actorfeed.Loader(data, batch_size=32, shuffle=False, names=["image", "label"], slots=3) as loader:
        b = next(iter(loader))
        assert set(b) == {"image", "label", "ids"}
        assert b["image"].shape == (32, 28, 28) and b["image"].dtype == np.uint8
        assert b["label"].shape == (32,)
        assert b.epoch == 0 and b.index == 0 and b.padding == 0
        assert not b["image"].flags.owndata, "a view, not a copy"


def test_slots_go_back_when_batches_are_let_go(data):
    with actorfeed.Loader(data, batch_size=16, slots=2) as loader:
        n = sum(1 for _ in loader)  # the loop keeps one batch at a time
        assert n == 125


def test_held_slots_fail_rather_than_hang(data):
    with actorfeed.Loader(data, batch_size=16, slots=3) as loader:
        kept = []
        it = iter(loader)
        kept.append(next(it))
        feed = loader._feed.proc.pid
        with pytest.raises(actorfeed.LoaderError, match="all 3 slots"):
            for b in it:
                kept.append(b)
        assert len(kept) == 3
        assert gone_within(feed, 1.0), "the feed outlived the loader's error"


def test_copied_batches_outlive_the_loader(data):
    loader = actorfeed.Loader(data, batch_size=8)
    b = next(iter(loader))
    image = b["image" if "image" in b else "slot0"]
    before = image.copy()
    loader.close()
    assert (image == before).all(), "a batch still held stays valid after close"


@pytest.mark.parametrize("stop", [0, 7, 32])
def test_resume_mid_epoch_is_exact(data, stop):
    with actorfeed.Loader(data, batch_size=64, seed=4) as loader:
        whole = epoch_ids(loader) + epoch_ids(loader)
    with actorfeed.Loader(data, batch_size=64, seed=4) as loader:
        it = iter(loader)
        first = [next(it)["ids"].tolist() for _ in range(stop)]
        state = loader.state_dict()
    with actorfeed.Loader(data, batch_size=64, seed=4) as loader:
        loader.load_state_dict(json.loads(json.dumps(state)))
        rest = epoch_ids(loader)  # none after the epoch's last batch: no replay
        assert first + rest == whole[:32]
        assert epoch_ids(loader) == whole[32:]


def test_state_saved_with_torch(data, tmp_path):
    import torch  # a test dependency (.ci/run installs it): never skipped
    with actorfeed.Loader(data, batch_size=64, torch=True) as loader:
        it = iter(loader)
        b = next(it)
        assert isinstance(b["slot0"], torch.Tensor)
        next(it)
        torch.save({"loader": loader.state_dict()}, tmp_path / "ckpt.pt")
        rest = [b["ids"].tolist() for b in it]
    with actorfeed.Loader(data, batch_size=64, torch=True) as loader:
        loader.load_state_dict(torch.load(tmp_path / "ckpt.pt")["loader"])
        assert epoch_ids(loader) == rest


def test_ranks_share_an_epoch_disjointly(data):
    shares = []
    for rank in range(3):
        with actorfeed.Loader(data, batch_size=50, rank=rank, world=3) as loader:
            shares.append(flat(epoch_ids(loader)))
    assert all(len(s) == len(shares[0]) for s in shares)
    union = set().union(*shares)
    assert len(union) == sum(len(s) for s in shares), "disjoint"
    assert len(union) == 2000 - 2000 % 3, 'remainder="drop" leaves 2000 mod 3 out'



def test_resize_after_ranks_stopped_at_different_steps(data):
    """Two ranks stop at steps 3 and 9; three ranks go on from both states:
    the epoch is delivered exactly once, nothing lost or repeated."""
    def unpadded(b):
        ids = b["ids"].tolist()
        return ids[:len(ids) - b.padding]

    seen, states = [], []
    for rank, stop in ((0, 3), (1, 9)):
        with actorfeed.Loader(data, batch_size=40, rank=rank, world=2, remainder="pad") as loader:
            it = iter(loader)
            seen += flat(unpadded(next(it)) for _ in range(stop))
            states.append(loader.state_dict())
    for rank in range(3):
        with actorfeed.Loader(data, batch_size=40, rank=rank, world=3, remainder="pad") as loader:
            loader.load_state_dict(states)
            seen += flat(unpadded(b) for b in loader)
    assert len(seen) == len(set(seen)), "nothing repeated"
    assert len(set(seen)) == 2000, "nothing lost"


@pytest.fixture
def worker(binary, data):
    """A data service worker (actorfeed serve) on a random loopback port."""
    root = data.rsplit("/", 1)[0]
    p = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--root", root],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = p.stdout.readline()
        assert line.startswith("serving on "), line
        yield line.split()[2].rstrip(",")
    finally:
        p.terminate()
        p.communicate(timeout=10)


def test_service_workers_give_the_same_batches(data, worker):
    with actorfeed.Loader(data, batch_size=64, seed=2) as loader:
        want = epoch_ids(loader)
    with actorfeed.Loader(data, batch_size=64, seed=2, service=[worker]) as loader:
        assert epoch_ids(loader) == want


def test_set_epoch_at_an_epoch_s_end_keeps_the_feed(data):
    """The usual loop calls set_epoch(e) where the loader already stands:
    the feed that ran ahead into epoch e goes on, not started again."""
    with actorfeed.Loader(data, batch_size=64) as loader:
        loader.set_epoch(0)
        epoch_ids(loader)
        pid = loader._feed.proc.pid
        loader.set_epoch(1)
        assert len(epoch_ids(loader)) == 32
        assert loader._feed.proc.pid == pid
        loader.set_epoch(5)
        assert [b.epoch for b in loader][:1] == [5]
        assert loader._feed.proc.pid != pid, "another epoch starts afresh"


def test_epochs_bound_the_job(data):
    with actorfeed.Loader(data, batch_size=500, epochs=2) as loader:
        assert [len(epoch_ids(loader)) for _ in range(3)] == [4, 4, 0]
        assert len(loader) == 0
    with actorfeed.Loader(data, batch_size=500, epochs=2) as loader:
        next(iter(loader))
        state = loader.state_dict()
    with actorfeed.Loader(data, batch_size=500, epochs=2) as loader:
        loader.load_state_dict(state)
        assert [len(epoch_ids(loader)) for _ in range(3)] == [3, 4, 0], "a resumed loader gives the epochs left"


def test_a_python_map_runs_on_each_batch(data):
    def halve(b):  # copies: the batches are kept, their slots go back
        return {"x": b["slot0"][:, ::2].copy(), "ids": b["ids"].copy(), "epoch": b.epoch}

    with actorfeed.Loader(data, batch_size=64, map=halve) as loader:
        out = list(loader)
    assert len(out) == 32 and out[0]["x"].shape == (64, 14, 28) and out[0]["epoch"] == 0


def test_rank_and_world_default_from_the_environment(data, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "4")
    with actorfeed.Loader(data, batch_size=50) as loader:
        assert (loader.rank, loader.world) == (1, 4)
        assert len(loader) == 10  # 500 samples a rank
    monkeypatch.setenv("WORLD_SIZE", "four")
    with pytest.raises(ValueError, match="WORLD_SIZE"):
        actorfeed.Loader(data, batch_size=50)


def test_rank_and_world_come_from_torch_distributed_first(data, tmp_path):
    """An initialised process group wins over RANK and WORLD_SIZE."""
    script = (
        "import torch.distributed as dist, actorfeed\n"
        "dist.init_process_group('gloo', init_method='file://%s', rank=0, world_size=1)\n"
        "loader = actorfeed.Loader(%r, batch_size=50)\n"
        "print(loader.rank, loader.world)\n"
        "dist.destroy_process_group()\n" % (tmp_path / "rendezvous", data))
    env = dict(os.environ, RANK="3", WORLD_SIZE="4")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "1"]


def test_an_empty_share_gives_empty_epochs_not_a_hang(data):
    """More ranks than samples: this rank's share of every epoch is empty;
    the loader says so at once rather than wait for a batch."""
    with actorfeed.Loader(data, batch_size=8, rank=2500, world=3000) as loader:
        assert len(loader) == 0
        assert [len(epoch_ids(loader)) for _ in range(3)] == [0, 0, 0]


def test_webdataset_shards_with_sequences(binary, tmp_path):
    """Shards written as the webdataset library writes them: each sample's
    fields named by their extensions, a byte field as a sequence (its
    bytes and offsets)."""
    import io
    import tarfile

    want = {}
    for s in range(2):
        with tarfile.open(tmp_path / ("shard-%d.tar" % s), "w") as tar:
            for i in range(300):
                key = "%d-%04d" % (s, i)
                jpg = bytes([i % 256]) * (5 + i % 17)
                want[key] = (i % 10, jpg)
                for ext, data in (("cls", str(i % 10).encode()), ("jpg", jpg)):
                    ti = tarfile.TarInfo("%s.%s" % (key, ext))
                    ti.size, ti.mode = len(data), 0o444
                    tar.addfile(ti, io.BytesIO(data))
    seen = 0
    with actorfeed.Loader("wds:%s/*.tar" % tmp_path, batch_size=32, shuffle=100, seed=3, epochs=1,
                          slot_bytes=1 << 16) as loader:
        for b in loader:
            offsets = b["jpg.lod0"]
            assert len(offsets) == len(b["ids"]) + 1
            for k, name in enumerate(loader.sample_names(b["ids"])):
                shard, rec = name.rsplit("#", 1)
                key = "%s-%04d" % (shard.split("-")[1].split(".")[0], int(rec))
                cls, jpg = want[key]
                assert b["cls"][k] == cls
                assert b["jpg"][offsets[k]:offsets[k + 1]].tobytes() == jpg
                seen += 1
    assert seen == 600


@pytest.fixture(scope="module")
def fashion_tfrecord(binary, fashion_mnist, tmp_path_factory):
    """Fashion-MNIST's test set as TFRecord shards of 2,500 (image PNG
    bytes, label int64), as convert writes them."""
    out = tmp_path_factory.mktemp("tfrecord")
    images = os.path.join(fashion_mnist, "t10k-images-idx3-ubyte.gz")
    subprocess.run([binary, "convert", images, "--to", "tfrecord", "--out", str(out), "--shard-samples", "2500"],
                   check=True, stdout=subprocess.DEVNULL)
    return str(out)


def test_tfrecord_shards_by_features(fashion_mnist, fashion_tfrecord):
    """TFRecord shards of tf.train.Example records (convert writes them as
    TensorFlow Datasets does: image PNG bytes, label int64), read by the
    features the loader is given, in the order given."""
    import gzip

    with gzip.open(os.path.join(fashion_mnist, "t10k-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read()[8:], np.uint8)
    seen = set()
    with actorfeed.Loader("%s/*.tfrecord" % fashion_tfrecord, batch_size=250, shuffle=1000, epochs=1,
                          features={"label": "int64", "image": "bytes"}, slot_bytes=1 << 20) as loader:
        for b in loader:
            assert list(b)[:3] == ["label", "image", "image.lod0"]
            offsets = b["image.lod0"]
            for k, name in enumerate(loader.sample_names(b["ids"])):
                shard, rec = name.rsplit("#", 1)
                i = int(shard.rsplit("-", 1)[1].split(".")[0]) * 2500 + int(rec)
                assert b["label"][k] == labels[i]
                assert b["image"][offsets[k]:offsets[k] + 8].tobytes() == b"\x89PNG\r\n\x1a\n"
                seen.add(i)
    assert seen == set(range(10000))


def test_decode_and_augment_in_the_pipeline(fashion_tfrecord):
    """map="decode(...)" decodes and augments each image in the pipeline:
    float32 CHW arrays, the same for the same seed and epoch."""
    def epoch(seed):
        with actorfeed.Loader("%s/*.tfrecord" % fashion_tfrecord, batch_size=500, seed=1, epochs=1,
                              features={"label": "int64", "image": "bytes"}, slot_bytes=4 << 20,
                              map="decode(size=20,channels=1,flip,slot=1,seed=%d)" % seed) as loader:
            out = [(b["ids"].copy(), b["image"].copy()) for b in loader]
        assert out[0][1].shape == (500, 1, 20, 20) and out[0][1].dtype == np.float32
        return out

    a, b = epoch(3), epoch(3)
    assert all((x[0] == y[0]).all() and (x[1] == y[1]).all() for x, y in zip(a, b))
    assert 0 <= a[0][1].min() and a[0][1].max() <= 1
    c = epoch(4)
    assert not all((x[1] == y[1]).all() for x, y in zip(a, c))


def test_each_iter_is_a_pass_as_dataloader_s(data):
    """A peek and a loop broken early leave their pass: the next iter() is
    the next epoch whole, as DataLoader's and StatefulDataLoader's are,
    and len() is an epoch's batches throughout."""
    with actorfeed.Loader(data, batch_size=64, seed=6) as loader:
        assert len(loader) == 32
        peek = next(iter(loader))
        assert (peek.epoch, peek.index) == (0, 0)
        for i, b in enumerate(loader):
            if i == 10:
                break
        assert b.epoch == 1
        it = iter(loader)
        e2 = [b.epoch for b in it]
        assert e2 == [2] * 32 and len(loader) == 32
        assert [b.epoch for b in loader] == [3] * 32, "after a whole pass, the next epoch"


def test_an_iterator_left_for_a_later_one_says_so(data):
    with actorfeed.Loader(data, batch_size=64) as loader:
        old = iter(loader)
        next(old)
        new = iter(loader)
        assert next(new).epoch == 1
        with pytest.raises(actorfeed.LoaderError, match="later iter"):
            next(old)
        assert next(new).index == 1, "the later pass goes on"


def test_set_epoch_after_a_pass_left_part_way_starts_it_whole(data):
    """As DistributedSampler.set_epoch: the epoch named, from its start."""
    with actorfeed.Loader(data, batch_size=64, seed=2) as loader:
        whole = epoch_ids(loader)
        loader.set_epoch(0)
        next(iter(loader))
        loader.set_epoch(0)
        assert epoch_ids(loader) == whole


def test_len_counts_a_resumed_epoch_whole(data):
    with actorfeed.Loader(data, batch_size=64, seed=4) as loader:
        it = iter(loader)
        for _ in range(7):
            next(it)
        state = loader.state_dict()
    with actorfeed.Loader(data, batch_size=64, seed=4) as loader:
        loader.load_state_dict(state)
        assert len(loader) == 32, "an epoch's batches, as DataLoader's len()"
        loader.set_epoch(0)  # the usual loop after a resume keeps the position
        assert len(epoch_ids(loader)) == 32 - 7


def test_ids_follow_torch(data):
    import torch
    with actorfeed.Loader(data, batch_size=64, torch=True, names=["image", "label"]) as a, \
            actorfeed.Loader(data, batch_size=64) as b:
        t, n = next(iter(a)), next(iter(b))
        assert isinstance(t["ids"], torch.Tensor) and t["ids"].dtype == torch.int64
        assert t["ids"].tolist() == n["ids"].tolist()
        assert a.sample_names(t["ids"]) == b.sample_names(n["ids"])
