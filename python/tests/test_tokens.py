"""Token corpora: Megatron-LM's indexed datasets and llm.c's token files,
written by actorfeed's writers, read back by NumPy as the published layouts
say, and read by the Loader as packed samples of seq_len+1 tokens in the
global order, every sample of an epoch once."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

import actorfeed

SEQ_LEN = 32


def corpus(seed: int) -> list[list[npt.NDArray[np.int64]]]:
    """300 documents of one or two sequences of 0 to 99 tokens below 50,000."""
    rng = np.random.default_rng(seed)
    return [[rng.integers(0, 50000, size=int(rng.integers(0, 100))) for _ in range(int(rng.integers(1, 3)))]
            for _ in range(300)]


def read_idx(prefix: str) -> tuple[int, list[int], list[int], list[int]]:
    """An .idx as Megatron-LM's layout says: magic, version 1, dtype code,
    counts, then int32 lengths, int64 pointers, int64 document indices."""
    b = Path(f"{prefix}.idx").read_bytes()
    assert b[:9] == b"MMIDIDX\x00\x00"
    version, code, n, docs = struct.unpack("<QBQQ", b[9:34])
    assert version == 1
    lengths = np.frombuffer(b, dtype="<i4", count=n, offset=34)
    pointers = np.frombuffer(b, dtype="<i8", count=n, offset=34 + 4 * n)
    documents = np.frombuffer(b, dtype="<i8", count=docs, offset=34 + 12 * n)
    assert len(b) == 34 + 12 * n + 8 * docs
    return code, lengths.tolist(), pointers.tolist(), documents.tolist()


def test_an_indexed_dataset_reads_back_as_megatron_lays_it_out(tmp_path: Path) -> None:
    docs = corpus(1)
    prefix = str(tmp_path / "web_text_document")
    n = actorfeed.write_indexed(prefix, docs, dtype="uint16")
    code, lengths, pointers, documents = read_idx(prefix)
    seqs = [s for d in docs for s in d]
    assert code == 8 and n == sum(len(s) for s in seqs)
    assert lengths == [len(s) for s in seqs]
    assert pointers == [2 * sum(lengths[:i]) for i in range(len(lengths))]
    assert documents == [0] + np.cumsum([len(d) for d in docs]).tolist()
    tokens = np.fromfile(f"{prefix}.bin", dtype="<u2")
    assert tokens.tolist() == np.concatenate(seqs).tolist()


def test_a_token_that_does_not_fit_is_refused_and_nothing_written(tmp_path: Path) -> None:
    prefix = str(tmp_path / "web")
    with pytest.raises(ValueError, match="document 1: token 70000 does not fit uint16"):
        actorfeed.write_indexed(prefix, [[1, 2], [3, 70000]], dtype="uint16")
    assert os.listdir(tmp_path) == []


def test_the_loader_reads_packed_samples_of_a_corpus_in_the_global_order(tmp_path: Path) -> None:
    """Token i of sequence s is s*1000 + i: each row is whole runs of
    consecutive tokens of sequences (entered at their start but for the
    row's first), its positions restarting at each; every sample of an
    epoch comes once, in another order each epoch."""
    lengths = [(s * 37) % 151 for s in range(400)]
    prefix = str(tmp_path / "web")
    actorfeed.write_indexed(prefix, (np.arange(n) + 1000 * s for s, n in enumerate(lengths)), dtype="int32")
    samples = (sum(lengths) - 1) // SEQ_LEN
    with actorfeed.Loader(f"megatron(seq_len={SEQ_LEN}):{prefix}.bin", batch_size=8, seed=5) as loader:
        epochs = []
        for epoch in range(2):
            loader.set_epoch(epoch)
            seen = []
            for b in loader:
                for row, sample_id in enumerate(b["ids"].tolist()):
                    check_row(b["tokens"][row].tolist(), b["positions"][row].tolist())
                    seen.append(sample_id & ((1 << 40) - 1))
            assert sorted(seen) == list(range(samples)), f"epoch {epoch}"
            epochs.append(seen)
    assert epochs[0] != epochs[1]


def check_row(tokens: list[int], positions: list[int]) -> None:
    """A row of numbered sequences: runs of consecutive tokens, each new
    sequence entered at its first token with its position 0."""
    assert positions[0] == 0
    for k in range(1, len(tokens)):
        if tokens[k] // 1000 != tokens[k - 1] // 1000:
            assert tokens[k] % 1000 == 0 and positions[k] == 0, (k, tokens[k - 1:k + 1])
        else:
            assert tokens[k] == tokens[k - 1] + 1 and positions[k] == positions[k - 1] + 1, k


def positions(starts: set[int], at: int) -> list[int]:
    """Each token's position in its document, from the sample at at on."""
    out, p = [], 0
    for k in range(SEQ_LEN + 1):
        if k > 0 and at + k in starts:
            p = 0
        out.append(p)
        p += 1
    return out


@pytest.mark.parametrize("model,dtype", [("gpt-2", "<u2"), ("llama-3", "<u4")])
def test_an_llmc_file_reads_back_and_loads(tmp_path: Path, model: str, dtype: str) -> None:
    rng = np.random.default_rng(3)
    eot = 50256
    stream = rng.integers(0, 50000 if model == "gpt-2" else 128000, size=4000)
    stream[::97] = eot  # each document starts with the end-of-text token, as llm.c's scripts write them
    path = str(tmp_path / "train.bin")
    assert actorfeed.write_llmc(path, stream, model=model) == len(stream)
    header = np.fromfile(path, dtype="<i4", count=256)
    assert header[:3].tolist() == {"gpt-2": [20240520, 1, 4000], "llama-3": [20240801, 7, 4000]}[model]
    assert np.fromfile(path, dtype=dtype, offset=1024).tolist() == stream.tolist()
    starts = set(np.flatnonzero(stream == eot).tolist())
    with actorfeed.Loader(f"llmc(seq_len={SEQ_LEN},eot={eot}):{path}", batch_size=16, seed=1) as loader:
        n = 0
        for b in loader:
            for row, sample_id in enumerate(b["ids"].tolist()):
                at = (sample_id & ((1 << 40) - 1)) * SEQ_LEN
                assert b["tokens"][row].tolist() == stream[at:at + SEQ_LEN + 1].tolist()
                assert b["positions"][row].tolist() == positions(starts, at)
                n += 1
    assert n == (len(stream) - 1) // SEQ_LEN
