"""The ecosystem's own readers, as an oracle for actorfeed's differential
tests (package internal/oracle): Python's tarfile grouped into samples as
the webdataset library groups them, TFRecord read and written with
python3-crc32c and python3-protobuf (tf.train.Example's classes built
from example.proto and feature.proto here), and images decoded and
written by Pillow.

Requests come on stdin, answers go to stdout, each a 4-byte little-endian
length and that many bytes: a request is an op, then its input; an answer
is a JSON header, then a payload (an image's RGB bytes, or nothing). The
process ends when stdin does.
"""

import io
import json
import re
import struct
import sys
import tarfile
from typing import IO, Any

import crc32c  # type: ignore[import]  # it ships no types
from google.protobuf import descriptor_pb2, message_factory  # type: ignore[import]  # Debian has no stubs for it

# An answer's JSON header.
Head = dict[str, Any]


def read_frame(f: IO[bytes]) -> bytes | None:
    head = f.read(4)
    if len(head) < 4:
        return None
    (n,) = struct.unpack("<I", head)
    data = f.read(n)
    if len(data) < n:
        return None
    return data


def write_frame(f: IO[bytes], data: bytes) -> None:
    f.write(struct.pack("<I", len(data)))
    f.write(data)


# webdataset's tariterators.base_plus_ext: the key is the path up to the
# first dot of the file's name, the field the rest.
BASE_PLUS_EXT = re.compile(r"^((?:.*/|)[^.]+)[.]([^/]*)$")

MAX_MEMBER_BYTES = 256 << 20


def tar_samples(data: bytes) -> Head:
    """The samples webdataset makes of a shard: its regular members (as
    tarfile counts them: sparse and contiguous files too) grouped by key
    while the key stays the same, fields lower-cased; a field given twice
    in a sample is webdataset's ValueError. On an error, the samples whole
    before it too, and apart the one being read when it came ("partial":
    webdataset would not hand it out)."""
    samples: list[Head] = []
    current: Head | None = None
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            for m in tar:
                if not m.isreg():
                    continue
                match = BASE_PLUS_EXT.match(m.name)
                if not match:
                    continue
                key, ext = match.group(1), match.group(2).lower()
                if m.size > MAX_MEMBER_BYTES:
                    # actorfeed refuses it (wds.MaxMemberBytes); webdataset
                    # would read it into memory, a sparse one's holes too.
                    raise ValueError(f"{m.name}: {m.size} bytes, more than a member may hold")
                f = tar.extractfile(m)
                if f is None:
                    raise ValueError(f"{m.name}: tarfile cannot extract it")
                payload = f.read()
                if current is None or current["key"] != key:
                    current = {"key": key, "fields": {}}
                    samples.append(current)
                if ext in current["fields"]:
                    raise ValueError(f"{m.name}: duplicate file name in tar file {ext}")
                current["fields"][ext] = payload.hex()
    except Exception as e:
        return {"samples": samples[:-1], "partial": samples[-1:], "error": described(e)}
    return {"samples": samples}


def described(e: Exception) -> str:
    return f"{type(e).__name__}: {e}"


F = descriptor_pb2.FieldDescriptorProto


def example_class() -> Any:
    fdp = descriptor_pb2.FileDescriptorProto(name="oracle_example.proto", package="oracle", syntax="proto3")
    for name, typ in (("BytesList", F.TYPE_BYTES), ("FloatList", F.TYPE_FLOAT), ("Int64List", F.TYPE_INT64)):
        m = fdp.message_type.add(name=name)
        f = m.field.add(name="value", number=1, type=typ, label=F.LABEL_REPEATED)
        if typ != F.TYPE_BYTES:
            f.options.packed = True
    feature = fdp.message_type.add(name="Feature")
    feature.oneof_decl.add(name="kind")
    for i, (name, typ) in enumerate((("bytes_list", "BytesList"), ("float_list", "FloatList"), ("int64_list", "Int64List"))):
        feature.field.add(name=name, number=i + 1, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                          type_name=".oracle." + typ, oneof_index=0)
    features = fdp.message_type.add(name="Features")
    entry = features.nested_type.add(name="FeatureEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL, type_name=".oracle.Feature")
    features.field.add(name="feature", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                       type_name=".oracle.Features.FeatureEntry")
    example = fdp.message_type.add(name="Example")
    example.field.add(name="features", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL, type_name=".oracle.Features")
    return message_factory.GetMessages([fdp])["oracle.Example"]


Example = example_class()


def masked(data: bytes) -> int:
    c = int(crc32c.crc32c(data))
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def features(payload: bytes) -> Head:
    ex = Example.FromString(payload)
    out: Head = {}
    for name, f in ex.features.feature.items():
        kind = f.WhichOneof("kind")
        if kind is None:
            out[name] = ["none", []]
        elif kind == "bytes_list":
            out[name] = ["bytes", [v.hex() for v in f.bytes_list.value]]
        elif kind == "float_list":
            out[name] = ["float", [struct.unpack("<I", struct.pack("<f", v))[0] for v in f.float_list.value]]
        else:
            out[name] = ["int64", list(f.int64_list.value)]
    return out


def tfrecord_records(data: bytes) -> Head:
    """Each record: its features, {name: [kind, values]} (bytes as hex,
    floats as their bits), or, where its data fails its checksum or does
    not parse, why; until the file ends or its framing (a length, its
    checksum) fails: then the records before it and the error."""
    records: list[Head] = []
    at = 0
    try:
        while at < len(data):
            if len(data) - at < 12:
                raise ValueError(f"a header cut off at {at}")
            length = data[at:at + 8]
            (n,) = struct.unpack("<Q", length)
            if struct.unpack("<I", data[at + 8:at + 12])[0] != masked(length):
                raise ValueError(f"length checksum at {at}")
            if len(data) - at - 16 < n:
                raise ValueError(f"a record cut off at {at}")
            payload = data[at + 12:at + 12 + n]
            crc = struct.unpack("<I", data[at + 12 + n:at + 16 + n])[0]
            at += 16 + n
            if crc != masked(payload):
                records.append({"error": "data checksum"})
                continue
            try:
                records.append({"features": features(payload)})
            except Exception as e:
                records.append({"error": described(e)})
    except Exception as e:
        return {"records": records, "error": described(e)}
    return {"records": records}


def tfrecord_write(data: bytes) -> tuple[Head, bytes]:
    """A TFRecord file of the records in data (JSON, as tfrecord_records
    gives them), written by protobuf and crc32c."""
    out = []
    for record in json.loads(data):
        ex = Example()
        for name, (kind, values) in record.items():
            f = ex.features.feature[name]
            if kind == "bytes":
                f.bytes_list.value.extend(bytes.fromhex(v) for v in values)
            elif kind == "float":
                f.float_list.value.extend(struct.unpack("<f", struct.pack("<I", v))[0] for v in values)
            elif kind == "int64":
                f.int64_list.value.extend(values)
        payload = ex.SerializeToString()
        length = struct.pack("<Q", len(payload))
        out.append(length + struct.pack("<I", masked(length)) + payload + struct.pack("<I", masked(payload)))
    return {}, b"".join(out)


def image_rgb(data: bytes) -> tuple[Head, bytes]:
    from PIL import Image
    with Image.open(io.BytesIO(data)) as im:
        im.load()
        rgb = im.convert("RGB")
        return {"w": rgb.size[0], "h": rgb.size[1], "mode": im.mode}, rgb.tobytes()


def encode_image(params: bytes) -> tuple[Head, bytes]:
    """An image Pillow writes: params (JSON) give its mode, size, format
    and, for a JPEG, quality, subsampling and progressive; its pixels are
    gradients and noise from the seed, as photographs have both."""
    import numpy as np
    from PIL import Image
    p = json.loads(params)
    rng = np.random.default_rng(p["seed"])
    w, h, mode = p["w"], p["h"], p["mode"]
    bands = {"L": 1, "LA": 2, "RGB": 3, "RGBA": 4, "CMYK": 4, "P": 3}[mode]
    y, x = np.mgrid[0:h, 0:w]
    planes = [(x * rng.integers(1, 9) + y * rng.integers(0, 9) + rng.integers(0, 255)) % 256 for _ in range(bands)]
    pixels = np.clip(np.stack(planes, axis=2) + rng.integers(-20, 21, size=(h, w, bands)), 0, 255).astype(np.uint8)
    if bands == 1:
        pixels = pixels[:, :, 0]
    im = Image.fromarray(pixels, "RGB" if mode == "P" else mode)
    kw: Head = {"format": p["format"]}
    if mode == "P":
        # The stubs admit only Palette.WEB; Pillow takes ADAPTIVE too.
        im = im.convert("P", palette=Image.Palette.ADAPTIVE, colors=p.get("colors", 256))  # type: ignore[arg-type]
        if "transparency" in p:
            kw["transparency"] = p["transparency"]
    if p["format"] == "JPEG":
        kw.update(quality=p.get("quality", 90), subsampling=p.get("subsampling", 2), progressive=p.get("progressive", False))
    b = io.BytesIO()
    im.save(b, **kw)
    return {}, b.getvalue()


# Megatron-LM's dtype codes and NumPy types (indexed_dataset.py, DType).
MEGATRON_DTYPES = {"uint8": (1, "<u1"), "int8": (2, "<i1"), "int16": (3, "<i2"), "int32": (4, "<i4"),
                   "int64": (5, "<i8"), "float64": (6, "<f8"), "float32": (7, "<f4"), "uint16": (8, "<u2")}


def megatron_write(params: bytes) -> tuple[Head, bytes]:
    """An indexed dataset as Megatron-LM's builder writes it, from params
    (JSON: dtype, and documents, each a list of sequences of tokens): the
    .idx (9-byte magic, version 1, dtype code, sequence and document
    counts, int32 lengths, int64 byte pointers, int64 document indices
    with a leading 0) and then the .bin, one payload; head says the .idx's
    size."""
    import numpy as np
    p = json.loads(params)
    code, dt = MEGATRON_DTYPES[p["dtype"]]
    lengths: list[int] = []
    documents = [0]
    parts = []
    for doc in p["documents"]:
        for seq in doc:
            lengths.append(len(seq))
            parts.append(np.asarray(seq, dtype=dt).tobytes())
        documents.append(len(lengths))
    itemsize = np.dtype(dt).itemsize
    pointers = np.zeros(len(lengths), dtype="<i8")
    if lengths:
        pointers[1:] = np.cumsum(np.asarray(lengths[:-1], dtype=np.int64) * itemsize)
    idx = b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", code)
    idx += struct.pack("<Q", len(lengths)) + struct.pack("<Q", len(documents))
    idx += np.asarray(lengths, dtype="<i4").tobytes() + pointers.tobytes() + np.asarray(documents, dtype="<i8").tobytes()
    return {"idx": len(idx)}, idx + b"".join(parts)


def llmc_write(params: bytes) -> tuple[Head, bytes]:
    """A token file as llm.c's write_datafile writes it, from params (JSON:
    model, "gpt-2" or "llama-3", and tokens): 256 int32 of header (magic,
    version, token count), then the tokens as uint16 or uint32."""
    import numpy as np
    p = json.loads(params)
    magic, version, dt = {"gpt-2": (20240520, 1, np.uint16), "llama-3": (20240801, 7, np.uint32)}[p["model"]]
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = magic, version, len(p["tokens"])
    return {}, header.tobytes() + np.array(p["tokens"], dtype=dt).tobytes()


def serve() -> None:
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        op = read_frame(stdin)
        data = read_frame(stdin)
        if op is None or data is None:
            return
        payload = b""
        head: Head
        try:
            if op == b"tar":
                head = tar_samples(data)
            elif op == b"tfrecord":
                head = tfrecord_records(data)
            elif op == b"tfrecord-write":
                head, payload = tfrecord_write(data)
            elif op == b"image":
                head, payload = image_rgb(data)
            elif op == b"encode":
                head, payload = encode_image(data)
            elif op == b"megatron-write":
                head, payload = megatron_write(data)
            elif op == b"llmc-write":
                head, payload = llmc_write(data)
            else:
                head = {"error": f"no op {op!r}"}
        except Exception as e:
            head = {"error": described(e)}
        write_frame(stdout, json.dumps(head).encode())
        write_frame(stdout, payload)
        stdout.flush()


if __name__ == "__main__":
    serve()
