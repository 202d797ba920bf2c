"""Checking the Loader's arguments before any process starts: a bad one is
a ValueError naming the parameter."""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Callable, Sequence
from typing import Any, TypedDict

from . import _braces

MAPS = ("normalize", "to_tensor")
FORMATS = ("recordio", "idx", "wds", "tfrecord", "megatron", "llmc")
MAX_WINDOW = 1 << 26
MAX_SLOTS = 1 << 16
MAX_BATCH = 1 << 20
MAX_WORLD = 1 << 16
MAX_EPOCH = (1 << 32) - 1
_HOST_PORT = re.compile(r"^[^\s:]+:\d{1,5}$")
_DECODE = re.compile(r"^decode\([^()]*\)$")  # the feed checks the parameters


def _int(name: str, v: object, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"{name} must be an int, not {v!r}")
    if v < lo or v > hi:
        raise ValueError(f"{name}={v} is out of range: it must be from {lo} to {hi}")
    return v


def _bool(name: str, v: object) -> bool:
    if not isinstance(v, bool):
        raise ValueError(f"{name} must be True or False, not {v!r}")
    return v


def data_entries(data: object) -> list[str]:
    """The files or globs of data, each optionally format:path, braces
    expanded ("shard-{000000..000099}.tar", as WebDataset's lists); each
    must name a file now, unless it is an object's URL (s3://bucket/key)."""
    entries = [data] if isinstance(data, (str, os.PathLike)) else data
    if not isinstance(entries, (list, tuple)) or not entries:
        raise ValueError(f"data must be a path, a glob, or a non-empty list of them, not {data!r}")
    out: list[str] = []
    for braced in entries:
        if not isinstance(braced, (str, os.PathLike)):
            raise ValueError(f"data: {braced!r} is not a path")
        try:
            each = _braces.expand(os.fspath(braced))
        except ValueError as err:
            raise ValueError(f"data: {err}") from None
        out += [_data_entry(e) for e in each]
    return out


def blend_of(data: object) -> tuple[object, list[float] | None]:
    """data and its weights: a list of (weight, entry) pairs is a blend of
    the entries, one file each; anything else is data without weights."""
    if not isinstance(data, (list, tuple)) or not data or not all(isinstance(d, tuple) for d in data):
        return data, None
    entries: list[object] = []
    weights: list[float] = []
    for d in data:
        if len(d) != 2 or isinstance(d[0], bool) or not isinstance(d[0], (int, float)) or not d[0] >= 0 \
                or d[0] == float("inf"):
            raise ValueError(f"data: {d!r} is not a (weight, file) pair with a finite weight >= 0")
        weights.append(float(d[0]))
        entries.append(d[1])
    if sum(weights) <= 0:
        raise ValueError(f"data: every weight of {data!r} is 0: give a file a positive weight")
    return entries, weights


def weights_from_of(weights_from: object, files: int, weights: list[float] | None,
                    global_batch: int) -> list[tuple[int, list[float]]]:
    """weights_from checked: (global step, weights) pairs in increasing
    steps, each with a weight a file of the blend."""
    if weights_from is None:
        return []
    if weights is None:
        raise ValueError("weights_from changes the weights of a blend: give data as (weight, file) pairs")
    if not global_batch:
        raise ValueError("weights_from names global steps: give global_batch")
    if not isinstance(weights_from, (list, tuple)):
        raise ValueError(f"weights_from must be a list of (step, [weight, ...]) pairs, not {weights_from!r}")
    out: list[tuple[int, list[float]]] = []
    last = 0
    for p in weights_from:
        ok = isinstance(p, (list, tuple)) and len(p) == 2 and isinstance(p[0], int) and p[0] > last \
            and isinstance(p[1], (list, tuple)) and len(p[1]) == files
        if not ok or not all(isinstance(w, (int, float)) and 0 <= w < float("inf") for w in p[1]) or sum(p[1]) <= 0:
            raise ValueError(f"weights_from: {p!r} is not (a step after {last}, {files} weights >= 0, not all 0)")
        last = p[0]
        out.append((p[0], [float(w) for w in p[1]]))
    return out


def _data_entry(e: str) -> str:
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
            raise ValueError(f"data: {e} matches no file")
    elif not os.path.isfile(path):
        raise ValueError(f"data: {e} is not a file")
    return e


_FEATURE = re.compile(r"^\s*[^()\[\],=:\s][^()\[\],=:]*=\s*(bytes|(float|int64)\s*(\[\s*(\d+\s*(,\s*\d+\s*)*)?\])?)\s*$")


def features_spec(features: object) -> str | None:
    """--features of features: "name=kind,..." or {name: kind}, a kind
    bytes, float or int64, float and int64 with an optional [shape]."""
    if features is None:
        return None
    if isinstance(features, dict):
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in features.items()):
            raise ValueError(f"features: {features!r}: want {{name: kind}} of strings")
        items = [f"{k}={v}" for k, v in features.items()]
    elif isinstance(features, str):
        items = re.split(r",(?![^\[]*\])", features)
    else:
        raise ValueError(f"features must be a dict {{name: kind}} or a string name=kind,..., not {features!r}")
    for item in items:
        if not _FEATURE.match(item):
            raise ValueError(f"features: {item!r}: want name=kind, kind bytes, float or int64 (float and int64 may "
                             "take a shape: float[2,3], or [] for any number of values)")
    if not items:
        raise ValueError("features: empty")
    return ",".join(i.strip() for i in items)


def shuffle_window(shuffle: object) -> int | str:
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


def rank_world(rank: int | None, world: int | None) -> tuple[int, int]:
    """rank and world as given, else torch.distributed's when it is
    initialised, else RANK and WORLD_SIZE, else 0 of 1."""
    if rank is None or world is None:
        r, w = _default_rank_world()
        rank = r if rank is None else rank
        world = w if world is None else world
    world = _int("world", world, 1, MAX_WORLD)
    return _int("rank", rank, 0, world - 1), world


def _default_rank_world() -> tuple[int, int]:
    import sys

    torch = sys.modules.get("torch")  # initialised only if imported already
    if torch is not None:
        dist = getattr(torch, "distributed", None)
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(dist.get_rank()), int(dist.get_world_size())
    try:
        return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError as e:
        raise ValueError(f"rank and world: RANK or WORLD_SIZE is not an int ({e}); pass rank= and world=") from None


def service_workers(service: object) -> list[str]:
    if service is None:
        return []
    if isinstance(service, str):
        service = [service]
    if not isinstance(service, (list, tuple)) or not service:
        raise ValueError(f"service must be a list of host:port, not {service!r}")
    for s in service:
        if not isinstance(s, str) or not _HOST_PORT.match(s):
            raise ValueError(f"service: {s!r} is not host:port")
    return [str(s) for s in service]


def names_of(names: object) -> list[str] | None:
    if names is None:
        return None
    if isinstance(names, str) or not isinstance(names, (list, tuple)) or not names:
        raise ValueError(f"names must be a list of slot names, not {names!r}")
    for n in names:
        if not isinstance(n, str) or not n or n in ("ids",):
            raise ValueError(f"names: {n!r} is not a usable name (a non-empty string other than 'ids')")
    if len(set(names)) != len(names):
        raise ValueError(f"names: {names!r} names a slot twice")
    return [str(n) for n in names]


# The loader's parameters by the feed's flags, as feed_args passes them.
PARAMS = {"--data": "data", "--batch": "batch_size", "--shuffle": "shuffle", "--seed": "seed", "--rank": "rank",
          "--world": "world", "--slots": "slots", "--remainder": "remainder", "--on-corrupt": "on_corrupt",
          "--drop-last": "drop_last", "--map": "map", "--threads": "threads", "--slot-bytes": "slot_bytes",
          "--service": "service", "--features": "features", "--global-batch": "global_batch",
          "--weights": "data", "--weights-from": "weights_from", "--blend-samples": "blend_samples",
          "--metrics-addr": "metrics_addr", "--report": "report"}


def in_params(message: str) -> str:
    """The feed's words for a bad flag in the loader's parameters' words:
    '--map "decode(size=-3)": ...' is 'map="decode(size=-3)": ...'."""
    m = re.match(r"(?:actorfeed: )?(--[a-z-]+)(?: |: )(.*)", message, re.S)
    if not m or m.group(1) not in PARAMS:
        return message
    return f"{PARAMS[m.group(1)]}={m.group(2)}"


def feed_args(o: Options) -> list[str]:
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
    if o["weights"] is not None:
        args += ["--weights", ",".join(repr(w) for w in o["weights"])]
    for step, ws in o["weights_from"]:
        args += ["--weights-from", f"{step}:{','.join(repr(w) for w in ws)}"]
    if o["blend_samples"]:
        args += ["--blend-samples", str(o["blend_samples"])]
    if o["metrics_addr"]:
        args += ["--metrics-addr", o["metrics_addr"]]
    if o["report"]:
        args += ["--report", o["report"]]
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


class Options(TypedDict):
    """The Loader's arguments, checked: what the feed's flags and the
    loader's own behaviour are made of."""

    data: list[str]
    window: int | str
    seed: int
    drop_last: bool
    slots: int
    service: list[str]
    names: list[str] | None
    torch: bool
    features: str | None
    epochs: int | None
    rank: int
    world: int
    batch_size: int
    global_batch: int
    map: str | None
    fn: Callable[[Any], Any] | None
    slot_bytes: int | None
    threads: int | None
    on_corrupt: str
    remainder: str
    weights: list[float] | None
    weights_from: list[tuple[int, list[float]]]
    blend_samples: int | None
    metrics_addr: str | None
    report: str | None
    cache_env: dict[str, str]


def cache_bytes(name: str, value: int | str | None) -> str | None:
    """A cache's limit as its environment variable takes it: bytes, or a
    size with a K, M, G or T suffix that the feed reads (and refuses)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"{name}={value!r}: want a number of bytes or a size such as '20G'")
    if isinstance(value, int):
        return str(_int(name, value, 1, 1 << 60))
    return value


def check(*, data: object, batch_size: int | None, shuffle: object, seed: int, drop_last: bool, epochs: int | None,
          rank: int | None, world: int | None, map: object, names: Sequence[str] | None, torch: bool, slots: int,
          slot_bytes: int | None, service: str | Sequence[str] | None, threads: int | None, on_corrupt: str,
          remainder: str, features: str | dict[str, str] | None, global_batch: int | None = None,
          weights_from: object = None, blend_samples: int | None = None, metrics_addr: str | None = None,
          decode_cache_bytes: int | str | None = None, object_cache_bytes: int | str | None = None,
          report: str | None = None) -> Options:
    """The Loader's arguments checked, in this order, each refused with a
    ValueError that names it."""
    data, weights = blend_of(data)
    entries, window = data_entries(data), shuffle_window(shuffle)
    seed, drop_last = _int("seed", seed, 0, (1 << 64) - 1), _bool("drop_last", drop_last)
    slots, workers, slot_names = _int("slots", slots, 2, MAX_SLOTS), service_workers(service), names_of(names)
    torch, spec = _bool("torch", torch), features_spec(features)
    epochs = None if epochs is None else _int("epochs", epochs, 1, MAX_EPOCH)
    r, w = rank_world(rank, world)
    size, step = batch_sizes(batch_size, global_batch, r, w)
    fn: Callable[[Any], Any] | None = None
    pipeline_map: str | None = None
    if callable(map):
        fn = map
    elif map is not None and map not in MAPS and not _DECODE.match(str(map)):
        raise ValueError(f"map={map!r}: want a function of a batch, or the name of a map of the pipeline "
                         f"({', '.join(MAPS)}, or decode(size=224,...))")
    else:
        pipeline_map = None if map is None else str(map)
    slot_bytes = None if slot_bytes is None else _int("slot_bytes", slot_bytes, 4096, 1 << 35)
    threads = None if threads is None else _int("threads", threads, 1, 1 << 12)
    if on_corrupt not in ("fail", "skip"):
        raise ValueError(f"on_corrupt={on_corrupt!r}: want 'fail' or 'skip'")
    if remainder not in ("drop", "pad"):
        raise ValueError(f"remainder={remainder!r}: want 'drop' or 'pad'")
    phases = weights_from_of(weights_from, len(entries), weights, step)
    if blend_samples is not None:
        if weights is None:
            raise ValueError("blend_samples is the epoch of a blend: give data as (weight, file) pairs")
        blend_samples = _int("blend_samples", blend_samples, 1, 1 << 40)
    if report is not None and (not isinstance(report, str) or not report):
        raise ValueError(f"report={report!r}: want a directory to draw the run's pictures into")
    if metrics_addr is not None and (not isinstance(metrics_addr, str) or not metrics_addr):
        raise ValueError(f"metrics_addr={metrics_addr!r}: want host:port, such as '127.0.0.1:9100'")
    cache_env = {k: v for k, v in (("ACTORFEED_DECODE_CACHE_BYTES", cache_bytes("decode_cache_bytes", decode_cache_bytes)),
                                   ("ACTORFEED_OBJECT_CACHE_BYTES", cache_bytes("object_cache_bytes", object_cache_bytes)))
                 if v is not None}
    o = Options(data=entries, window=window, seed=seed, drop_last=drop_last, slots=slots, service=workers,
                names=slot_names, torch=torch, features=spec, epochs=epochs, rank=r, world=w, batch_size=size,
                global_batch=step, map=pipeline_map, fn=fn, slot_bytes=slot_bytes, threads=threads,
                on_corrupt=on_corrupt, remainder=remainder, weights=weights, weights_from=phases,
                blend_samples=blend_samples, metrics_addr=metrics_addr, report=report, cache_env=cache_env)
    if o["torch"]:
        try:
            import torch as _  # noqa: F401
        except ImportError:
            raise ValueError("torch=True but torch is not installed (apt-get install python3-torch)") from None
    return o
