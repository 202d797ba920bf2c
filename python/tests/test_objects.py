"""The loader over objects of an S3 server (Versity's gateway, which
./dev.sh test installs), as over the same files on disk."""

import os
import shutil
import socket
import subprocess
import time

import pytest

import actorfeed

KEY, SECRET = "actorfeed-test", "actorfeed-test-secret"


def gateway():
    """versitygw: $ACTORFEED_VERSITYGW, PATH, then Go's bin directory."""
    gopath = os.environ.get("GOPATH") or os.path.join(os.path.expanduser("~"), "go")
    for p in (os.environ.get("ACTORFEED_VERSITYGW"), shutil.which("versitygw"), os.path.join(gopath, "bin", "versitygw")):
        if p and os.path.isfile(p):
            return p
    if os.environ.get("CI"):
        pytest.fail("versitygw is not installed (./dev.sh test installs it)")
    pytest.skip("versitygw is not installed: go install github.com/versity/versitygw/cmd/versitygw@v1.8.0")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port, seconds):
    """The port accepts within seconds (a server starting: polled)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


@pytest.fixture
def bucket(binary, tmp_path, monkeypatch):
    """A gateway over a directory with one bucket, "train", holding what
    the data fixture holds, under set/; the AWS environment points at it."""
    root = tmp_path / "root"
    (root / "train").mkdir(parents=True)  # a bucket of the posix backend is a directory
    port = free_port()
    with open(tmp_path / "gateway.log", "w") as log:
        proc = subprocess.Popen([gateway(), "--access", KEY, "--secret", SECRET, "--port", "127.0.0.1:%d" % port,
                                 "posix", str(root)], stdout=log, stderr=subprocess.STDOUT)
    try:
        assert listening(port, 30), (tmp_path / "gateway.log").read_text()
        for k, v in {"AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_REGION": "us-east-1",
                     "AWS_ENDPOINT_URL": "http://127.0.0.1:%d" % port, "AWS_EC2_METADATA_DISABLED": "true"}.items():
            monkeypatch.setenv(k, v)
        subprocess.run([binary, "gen", "--out", "s3://train/set", "--files", "4", "--samples", "2000"], check=True,
                       stdout=subprocess.DEVNULL)
        yield "s3://train/set/*.recordio"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_objects_give_the_batches_of_the_files(data, bucket):
    """The same batches as from disk, and a resume mid-epoch goes on exactly."""
    with actorfeed.Loader(data, batch_size=64, shuffle=500, seed=9) as local:
        want = [b["ids"].tolist() for b in local]
    with actorfeed.Loader(bucket, batch_size=64, shuffle=500, seed=9) as objects:
        it = iter(objects)
        got = [next(it)["ids"].tolist() for _ in range(5)]
        state = objects.state_dict()
    with actorfeed.Loader(bucket, batch_size=64, shuffle=500, seed=9) as resumed:
        resumed.load_state_dict(state)
        got += [b["ids"].tolist() for b in resumed]
    assert got == want


def test_a_missing_object_is_named(bucket):
    with pytest.raises(actorfeed.LoaderError, match="s3://train/set/none.recordio"):
        with actorfeed.Loader("s3://train/set/none.recordio", batch_size=8) as loader:
            next(iter(loader))


def test_image_shards_in_a_bucket_as_on_disk(binary, bucket, tmp_path):
    """What the loader is for: WebDataset shards of JPEGs in a bucket,
    named by a brace pattern, decoded and augmented in the pipeline, give
    the batches of the same shards on disk, pixels and all; a resume
    mid-epoch goes on exactly, its random crops and flips too."""
    flags = ["--to", "wds", "--files", "3", "--samples", "90", "--image-size", "32"]
    subprocess.run([binary, "gen", "--out", str(tmp_path / "shards")] + flags, check=True, stdout=subprocess.DEVNULL)
    subprocess.run([binary, "gen", "--out", "s3://train/shards"] + flags, check=True, stdout=subprocess.DEVNULL)
    args = dict(batch_size=16, shuffle=40, seed=5, epochs=1, map="decode(slot=1,size=24,crop=random,flip)")

    def batches(it, n=None):
        return [(b["ids"].tolist(), b["jpg"].copy(), b["cls"].copy()) for _, b in zip(range(n or 1 << 30), it)]

    with actorfeed.Loader("wds:%s/shard-*.tar" % (tmp_path / "shards"), **args) as local:
        want = batches(local)
    url = "wds:s3://train/shards/shard-{000000..000002}.tar"
    with actorfeed.Loader(url, **args) as objects:
        got = batches(iter(objects), 2)
        state = objects.state_dict()
    with actorfeed.Loader(url, **args) as resumed:
        resumed.load_state_dict(state)
        got += batches(resumed)
    assert len(want) == 6 and len(got) == len(want)
    for (wi, wx, wy), (gi, gx, gy) in zip(want, got):
        assert gi == wi
        assert gx.shape == wx.shape and (gx == wx).all()
        assert (gy == wy).all()


def test_shards_written_to_a_bucket(bucket, tmp_path):
    """ShardWriter uploads each shard whole as it completes it; one it was
    stopped in is not in the bucket."""
    samples = [{"cls": i % 10, "txt": f"sample {i}"} for i in range(25)]
    shards = actorfeed.write_shards(samples, "s3://train/written", max_samples=10)
    assert shards == [f"s3://train/written/shard-{n:06d}.tar" for n in range(3)]
    with actorfeed.Loader("wds:s3://train/written/*.tar", batch_size=5, shuffle=False) as loader:
        assert [int(c) for b in loader for c in b["cls"].ravel()] == [i % 10 for i in range(25)]
    with pytest.raises(RuntimeError):
        with actorfeed.ShardWriter("s3://train/stopped", max_samples=10) as w:
            for s in samples:
                w.write(s)
            raise RuntimeError("stopped")
    assert w.shards == ["s3://train/stopped/shard-000000.tar", "s3://train/stopped/shard-000001.tar"]
    assert sorted(os.listdir(tmp_path / "root" / "train" / "stopped")) == ["shard-000000.tar", "shard-000001.tar"]
