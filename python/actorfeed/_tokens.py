"""Writers of the token corpora the Loader reads: Megatron-LM's indexed
datasets (PREFIX.bin and PREFIX.idx, as Megatron-LM's preprocessing writes
them) and llm.c's token files. docs/tokens.md gives both layouts."""

from __future__ import annotations

import os
import struct
import tempfile
from collections.abc import Iterable, Sequence
from typing import Union

import numpy as np
import numpy.typing as npt

# Megatron-LM's dtype codes (megatron/core/datasets/indexed_dataset.py, DType).
_CODES = {"uint8": 1, "int8": 2, "int16": 3, "int32": 4, "int64": 5, "float64": 6, "float32": 7, "uint16": 8}
_LLMC = {"gpt-2": (20240520, 1, "uint16"), "llama-3": (20240801, 7, "uint32")}

Tokens = Union[npt.ArrayLike, Sequence[int]]
Document = Union[Tokens, Sequence[Tokens]]


def write_indexed(prefix: str | os.PathLike[str], documents: Iterable[Document], *, dtype: str = "uint16") -> int:
    """Writes documents as the indexed dataset PREFIX.bin and PREFIX.idx and
    returns the number of tokens written. A document is an array of token
    ids (one sequence) or a list of such arrays (several sequences, as
    Megatron-LM's --split-sentences makes). dtype is the tokens' type on
    disk, one of Megatron-LM's: a token that does not fit it raises
    ValueError naming its document, rather than wrapping around. Each file
    appears complete or not at all (written beside itself, then renamed)."""
    if dtype not in _CODES:
        raise ValueError(f"dtype {dtype!r}: want one of {', '.join(_CODES)}")
    prefix = os.fspath(prefix)
    lengths: list[int] = []
    bounds = [0]
    with _Replacing(f"{prefix}.bin") as out:
        for d, doc in enumerate(documents):
            for seq in _sequences(doc):
                arr = _fitted(seq, dtype=dtype, where=f"document {d}")
                out.write(arr.tobytes())
                lengths.append(len(arr))
            bounds.append(len(lengths))
    size = np.dtype(dtype).itemsize
    pointers = np.zeros(len(lengths), dtype="<i8")
    if lengths:
        pointers[1:] = np.cumsum(np.asarray(lengths[:-1], dtype=np.int64) * size)
    with _Replacing(f"{prefix}.idx") as out:
        out.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, _CODES[dtype], len(lengths), len(bounds)))
        out.write(np.asarray(lengths, dtype="<i4").tobytes())
        out.write(pointers.tobytes())
        out.write(np.asarray(bounds, dtype="<i8").tobytes())
    return int(sum(lengths))


def write_llmc(path: str | os.PathLike[str], tokens: Tokens, *, model: str = "gpt-2") -> int:
    """Writes tokens as an llm.c token file (256 int32 of header: magic,
    version and token count; then the tokens, uint16 for "gpt-2", uint32 for
    "llama-3") and returns their number. It appears complete or not at
    all."""
    if model not in _LLMC:
        raise ValueError(f"model {model!r}: want one of {', '.join(_LLMC)}")
    magic, version, dtype = _LLMC[model]
    arr = _fitted(tokens, dtype=dtype, where=os.fspath(path))
    if len(arr) >= 1 << 31:
        raise ValueError(f"{os.fspath(path)}: {len(arr)} tokens: an llm.c file holds fewer than 2^31")
    header = np.zeros(256, dtype="<i4")
    header[:3] = magic, version, len(arr)
    with _Replacing(os.fspath(path)) as out:
        out.write(header.tobytes())
        out.write(arr.tobytes())
    return len(arr)


def _sequences(doc: Document) -> list[Tokens]:
    """The sequences of a document: itself, or its arrays."""
    if isinstance(doc, np.ndarray):
        return [doc] if doc.ndim <= 1 else list(doc)
    items: list[Tokens] = list(doc)  # type: ignore[arg-type]
    if items and all(isinstance(i, (list, tuple, np.ndarray)) for i in items):
        return items
    return [np.asarray(items)]


def _fitted(tokens: Tokens, *, dtype: str, where: str) -> npt.NDArray[np.generic]:
    """tokens as a little-endian array of dtype, every value checked to fit."""
    arr = np.asarray(tokens)
    if arr.ndim != 1:
        raise ValueError(f"{where}: tokens of shape {arr.shape}: want a 1-D array")
    if arr.size and np.issubdtype(np.dtype(dtype), np.integer):
        if not np.issubdtype(arr.dtype, np.integer):
            raise ValueError(f"{where}: {arr.dtype} values are not token ids")
        info = np.iinfo(dtype)
        lo, hi = int(arr.min()), int(arr.max())
        if lo < info.min or hi > info.max:
            raise ValueError(f"{where}: token {lo if lo < info.min else hi} does not fit {dtype}")
    return arr.astype(np.dtype(dtype).newbyteorder("<"))


class _Replacing:
    """A file written beside path and renamed onto it when the block ends
    without an exception; removed otherwise."""

    def __init__(self, path: str) -> None:
        self.path = path
        fd, self.tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=f".{os.path.basename(path)}.")
        self.f = os.fdopen(fd, "wb")

    def __enter__(self) -> _Replacing:
        return self

    def write(self, b: bytes) -> None:
        self.f.write(b)

    def __exit__(self, kind: object, *_: object) -> None:
        try:
            if kind is None:
                self.f.flush()
                os.fsync(self.f.fileno())
            self.f.close()
            if kind is None:
                os.replace(self.tmp, self.path)
        finally:
            if os.path.exists(self.tmp):
                os.unlink(self.tmp)
