"""A decode cache with a limit, shared by loaders in several processes:
the copies used least recently go first, a copy a running loader holds
never does, and the summary says what went."""

import gzip
import os
import subprocess

import actorfeed


def shards(binary, out, n):
    """n gzip'd WebDataset shards of 10 JPEGs; the size of one decoded."""
    subprocess.run([binary, "gen", "--to", "wds", "--out", str(out), "--files", str(n), "--samples", str(10 * n),
                    "--image-size", "24"], check=True, stdout=subprocess.DEVNULL)
    sizes = []
    for name in sorted(os.listdir(out)):
        raw = (out / name).read_bytes()
        sizes.append(len(raw))
        (out / f"{name}.gz").write_bytes(gzip.compress(raw))
        os.remove(out / name)
    return f"wds:{out}/*.tar.gz", max(sizes)


def copies(cache):
    return {n for n in os.listdir(cache) if n.endswith(".tar")}


def read_all(data, limit):
    with actorfeed.Loader(data, batch_size=5, decode_cache_bytes=limit) as loader:
        n = sum(len(b["ids"]) for b in loader)
        return n, loader.stats()


def test_a_limited_cache_shared_by_loaders(binary, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("ACTORFEED_DECODE_CACHE", str(cache))
    a, size = shards(binary, tmp_path / "a", 2)
    b, _ = shards(binary, tmp_path / "b", 2)
    c, _ = shards(binary, tmp_path / "c", 1)
    limit = 5 * size // 2  # two copies and a half

    holder = actorfeed.Loader(a, batch_size=5, decode_cache_bytes=limit)
    try:
        next(iter(holder))  # its feed holds a's two copies from here on
        held = copies(cache)
        assert len(held) == 2
        n, _ = read_all(b, limit)
        assert n == 20
        of_b = copies(cache) - held
        assert held <= copies(cache) and len(of_b) == 2, "a copy a running loader holds is never removed"
        n, stats = read_all(c, limit)
        assert n == 10
        assert not of_b & copies(cache), "b's copies, used least recently and let go, went"
        assert held <= copies(cache) and len(copies(cache)) == 3
        # b's copies and the indexes of their shards and of c's, smaller
        # and older than c's copy.
        assert stats["decode_cache_evicted"] >= 2 and stats["decode_cache_evicted_bytes"] >= 2 * size
    finally:
        holder.close()
    n, stats = read_all(b, limit)  # a's copies are let go: they go now
    assert n == 20 and stats["decode_cache_evicted"] >= 2
    assert sum(os.path.getsize(cache / f) for f in os.listdir(cache) if not f.startswith(".")) <= limit
    assert not held & copies(cache)


def test_a_cache_limit_set_wrong_is_refused(data):
    import pytest

    with actorfeed.Loader(data, batch_size=64, decode_cache_bytes="lots") as loader:
        with pytest.raises(ValueError, match="ACTORFEED_DECODE_CACHE_BYTES=\"lots\""):
            next(iter(loader))
    with pytest.raises(ValueError, match="decode_cache_bytes"):
        actorfeed.Loader(data, batch_size=64, decode_cache_bytes=0)
