"""Checking the Loader's arguments before any process starts: a bad one is
a ValueError naming the parameter."""

import glob
import os
import re

from . import _braces

MAPS = ("normalize",)
FORMATS = ("recordio", "idx", "wds", "tfrecord", "megatron", "llmc")
MAX_WINDOW = 1 << 26
MAX_SLOTS = 1 << 16
MAX_BATCH = 1 << 20
MAX_WORLD = 1 << 16
MAX_EPOCH = (1 << 32) - 1
_HOST_PORT = re.compile(r"^[^\s:]+:\d{1,5}$")
_DECODE = re.compile(r"^decode\([^()]*\)$")  # the feed checks the parameters


def _int(name, v, lo, hi):
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError("%s must be an int, not %r" % (name, v))
    if v < lo or v > hi:
        raise ValueError("%s=%d is out of range: it must be from %d to %d" % (name, v, lo, hi))
    return v


def _bool(name, v):
    if not isinstance(v, bool):
        raise ValueError("%s must be True or False, not %r" % (name, v))
    return v


def data_entries(data):
    """The files or globs of data, each optionally format:path, braces
    expanded ("shard-{000000..000099}.tar", as WebDataset's lists); each
    must name a file now, unless it is an object's URL (s3://bucket/key)."""
    entries = [data] if isinstance(data, (str, os.PathLike)) else data
    if not isinstance(entries, (list, tuple)) or not entries:
        raise ValueError("data must be a path, a glob, or a non-empty list of them, not %r" % (data,))
    out = []
    for braced in entries:
        if not isinstance(braced, (str, os.PathLike)):
            raise ValueError("data: %r is not a path" % (braced,))
        try:
            each = _braces.expand(os.fspath(braced))
        except ValueError as err:
            raise ValueError("data: %s" % err) from None
        out += [_data_entry(e) for e in each]
    return out


def _data_entry(e):
    """e, checked: a file, a glob that matches one, or an object's URL."""
    path = e
    prefix, sep, rest = e.partition(":")
    if sep and prefix in FORMATS:
        path = rest
    elif "(" in prefix and "):" in e and prefix.split("(", 1)[0] in FORMATS:
        path = e.split("):", 1)[1]  # format(params):path
    if path.startswith("s3://"):
        pass  # an object, or a pattern of them: the feed lists and opens them, and says what is wrong
    elif glob.has_magic(path):
        if not glob.glob(path):
            raise ValueError("data: %s matches no file" % e)
    elif not os.path.isfile(path):
        raise ValueError("data: %s is not a file" % e)
    return e


_FEATURE = re.compile(r"^\s*[^()\[\],=:\s][^()\[\],=:]*=\s*(bytes|(float|int64)\s*(\[\s*(\d+\s*(,\s*\d+\s*)*)?\])?)\s*$")


def features_spec(features):
    """--features of features: "name=kind,..." or {name: kind}, a kind
    bytes, float or int64, float and int64 with an optional [shape]."""
    if features is None:
        return None
    if isinstance(features, dict):
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in features.items()):
            raise ValueError("features: %r: want {name: kind} of strings" % (features,))
        items = ["%s=%s" % kv for kv in features.items()]
    elif isinstance(features, str):
        items = re.split(r",(?![^\[]*\])", features)
    else:
        raise ValueError("features must be a dict {name: kind} or a string name=kind,..., not %r" % (features,))
    for item in items:
        if not _FEATURE.match(item):
            raise ValueError("features: %r: want name=kind, kind bytes, float or int64 (float and int64 may "
                             "take a shape: float[2,3], or [] for any number of values)" % (item,))
    if not items:
        raise ValueError("features: empty")
    return ",".join(i.strip() for i in items)


def shuffle_window(shuffle):
    """--shuffle for shuffle: True is "auto" (the global order where the
    files are read by position, else a window of 4,096 samples), "all" the
    global order alone, an int a window of samples, False none."""
    if isinstance(shuffle, bool):
        return "auto" if shuffle else 0
    if shuffle == "all":
        return "all"
    if isinstance(shuffle, str):
        raise ValueError(f"shuffle: {shuffle!r}: want True, False, a window of samples (an int) or \"all\"")
    return _int("shuffle", shuffle, 0, MAX_WINDOW)


def rank_world(rank, world):
    """rank and world as given, else torch.distributed's when it is
    initialised, else RANK and WORLD_SIZE, else 0 of 1."""
    if rank is None or world is None:
        r, w = _default_rank_world()
        rank = r if rank is None else rank
        world = w if world is None else world
    _int("world", world, 1, MAX_WORLD)
    _int("rank", rank, 0, world - 1)
    return rank, world


def _default_rank_world():
    import sys

    torch = sys.modules.get("torch")  # initialised only if imported already
    if torch is not None:
        dist = getattr(torch, "distributed", None)
        if dist is not None and dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    try:
        return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError as e:
        raise ValueError("rank and world: RANK or WORLD_SIZE is not an int (%s); pass rank= and world=" % e) from None


def service_workers(service):
    if service is None:
        return []
    if isinstance(service, str):
        service = [service]
    if not isinstance(service, (list, tuple)) or not service:
        raise ValueError("service must be a list of host:port, not %r" % (service,))
    for s in service:
        if not isinstance(s, str) or not _HOST_PORT.match(s):
            raise ValueError("service: %r is not host:port" % (s,))
    return list(service)


def names_of(names):
    if names is None:
        return None
    if isinstance(names, str) or not isinstance(names, (list, tuple)) or not names:
        raise ValueError("names must be a list of slot names, not %r" % (names,))
    for n in names:
        if not isinstance(n, str) or not n or n in ("ids",):
            raise ValueError("names: %r is not a usable name (a non-empty string other than 'ids')" % (n,))
    if len(set(names)) != len(names):
        raise ValueError("names: %r names a slot twice" % (names,))
    return list(names)


# The loader's parameters by the feed's flags, as feed_args passes them.
PARAMS = {"--data": "data", "--batch": "batch_size", "--shuffle": "shuffle", "--seed": "seed", "--rank": "rank",
          "--world": "world", "--slots": "slots", "--remainder": "remainder", "--on-corrupt": "on_corrupt",
          "--drop-last": "drop_last", "--map": "map", "--threads": "threads", "--slot-bytes": "slot_bytes",
          "--service": "service", "--features": "features", "--global-batch": "global_batch"}


def in_params(message):
    """The feed's words for a bad flag in the loader's parameters' words:
    '--map "decode(size=-3)": ...' is 'map="decode(size=-3)": ...'."""
    m = re.match(r"(?:actorfeed: )?(--[a-z-]+)(?: |: )(.*)", message, re.S)
    if not m or m.group(1) not in PARAMS:
        return message
    return "%s=%s" % (PARAMS[m.group(1)], m.group(2))


def feed_args(o):
    """The feed command's flags for the checked options o (a dict)."""
    batch = ["--global-batch", str(o["global_batch"])] if o["global_batch"] else ["--batch", str(o["batch_size"])]
    args = batch + ["--shuffle", str(o["window"]), "--seed", str(o["seed"]),
            "--rank", str(o["rank"]), "--world", str(o["world"]), "--slots", str(o["slots"]),
            "--remainder", o["remainder"], "--on-corrupt", o["on_corrupt"]]
    for e in o["data"]:
        args += ["--data", e]
    if o["drop_last"]:
        args.append("--drop-last")
    if o["map"]:
        args += ["--map", o["map"]]
    if o["threads"]:
        args += ["--threads", str(o["threads"])]
    if o["slot_bytes"]:
        args += ["--slot-bytes", str(o["slot_bytes"])]
    for w in o["service"]:
        args += ["--service", w]
    if o["features"]:
        args += ["--features", o["features"]]
    return args


def batch_sizes(batch_size: int | None, global_batch: int | None, rank: int, world: int) -> tuple[int, int]:
    """(batch_size, global_batch) checked: one of them is given; with a
    global batch, this rank's batch is its slice of a step (the global
    batch over the world, or one more for the first global_batch % world
    ranks), and global_batch is 0 without one."""
    if (batch_size is None) == (global_batch is None):
        raise ValueError("give batch_size (this rank's batches) or global_batch (every step's samples, "
                         "sliced among the ranks), one of them")
    if global_batch is None:
        return _int("batch_size", batch_size, 1, MAX_BATCH), 0
    _int("global_batch", global_batch, world, MAX_BATCH)
    return global_batch // world + (1 if rank < global_batch % world else 0), global_batch


def check(data, batch_size, shuffle, seed, drop_last, epochs, rank, world, map, names, torch, slots,
          slot_bytes, service, threads, on_corrupt, remainder, features, global_batch=None):
    o = {"data": data_entries(data),
         "window": shuffle_window(shuffle), "seed": _int("seed", seed, 0, (1 << 64) - 1),
         "drop_last": _bool("drop_last", drop_last), "slots": _int("slots", slots, 2, MAX_SLOTS),
         "service": service_workers(service), "names": names_of(names), "torch": _bool("torch", torch),
         "features": features_spec(features)}
    o["epochs"] = None if epochs is None else _int("epochs", epochs, 1, MAX_EPOCH)
    o["rank"], o["world"] = rank_world(rank, world)
    o["batch_size"], o["global_batch"] = batch_sizes(batch_size, global_batch, o["rank"], o["world"])
    o["map"], o["fn"] = None, None
    if callable(map):
        o["fn"] = map
    elif map is not None and map not in MAPS and not _DECODE.match(str(map)):
        raise ValueError("map=%r: want a function of a batch, or the name of a map of the pipeline (%s, "
                         "or decode(size=224,...))" % (map, ", ".join(MAPS)))
    else:
        o["map"] = map
    o["slot_bytes"] = None if slot_bytes is None else _int("slot_bytes", slot_bytes, 4096, 1 << 35)
    o["threads"] = None if threads is None else _int("threads", threads, 1, 1 << 12)
    if on_corrupt not in ("fail", "skip"):
        raise ValueError("on_corrupt=%r: want 'fail' or 'skip'" % (on_corrupt,))
    if remainder not in ("drop", "pad"):
        raise ValueError("remainder=%r: want 'drop' or 'pad'" % (remainder,))
    o["on_corrupt"], o["remainder"] = on_corrupt, remainder
    if o["torch"]:
        try:
            import torch as _  # noqa: F401
        except ImportError:
            raise ValueError("torch=True but torch is not installed (apt-get install python3-torch)") from None
    return o
