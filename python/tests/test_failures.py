"""Failure on both sides: a bad argument, a corrupt file, the pipeline's
process killed, the trainer killed or interrupted. Nothing hangs, and
nothing is left behind."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import actorfeed
from conftest import alive, children, gone_within

BAD = [
    (dict(batch_size=0), "batch_size=0 is out of range"),
    (dict(batch_size="64"), "batch_size must be an int"),
    (dict(shuffle=-1), "shuffle=-1"),
    (dict(seed=-5), "seed=-5"),
    (dict(drop_last=1), "drop_last must be True or False"),
    (dict(epochs=0), "epochs=0"),
    (dict(rank=2, world=2), "rank=2 is out of range"),
    (dict(world=0), "world=0"),
    (dict(map="resize"), "map='resize': want a function"),
    (dict(names="image"), "names must be a list"),
    (dict(names=["a", "a"]), "names a slot twice"),
    (dict(slots=1), "slots=1"),
    (dict(slot_bytes=10), "slot_bytes=10"),
    (dict(service=["nohost"]), "service: 'nohost' is not host:port"),
    (dict(on_corrupt="ignore"), "on_corrupt='ignore'"),
    (dict(remainder="spread"), "remainder='spread'"),
    (dict(features={"label": "text"}), "features: 'label=text'"),
    (dict(features="a=bytes[2]"), "features: 'a=bytes[2]'"),
    (dict(features=3), "features must be a dict"),
]


@pytest.mark.parametrize("kwargs,message", BAD)
def test_bad_arguments_are_refused_before_any_process(data, kwargs, message):
    args = dict(data=data, batch_size=8)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
        actorfeed.Loader(**args)
    assert children() == []


@pytest.mark.parametrize("data_arg,message", [
    ([], "data must be"), ("/nonexistent/x.recordio", "is not a file"), ("/nonexistent/*.recordio", "matches no file"),
    ("/nonexistent/x-{0,1}.recordio", "x-0.recordio is not a file"), ("x-{0..9.recordio", "leaves the brace")])
def test_bad_data_is_refused(data_arg, message):
    with pytest.raises(ValueError, match=message):
        actorfeed.Loader(data_arg, batch_size=8)


def test_what_only_the_pipeline_reads_is_a_bad_argument(data, tmp_path):
    """A decode map's words and a file's format are read by the pipeline
    as it starts: a bad one is still a ValueError naming the parameter, at
    the first batch, and no process is left."""
    unknown = tmp_path / "x.unknown"
    unknown.write_bytes(b"?")
    for kwargs, message in [(dict(data=data, map="decode(size=-3)"), r'map="decode\(size=-3\)": .*from 1 to 4096'),
                            (dict(data=str(unknown)), 'data=".*x.unknown": .*unknown format')]:
        with actorfeed.Loader(batch_size=8, **kwargs) as loader:
            with pytest.raises(ValueError, match=message) as raised:
                next(iter(loader))
            assert isinstance(raised.value, actorfeed.LoaderError)
            with pytest.raises(ValueError, match="failed before: " + message):
                next(iter(loader))
        assert children() == []


def test_corrupt_file_is_an_error_naming_it(corrupt):
    with actorfeed.Loader(corrupt, batch_size=50, shuffle=False) as loader:
        start = time.monotonic()
        with pytest.raises(actorfeed.LoaderError, match='part-00000.recordio.*on_corrupt="skip"'):
            for _ in loader:
                pass
        assert time.monotonic() - start < 1


def test_corrupt_records_skipped_on_request(corrupt):
    with actorfeed.Loader(corrupt, batch_size=50, shuffle=False, on_corrupt="skip") as loader:
        n = sum(len(b["ids"]) for b in loader)
    assert 0 < n < 2000


def test_an_undecodable_image_is_skipped_on_request(binary, tmp_path):
    """A JPEG that does not decode fails the loader naming its sample; with
    on_corrupt="skip" its sample leaves its batch and the rest arrive."""
    subprocess.run([binary, "gen", "--to", "wds", "--out", str(tmp_path), "--files", "2", "--samples", "40",
                    "--image-size", "32"], check=True, stdout=subprocess.DEVNULL)
    shard = tmp_path / "shard-000001.tar"
    b = bytearray(shard.read_bytes())
    at = b.index(b"00000023.jpg") + 512 + 2  # the member's data, past the JPEG's SOI marker
    b[at:at + 64] = bytes(64)
    shard.write_bytes(bytes(b))
    args = dict(data="wds:%s/shard-*.tar" % tmp_path, batch_size=8, epochs=1, map="decode(size=8,slot=1)")
    with actorfeed.Loader(**args) as loader:
        with pytest.raises(actorfeed.LoaderError, match="sample 00000023 .*shard-000001.tar.*not a decodable image"):
            for _ in loader:
                pass
    with actorfeed.Loader(on_corrupt="skip", **args) as loader:
        rows = [len(b["ids"]) for b in loader]
    assert sum(rows) == 39 and len(rows) == 5


def test_pipeline_killed_is_an_error_not_a_hang(data):
    with actorfeed.Loader(data, batch_size=8, slots=2) as loader:
        it = iter(loader)
        next(it)
        os.kill(loader._feed.proc.pid, signal.SIGKILL)
        start = time.monotonic()
        with pytest.raises(actorfeed.LoaderError, match="exit status -9"):
            for _ in it:
                pass
        assert time.monotonic() - start < 1


TRAINER = textwrap.dedent("""
    import time
    import actorfeed
    loader = actorfeed.Loader(%r, batch_size=8, slots=4)
    it = iter(loader)
    next(it)
    print(loader._feed.proc.pid, flush=True)
    for b in it:
        time.sleep(0.05)
""")


def trainer(data):
    p = subprocess.Popen([sys.executable, "-c", TRAINER % data],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    feed = int(p.stdout.readline())
    return p, feed


def test_trainer_killed_stops_the_pipeline(data):
    p, feed = trainer(data)
    p.kill()
    p.wait()
    p.stdout.close()
    p.stderr.close()
    assert gone_within(feed, 1.0), "the feed outlived its trainer by more than 1 s"


FORKING_TRAINER = textwrap.dedent("""
    import os, sys, time
    import actorfeed
    loader = actorfeed.Loader(%r, batch_size=8, slots=4)
    it = iter(loader)
    next(it)
    child = os.fork()
    if child == 0:  # a DataLoader worker's fork, say: the loader is not its own
        try:
            next(it)
            said = "a batch"
        except actorfeed.LoaderError as e:
            said = str(e)
        with open(%r, "w") as f:
            f.write(said)
        time.sleep(60)
        os._exit(0)
    print(loader._feed.proc.pid, child, flush=True)
    for b in it:
        time.sleep(0.05)
""")


def test_a_forked_child_neither_keeps_nor_uses_the_pipeline(data, tmp_path):
    # Killed, a trainer's feed ends even while a child it forked lives on
    # (the child closed its copy of the socket), and the child is told that
    # the loader is not its own.
    said = tmp_path / "child-said"
    p = subprocess.Popen([sys.executable, "-c", FORKING_TRAINER % (data, str(said))],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    feed, child = (int(x) for x in p.stdout.readline().split())
    try:
        p.kill()
        p.wait()
        assert gone_within(feed, 1.0), "the feed outlived its trainer, held open by the forked child"
        assert alive(child)
        deadline = time.monotonic() + 5
        while not (said.exists() and said.read_text()) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert "forked child: make a Loader in this process" in said.read_text()
    finally:
        os.kill(child, signal.SIGKILL)
        p.stdout.close()
        p.stderr.close()
    assert gone_within(child, 5.0)


def test_ctrl_c_is_keyboard_interrupt_and_stops_both(data):
    p, feed = trainer(data)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=10)
    assert "KeyboardInterrupt" in err
    assert gone_within(feed, 1.0)


def test_letting_go_of_a_batch_runs_no_python_code(data):
    # A Ctrl-C that lands in Python code the garbage collector runs (a
    # weakref.finalize callback) is printed as "Exception ignored" and lost:
    # the trainer went on. Releasing a slot must run no Python frame.
    with actorfeed.Loader(data, batch_size=8) as loader:
        batch = next(iter(loader))
        frames = []
        sys.setprofile(lambda frame, event, arg: frames.append(frame.f_code.co_name) if event == "call" else None)
        try:
            del batch
        finally:
            sys.setprofile(None)
        assert frames == []
        assert len(loader._feed.released) == 1


def test_no_binary_is_an_error_that_says_where_to_look(data, monkeypatch, tmp_path):
    monkeypatch.setenv("ACTORFEED_BIN", str(tmp_path / "missing"))
    loader = actorfeed.Loader(data, batch_size=8)
    with pytest.raises(FileNotFoundError, match="ACTORFEED_BIN"):
        iter(loader).__next__()
    loader.close()


def test_a_failed_loader_says_so_again(corrupt):
    with actorfeed.Loader(corrupt, batch_size=50, shuffle=False) as loader:
        with pytest.raises(actorfeed.LoaderError, match="part-00000.recordio"):
            list(b["ids"].copy() for b in loader)
        with pytest.raises(actorfeed.LoaderError, match="failed before: .*part-00000.recordio"):
            next(iter(loader))
