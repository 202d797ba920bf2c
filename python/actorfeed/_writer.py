"""ShardWriter: samples written from Python as WebDataset shards, TFRecord
files or RecordIO files, by the actorfeed binary's `write` command, which
holds the one implementation of each format (docs/python.md, "Writing
data")."""

from __future__ import annotations

import io
import json
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from typing import IO, Any, Literal

import numpy as np

from . import _args
from ._binary import find_binary

__all__ = ["ShardWriter", "write_shards"]

Format = Literal["wds", "tfrecord", "recordio"]

# numpy's dtypes by the names actorfeed's tensors take.
_DTYPES = {"bool": "bool", "uint8": "uint8", "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
           "float16": "float16", "float32": "float32", "float64": "float64"}


class ShardWriter:
    """Writes samples, dicts of arrays, bytes, strings and numbers, as
    shards in directory out: PREFIX-000000.tar, ... for format="wds",
    .tfrecord or .recordio files. A new shard is begun when the one being
    written holds max_samples samples or max_bytes bytes, as webdataset's
    ShardWriter does (a shard exceeds max_bytes by at most its last
    sample). Every shard appears
    complete or not at all; a writer left by an exception (or abort())
    keeps the shards it completed and nothing of the one in progress.

    WebDataset samples are encoded as the webdataset library's ShardWriter
    encodes them, by field name: "__key__" is the sample's key (by default
    its index, 8 digits); bytes as they are; str as UTF-8; numbers as their
    text (a "cls" label); arrays as .npy files, for a field whose name ends
    in "npy"; dicts and lists as JSON for one ending in "json"; PIL images
    as JPEG or PNG by the name. TFRecord samples are tf.train.Example
    records: bytes and str as a bytes feature, ints and int arrays as an
    int64 list, floats and float arrays as a float list. RecordIO samples
    are tensor records of one instance, a slot a field in the dict's
    order: an array of shape S as [1, *S] of its dtype (so a batch of them
    is [B, *S]), bytes and str as uint8 sequences, an int as int64 [1], a
    float as float32 [1]."""

    def __init__(self, out: str, *, format: Format = "wds", max_samples: int = 100_000, max_bytes: int = 3 << 30,
                 prefix: str = "shard") -> None:
        if format not in ("wds", "tfrecord", "recordio"):
            raise ValueError(f"format={format!r}: want 'wds', 'tfrecord' or 'recordio'")
        _args._int("max_samples", max_samples, 1, 1 << 24)
        _args._int("max_bytes", max_bytes, 1 << 10, 1 << 40)
        if not isinstance(out, str) or not out:
            raise ValueError(f"out={out!r}: want a directory")
        self.format, self.count = format, 0
        self._said: IO[bytes] = tempfile.TemporaryFile()  # the shards written, one JSON line each
        self._err: IO[bytes] = tempfile.TemporaryFile()
        self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
            [find_binary(), "write", "--to", format, "--out", out, "--prefix", prefix, "--max-samples",
             str(max_samples), "--max-bytes", str(max_bytes)],
            stdin=subprocess.PIPE, stdout=self._said, stderr=self._err)
        self.shards: list[str] = []

    def write(self, sample: Mapping[str, Any]) -> None:
        """Writes one sample."""
        if self._proc is None or self._proc.stdin is None:
            raise ValueError("the writer is closed")
        if not isinstance(sample, Mapping) or not sample:
            raise ValueError(f"a sample is a non-empty dict of fields, not {type(sample).__name__}")
        key = str(sample.get("__key__", f"{self.count:08d}"))
        fields, blobs = [], []
        for name, value in sample.items():
            if name == "__key__":
                continue
            field, blob = _encode(self.format, str(name), value)
            fields.append({**field, "name": str(name), "len": len(blob)})
            blobs.append(blob)
        head = json.dumps({"key": key, "fields": fields}).encode() + b"\n"
        try:
            self._proc.stdin.write(head)
            for b in blobs:
                self._proc.stdin.write(b)
        except BrokenPipeError:
            self._fail()
        self.count += 1

    def close(self) -> list[str]:
        """Completes the last shard and returns every shard's path."""
        if self._proc is None:
            return self.shards
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(b'{"end": true}\n')
            self._proc.stdin.close()
        except BrokenPipeError:
            pass
        if self._proc.wait() != 0:
            self._fail()
        self._collect()
        return self.shards

    def abort(self) -> None:
        """Stops without completing the shard in progress: it is not
        written; those completed before it are kept."""
        if self._proc is None:
            return
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.close()  # without the end line: the command removes what it had begun
        except BrokenPipeError:
            pass
        self._proc.wait()
        self._collect()

    def _collect(self) -> None:
        self._said.seek(0)
        for line in self._said.read().splitlines():
            rec = json.loads(line)
            if "shard" in rec:
                self.shards.append(rec["shard"])
        self._said.close()
        self._err.close()
        self._proc = None

    def _fail(self) -> None:
        assert self._proc is not None
        if self._proc.stdin is not None:
            try:
                self._proc.stdin.close()
            except BrokenPipeError:
                pass
        self._proc.wait()
        self._err.seek(0)
        why = self._err.read().decode(errors="replace").strip().splitlines() or ["(no message)"]
        self._collect()
        raise ValueError(why[-1].removeprefix("actorfeed: "))

    def __enter__(self) -> ShardWriter:
        return self

    def __del__(self) -> None:
        # A writer let go without close() completes nothing more: its child
        # ends without leaving the shard in progress.
        try:
            self.abort()
        except Exception:
            pass

    def __exit__(self, kind: object, *exc: object) -> None:
        if kind is None:
            self.close()
        else:
            self.abort()


def write_shards(samples: Iterable[Mapping[str, Any]], out: str, *, format: Format = "wds",
                 max_samples: int = 100_000, max_bytes: int = 3 << 30, prefix: str = "shard") -> list[str]:
    """Writes every sample of samples with a ShardWriter; the shards' paths."""
    with ShardWriter(out, format=format, max_samples=max_samples, max_bytes=max_bytes, prefix=prefix) as w:
        for s in samples:
            w.write(s)
    return w.shards


def _array(value: Any) -> np.ndarray[Any, Any] | None:
    """value as a NumPy array, if it is one (or a torch tensor)."""
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch tensor, without importing torch
        return np.asarray(value.detach().cpu().numpy())
    return None


def _encode(format: Format, name: str, value: Any) -> tuple[dict[str, Any], bytes]:
    """A field's header (its kind, an array's dtype and shape) and bytes."""
    if format == "wds":
        return {"kind": "bytes"}, _wds_bytes(name, value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"kind": "bytes"}, bytes(value)
    if isinstance(value, str):
        return {"kind": "bytes"}, value.encode()
    arr = _array(value)
    if arr is None:
        if isinstance(value, (bool, int, np.integer)):
            arr = np.array(value if format == "recordio" else [value], np.int64)
        elif isinstance(value, (float, np.floating)):
            arr = np.array(value if format == "recordio" else [value], np.float32)
        elif isinstance(value, (list, tuple)):
            arr = np.asarray(value)
        else:
            raise ValueError(f"field {name!r}: {type(value).__name__} is not a field {format} can hold")
    if format == "tfrecord":
        if arr.dtype.kind in "biu":
            return {"kind": "int64"}, np.ascontiguousarray(arr, "<i8").tobytes()
        if arr.dtype.kind == "f":
            return {"kind": "float"}, np.ascontiguousarray(arr, "<f4").tobytes()
        raise ValueError(f"field {name!r}: a {arr.dtype} array: a TFRecord feature holds ints, floats or bytes")
    dtype = _DTYPES.get(arr.dtype.name)
    if dtype is None:
        raise ValueError(f"field {name!r}: a {arr.dtype} array: RecordIO holds {', '.join(_DTYPES)}")
    return {"kind": "array", "dtype": dtype, "shape": list(arr.shape)}, np.ascontiguousarray(arr).astype(
        arr.dtype.newbyteorder("<"), copy=False).tobytes()


def _wds_bytes(name: str, value: Any) -> bytes:
    """A WebDataset member's bytes, as webdataset's default encoders make
    them from the field name's extension."""
    ext = name.rsplit(".", 1)[-1].lower()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bool, int, float, np.integer, np.floating)):
        return str(value.item() if isinstance(value, np.generic) else value).encode()
    arr = _array(value)
    if arr is not None and ext == "npy":
        buf = io.BytesIO()
        np.save(buf, arr, allow_pickle=False)
        return buf.getvalue()
    if isinstance(value, (dict, list)) and ext == "json":
        return json.dumps(value).encode()
    if hasattr(value, "save") and ext in ("jpg", "jpeg", "png"):  # a PIL image
        buf = io.BytesIO()
        value.save(buf, format="JPEG" if ext != "png" else "PNG")
        return buf.getvalue()
    raise ValueError(f"field {name!r}: a {type(value).__name__} has no encoding for .{ext}: give bytes, "
                     "or an array as .npy, a dict as .json, a PIL image as .jpg or .png")
