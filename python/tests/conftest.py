"""The loader's tests run the real actorfeed binary, built once from this
checkout, over files it writes. After the suite no child process and no
new /dev/shm entry may be left."""

import os
import subprocess
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FASHION = "/usr/share/datasets/fashion-mnist"


def children(pid=None):
    """The pids of pid's child processes (default: this one's)."""
    pid = os.getpid() if pid is None else pid
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                stat = f.read()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses.
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(d))
    return out


def alive(pid):
    """pid runs (a zombie, dead but not yet reaped, does not)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2:].split()[0] != "Z"


def gone_within(pid, seconds):
    """pid ends within seconds (polled: it is not our child to wait for)."""
    deadline = time.monotonic() + seconds
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.fixture(scope="session")
def binary(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("bin") / "actorfeed")
    subprocess.run(["go", "build", "-o", out, "./cmd/actorfeed"], cwd=REPO, check=True)
    os.environ["ACTORFEED_BIN"] = out
    return out


@pytest.fixture(scope="session", autouse=True)
def own_decode_cache(tmp_path_factory):
    """gzip'd files the feeds seek in are decoded into the session's own
    cache (ACTORFEED_DECODE_CACHE), not the user's."""
    os.environ.setdefault("ACTORFEED_DECODE_CACHE", str(tmp_path_factory.mktemp("decoded")))


@pytest.fixture(scope="session", autouse=True)
def nothing_left_behind():
    shm = set(os.listdir("/dev/shm"))
    yield
    left = children()
    assert not left, "child processes left behind: %s" % left
    new = set(os.listdir("/dev/shm")) - shm
    assert not new, "shared-memory entries left behind: %s" % sorted(new)


@pytest.fixture(scope="session")
def data(binary, tmp_path_factory):
    """2,000 samples (28x28 uint8 images and labels) in 4 RecordIO files."""
    d = tmp_path_factory.mktemp("data")
    subprocess.run([binary, "gen", "--out", str(d), "--files", "4", "--samples", "2000"], check=True,
                   stdout=subprocess.DEVNULL)
    return str(d / "*.recordio")


@pytest.fixture
def corrupt(binary, tmp_path):
    """A copy of a data file with a byte of its records flipped."""
    subprocess.run([binary, "gen", "--out", str(tmp_path), "--files", "1", "--samples", "2000"], check=True,
                   stdout=subprocess.DEVNULL)
    path = tmp_path / "part-00000.recordio"
    b = bytearray(path.read_bytes())
    b[len(b) // 2] ^= 0xFF
    path.write_bytes(bytes(b))
    return str(path)


@pytest.fixture(scope="session")
def fashion_mnist():
    """Debian's Fashion-MNIST; where CI installed it, a test must not skip."""
    if not os.path.exists(os.path.join(FASHION, "train-images-idx3-ubyte.gz")):
        if os.environ.get("ACTORFEED_REQUIRE_DATASETS"):
            pytest.fail("ACTORFEED_REQUIRE_DATASETS is set but %s has no Fashion-MNIST" % FASHION)
        pytest.skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)")
    return FASHION


@pytest.fixture(scope="session")
def fashion_recordio(binary, fashion_mnist, tmp_path_factory):
    """Fashion-MNIST's training set as RecordIO, as the README's convert
    command writes it."""
    out = str(tmp_path_factory.mktemp("fashion") / "train.recordio")
    subprocess.run([binary, "convert", os.path.join(fashion_mnist, "train-images-idx3-ubyte.gz"), "--out", out],
                   check=True, stdout=subprocess.DEVNULL)
    return out
