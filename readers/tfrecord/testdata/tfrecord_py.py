"""TFRecord files of tf.train.Example written and read by an implementation
independent of actorfeed's: Debian's python3-crc32c for the checksums and
python3-protobuf for the messages, whose classes are built here from
tensorflow/core/example/feature.proto and example.proto.

  tfrecord_py.py write OUT N   writes N records to OUT (OUT.gz too)
  tfrecord_py.py read FILE     prints each record's features as JSON lines
"""

import gzip
import json
import struct
import sys

import crc32c
from google.protobuf import descriptor_pb2, message_factory

F = descriptor_pb2.FieldDescriptorProto


def classes():
    fdp = descriptor_pb2.FileDescriptorProto(name="tf_example.proto", package="tensorflow", syntax="proto3")
    for name, typ in (("BytesList", F.TYPE_BYTES), ("FloatList", F.TYPE_FLOAT), ("Int64List", F.TYPE_INT64)):
        m = fdp.message_type.add(name=name)
        f = m.field.add(name="value", number=1, type=typ, label=F.LABEL_REPEATED)
        if typ != F.TYPE_BYTES:
            f.options.packed = True
    feature = fdp.message_type.add(name="Feature")
    feature.oneof_decl.add(name="kind")
    for i, (name, typ) in enumerate((("bytes_list", "BytesList"), ("float_list", "FloatList"),
                                     ("int64_list", "Int64List"))):
        feature.field.add(name=name, number=i + 1, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                          type_name=".tensorflow." + typ, oneof_index=0)
    features = fdp.message_type.add(name="Features")
    entry = features.nested_type.add(name="FeatureEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL, type_name=".tensorflow.Feature")
    features.field.add(name="feature", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                       type_name=".tensorflow.Features.FeatureEntry")
    example = fdp.message_type.add(name="Example")
    example.field.add(name="features", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                      type_name=".tensorflow.Features")
    return message_factory.GetMessages([fdp])["tensorflow.Example"]


def masked(data):
    c = crc32c.crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def sample(i):
    """Record i's features, as the Go test computes them too."""
    return {
        "image/encoded": bytes((i * 7 + j) % 256 for j in range(10 + i)),
        "label": [i * 3 - 5],
        "pair": [i * 0.5, -float(i)],
        "tokens": list(range(i % 4)),
    }


def write(out, n):
    Example = classes()
    records = []
    for i in range(n):
        ex = Example()
        for name, v in sample(i).items():
            f = ex.features.feature[name]
            if isinstance(v, bytes):
                f.bytes_list.value.append(v)
            elif name == "pair":
                f.float_list.value.extend(v)
            else:
                f.int64_list.value.extend(v)
        data = ex.SerializeToString()
        length = struct.pack("<Q", len(data))
        records.append(length + struct.pack("<I", masked(length)) + data + struct.pack("<I", masked(data)))
    with open(out, "wb") as f:
        f.write(b"".join(records))
    with gzip.open(out + ".gz", "wb") as f:
        f.write(b"".join(records))


def read(path):
    Example = classes()
    with open(path, "rb") as f:
        raw = f.read()
    at = 0
    while at < len(raw):
        length = raw[at:at + 8]
        (n,) = struct.unpack("<Q", length)
        assert struct.unpack("<I", raw[at + 8:at + 12])[0] == masked(length), "length checksum at %d" % at
        data = raw[at + 12:at + 12 + n]
        assert struct.unpack("<I", raw[at + 12 + n:at + 16 + n])[0] == masked(data), "data checksum at %d" % at
        at += 16 + n
        ex = Example.FromString(data)
        out = {}
        for name, f in ex.features.feature.items():
            kind = f.WhichOneof("kind")
            values = list(getattr(f, kind).value)
            out[name] = [v.hex() for v in values] if kind == "bytes_list" else values
        print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2], int(sys.argv[3]))
    else:
        read(sys.argv[2])
