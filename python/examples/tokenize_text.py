"""Trains a SentencePiece model on an English text and writes the text,
tokenized, as a Megatron-LM indexed dataset: the path from text to a token
corpus that actorfeed reads.

    python3 python/examples/tokenize_text.py --text /usr/share/games/fortunes/computers \\
        --model out/fortunes-spm --out out/fortunes_text_document

The text is fortune(6)'s format (Debian's fortunes package): documents
separated by lines holding "%". Each document, its lines joined, is one
sentence of the tokenizer's training and one document of the dataset,
ended by the model's end-of-sequence token.
"""

from __future__ import annotations

import argparse
import tempfile

import numpy as np
import sentencepiece as spm

import actorfeed


def documents(paths: list[str]) -> list[str]:
    """The documents of fortune files, each on one line."""
    out: list[str] = []
    for p in paths:
        with open(p, encoding="utf-8", errors="replace") as f:
            text = f.read()
        out += [" ".join(d.split()) for d in text.split("\n%\n") if d.strip()]
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--text", nargs="+", required=True, help="fortune files: documents between lines of %%")
    p.add_argument("--model", required=True, help="the SentencePiece model's prefix (PREFIX.model, PREFIX.vocab)")
    p.add_argument("--out", required=True, help="the indexed dataset's prefix (PREFIX.bin, PREFIX.idx)")
    p.add_argument("--vocab", type=int, default=2000, help="the tokenizer's vocabulary size")
    a = p.parse_args()
    docs = documents(a.text)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", encoding="utf-8") as f:
        f.write("\n".join(docs))
        f.flush()
        # One thread: the model is then the same on every machine.
        spm.SentencePieceTrainer.train(input=f.name, model_prefix=a.model, vocab_size=a.vocab,
                                       character_coverage=1.0, num_threads=1, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=f"{a.model}.model")
    tokens = actorfeed.write_indexed(a.out, (np.array(ids + [sp.eos_id()]) for ids in sp.encode(docs)),
                                     dtype="uint16")
    print(f"{len(docs)} documents, {tokens} tokens of a vocabulary of {sp.get_piece_size()}: {a.out}.bin")


if __name__ == "__main__":
    main()
