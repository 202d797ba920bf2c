"""Samples written from Python as WebDataset, TFRecord and RecordIO
shards, read back by actorfeed and by the formats' own readers: Python's
tarfile, and crc32c with protobuf for TFRecord."""

import io
import os
import subprocess
import sys
import tarfile

import numpy as np
import pytest

import actorfeed
from conftest import REPO, alive

sys.path.insert(0, os.path.join(REPO, "internal", "oracle"))
import oracle  # noqa: E402  # the differential tests' independent TFRecord reader


def jpeg(i):
    from PIL import Image

    img = Image.new("RGB", (8, 8), (i % 256, 2 * i % 256, 3 * i % 256))
    buf = io.BytesIO()
    img.save(buf, format="JPEG")
    return buf.getvalue()


def test_webdataset_shards_read_back(tmp_path):
    samples = [{"__key__": f"s{i:04d}", "jpg": jpeg(i), "cls": i % 10, "npy": np.full(3, i, np.float32)}
               for i in range(100)]
    shards = actorfeed.write_shards(samples, str(tmp_path), max_samples=30)
    assert [os.path.basename(s) for s in shards] == [f"shard-{n:06d}.tar" for n in range(4)]
    got = []
    for s in shards:
        with tarfile.open(s) as t:
            for m in t.getmembers():
                key, ext = m.name.split(".", 1)
                data = t.extractfile(m).read()
                got.append((key, ext, data))
    want = []
    for s in samples:
        want += [(s["__key__"], "jpg", s["jpg"]), (s["__key__"], "cls", str(s["cls"]).encode())]
        buf = io.BytesIO()
        np.save(buf, s["npy"], allow_pickle=False)
        want.append((s["__key__"], "npy", buf.getvalue()))
    assert got == want, "tarfile reads every member as written, in order"
    cls, npy = [], []
    with actorfeed.Loader(f"wds:{tmp_path}/*.tar", batch_size=10, shuffle=False) as loader:
        for b in loader:
            cls += [int(c) for c in b["cls"].ravel()]
            npy.append(b["npy"].copy())
    npy = np.concatenate(npy)
    assert cls == [i % 10 for i in range(100)]
    assert (npy == np.repeat(np.arange(100, dtype=np.float32), 3).reshape(100, 3)).all()


def test_tfrecord_files_read_back(binary, tmp_path):
    samples = [{"image": jpeg(i), "label": i, "vec": np.arange(4, dtype=np.float32) * i} for i in range(50)]
    shards = actorfeed.write_shards(samples, str(tmp_path), format="tfrecord", max_samples=20)
    assert len(shards) == 3
    example = oracle.example_class()
    i = 0
    for s in shards:
        data = open(s, "rb").read()
        at = 0
        while at < len(data):
            n = int.from_bytes(data[at:at + 8], "little")
            assert int.from_bytes(data[at + 8:at + 12], "little") == oracle.masked(data[at:at + 8])
            payload = data[at + 12:at + 12 + n]
            assert int.from_bytes(data[at + 12 + n:at + 16 + n], "little") == oracle.masked(payload)
            x = example.FromString(payload)
            f = x.features.feature
            assert f["image"].bytes_list.value == [samples[i]["image"]]
            assert list(f["label"].int64_list.value) == [i]
            assert list(f["vec"].float_list.value) == [0.0, i, 2.0 * i, 3.0 * i]
            at, i = at + 16 + n, i + 1
    assert i == 50
    out = subprocess.run([binary, "inspect", shards[0]], capture_output=True, text=True, check=True).stdout
    assert "records:  20 whole" in out and "features: image=bytes,label=int64,vec=float[]" in out
    with actorfeed.Loader(f"tfrecord:{tmp_path}/*.tfrecord", batch_size=10, shuffle=False) as loader:
        labels = [int(v) for b in loader for v in b["label"].ravel()]
    assert labels == list(range(50))


def test_recordio_files_read_back(binary, tmp_path):
    rng = np.random.default_rng(3)
    samples = [{"x": rng.standard_normal((2, 3)).astype(np.float32), "label": i} for i in range(40)]
    shards = actorfeed.write_shards(samples, str(tmp_path), format="recordio", max_samples=16)
    assert len(shards) == 3
    for s in shards:
        subprocess.run([binary, "inspect", s], check=True, stdout=subprocess.DEVNULL)
    x, labels = [], []
    with actorfeed.Loader(f"{tmp_path}/*.recordio", batch_size=8, shuffle=False, names=["x", "label"]) as loader:
        for b in loader:
            x.append(b["x"].copy())
            labels += [int(v) for v in b["label"].ravel()]
    x = np.concatenate(x)
    assert labels == list(range(40))
    assert (x == np.stack([s["x"] for s in samples])).all()


def test_shards_hold_to_max_bytes(tmp_path):
    samples = [{"bin": bytes([i]) * 1000} for i in range(20)]
    shards = actorfeed.write_shards(samples, str(tmp_path), max_bytes=4096)
    counts = []
    for s in shards:
        with tarfile.open(s) as t:
            counts.append(len(t.getmembers()))
    # A sample takes 1,536 bytes of tar (a header and its data padded):
    # the third takes a shard past 4,096 bytes, and the next begins another.
    assert counts == [3] * 6 + [2]


def test_a_writer_stopped_by_an_error_leaves_only_whole_shards(tmp_path):
    with pytest.raises(RuntimeError, match="the trainer's own"):
        with actorfeed.ShardWriter(str(tmp_path), max_samples=10) as w:
            for i in range(25):
                w.write({"txt": f"sample {i}"})
            raise RuntimeError("the trainer's own")
    assert sorted(os.listdir(tmp_path)) == ["shard-000000.tar", "shard-000001.tar"], "nothing of the third"
    assert w.shards == [str(tmp_path / "shard-000000.tar"), str(tmp_path / "shard-000001.tar")]


def test_bad_samples_are_refused_by_name(tmp_path):
    with actorfeed.ShardWriter(str(tmp_path)) as w:
        with pytest.raises(ValueError, match="field 'jpg'.*no encoding for .jpg"):
            w.write({"jpg": np.zeros(3)})
    with pytest.raises(ValueError, match="sample 0 \\(key \"a.b\"\\).*holds no '/' or '.'"):
        with actorfeed.ShardWriter(str(tmp_path / "keys")) as w:
            w.write({"__key__": "a.b", "txt": "x"})
            w.close()
    assert not os.path.exists(tmp_path / "keys" / "shard-000000.tar")


def test_a_writer_let_go_leaves_no_process_and_no_part_shard(tmp_path):
    import gc

    w = actorfeed.ShardWriter(str(tmp_path), max_samples=2)
    for i in range(3):
        w.write({"txt": str(i)})
    pid = w._proc.pid
    del w
    gc.collect()
    assert not alive(pid), "the child was waited for"
    assert os.listdir(tmp_path) == ["shard-000000.tar"]
