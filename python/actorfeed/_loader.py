"""Loader: PyTorch's DataLoader idioms over actorfeed's pipeline."""

from __future__ import annotations

import gc
import json
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, TextIO

from . import _args
from ._feed import FORKED, STOP_WAIT, Feed, LoaderError
from ._watch import Watch

__all__ = ["Batch", "Loader", "LoaderError"]

STATE_VERSION = 1

# How long a closing loader waits for a child that draws its report
# (report=) before it kills it: drawing takes a fraction of a second, and
# a loaded machine may take far longer.
REPORT_WAIT = 30.0


class Batch(dict[str, Any]):
    """One batch: named arrays (NumPy, or torch tensors with torch=True),
    views of a slot of the shared-memory ring, and "ids", each sample's id.
    epoch is the epoch of the order it belongs to, index its place in the
    epoch, padding how many of its last samples repeat samples dealt to a
    rank already (remainder="pad"): a trainer masks them. step_share, with
    a global batch, is the batch's part of its global step (its samples
    that are not padding over the step's): a rank whose loss is the mean
    over its batch multiplies it by step_share * world before the ranks'
    gradients are averaged, so that every sample of the step weighs the
    same when the ranks' batches differ by one (docs/tokens.md)."""

    __slots__ = ("epoch", "index", "padding", "step_share", "wait")
    epoch: int
    index: int
    padding: int
    step_share: float
    wait: float  # seconds the trainer waited for it, from asking to having it


class Loader:
    """Batches of the files of data, shuffled in an order that is a function
    of the files, seed and epoch, this rank's disjoint share of each epoch.
    shuffle=True is a uniformly random permutation of every sample each
    epoch, read by position from IDX, TFRecord or WebDataset files; files
    that cannot be read so (RecordIO) are shuffled in a window of 4,096
    samples instead, with a warning. "all" is the permutation or a refusal,
    an int a window of that many samples, False the files' order.

    Each iter() is a pass over an epoch, as StatefulDataLoader's: the
    next epoch from its start after a pass that ended or was left part way
    (a loop broken early, next(iter(loader)) as a peek), the saved
    position after load_state_dict(), and epoch e from its start after
    set_epoch(e). len() is an epoch's batches, a resumed one's included.
    state_dict() is where it stands after the last batch it yielded;
    load_state_dict() continues exactly there, from this rank's state or,
    on another world, from a list of every rank's states.

    A batch's arrays view shared memory: its slot is reused once no array
    of the batch is referenced. Keep a batch past the next few steps only
    as a copy (batch["x"].copy(), tensor.clone()); a loader whose slots are
    all held raises LoaderError rather than wait forever.

    features are the tf.train.Example features read from TFRecord files,
    {name: kind} in the slots' order ("bytes", "int64", "float", "float[3]",
    "int64[]" for any number; docs/formats.md); by default a file's first
    record's, sorted by name.

    global_batch, in place of batch_size, deals each epoch in global steps
    of that many samples: step k is the same samples whatever the world,
    so that a job stopped between steps and resumed on another world
    trains on the batches the uninterrupted job would have; this rank's
    batches are its slice of each step (batch_size then reads it).

    data as (weight, file) pairs, [(0.7, "megatron(seq_len=2048):web.bin"),
    (0.3, "megatron(seq_len=2048):code.bin")], blends the files: every
    epoch's samples are drawn from them in those proportions by a
    deterministic rule, each file running through epochs of its own
    (docs/tokens.md, "Weighted mixtures"). weights_from=[(step, [w, ...])]
    changes the weights from a global step on (a curriculum; it needs
    global_batch), and blend_samples sets an epoch's samples (by default
    the files' together).

    What run shows of a run, a loader shows when asked (docs/python.md,
    "Watching a run"): progress=True a tqdm bar a pass, summary=True a line
    at close, emit_ids the ids of every batch for verify-ids, metrics_addr
    the pipeline's Prometheus metrics, report a directory of pictures drawn
    when the child ends; every batch's .wait and stats() are the time the
    trainer waited for data. decode_cache_bytes and object_cache_bytes
    limit the caches (docs/decode-cache.md)."""

    def __init__(self, data: str | Sequence[str] | Sequence[tuple[float, str]], *, batch_size: int | None = None, shuffle: bool | int | str = True,
                 seed: int = 0, drop_last: bool = False, epochs: int | None = None, rank: int | None = None,
                 world: int | None = None, map: str | Callable[[Batch], Any] | None = None,
                 names: Sequence[str] | None = None, torch: bool = False, slots: int = 8, slot_bytes: int | None = None,
                 service: str | Sequence[str] | None = None, threads: int | None = None,
                 on_corrupt: Literal["fail", "skip"] = "fail", remainder: Literal["drop", "pad"] = "drop",
                 features: str | dict[str, str] | None = None, global_batch: int | None = None,
                 weights_from: Sequence[tuple[int, Sequence[float]]] | None = None,
                 blend_samples: int | None = None, progress: bool = False, summary: bool = False,
                 emit_ids: str | TextIO | None = None, metrics_addr: str | None = None,
                 decode_cache_bytes: int | str | None = None, object_cache_bytes: int | str | None = None,
                 report: str | None = None) -> None:
        self._o = _args.check(data=data, batch_size=batch_size, shuffle=shuffle, seed=seed, drop_last=drop_last,
                              epochs=epochs, rank=rank, world=world, map=map, names=names, torch=torch, slots=slots,
                              slot_bytes=slot_bytes, service=service, threads=threads, on_corrupt=on_corrupt,
                              remainder=remainder, features=features, global_batch=global_batch,
                              weights_from=weights_from, blend_samples=blend_samples, metrics_addr=metrics_addr,
                              decode_cache_bytes=decode_cache_bytes, object_cache_bytes=object_cache_bytes,
                              report=report)
        self._watch = Watch(progress=_args._bool("progress", progress), summary=_args._bool("summary", summary),
                            emit_ids=emit_ids, rank=self._o["rank"])
        self._feed: Feed | None = None
        self._epoch = 0  # the epoch the loader stands in
        self._resume: list[dict[str, Any]] | None = None  # the states the next feed resumes from
        self._state: bytes | None = None  # the state after the last batch yielded, JSON bytes
        self._batches = 0  # the batches the current epoch has left
        self._whole = 0  # the batches of the current epoch, dealt whole on this world
        self._passes = 0  # the iter() calls: a pass runs while it is the latest
        self._partway = False  # the latest pass yielded a batch and did not reach its epoch's end
        self._left: list[int] = []
        self._ended = False  # the current epoch's end was read
        self._done = False  # the feed's last epoch was read
        self._closed = False
        self._failed: LoaderError | None = None  # the LoaderError that ended the feed
        self._warned = False  # the feed's windowed line was shown

    @property
    def rank(self) -> int:
        return self._o["rank"]

    @property
    def world(self) -> int:
        return self._o["world"]

    @property
    def batch_size(self) -> int:
        """This rank's batches: batch_size, or its slice of global_batch."""
        return self._o["batch_size"]

    @property
    def metrics_url(self) -> str | None:
        """Where the pipeline's Prometheus metrics are served while it runs
        (metrics_addr; its port chosen when metrics_addr's is 0)."""
        feed = self._running()
        return None if feed.metrics is None else f"http://{feed.metrics}/metrics"

    def stats(self) -> dict[str, float]:
        """The run so far: batches and samples yielded, seconds since the
        first batch was asked for, and the seconds the trainer waited for
        data (in all, and a step's median, p99 and maximum)."""
        return self._watch.stats()

    @property
    def files(self) -> list[str]:
        """The files' names, as sample ids' file indexes name them."""
        return list(self._running().files)

    def _running(self) -> Feed:
        if self._closed:
            raise LoaderError("the loader is closed")
        if self._feed is not None and self._feed.forked:
            raise LoaderError(FORKED)
        if self._failed is not None:
            raise type(self._failed)(f"the loader failed before: {self._failed}")  # a BadArgument stays one
        if self._feed is None:
            args = _args.feed_args(self._o)
            if self._resume is None:
                args += ["--epoch", str(self._epoch)]
            if self._o["epochs"] is not None:
                left = self._o["epochs"] - self._epoch
                if left <= 0:
                    raise LoaderError(f"the loader gave its {self._o['epochs']} epochs")
                args += ["--epochs", str(left)]
            try:
                self._feed = Feed(args, self._resume, self._o["cache_env"],
                                  stop_wait=REPORT_WAIT if self._o["report"] else STOP_WAIT)
                if self._feed.windowed and not self._warned:
                    self._warned = True
                    warnings.warn(f"actorfeed: {self._feed.windowed}", stacklevel=3)
                self._ended, self._done = False, False
                self._read_epoch()
            except LoaderError as e:
                self._failed, self._feed = e, None
                raise
        return self._feed

    def _read_epoch(self) -> None:
        """Reads an epoch's first message: its number, batches and state."""
        assert self._feed is not None
        msg, state = self._feed.message()
        if msg["op"] == "done":
            self._batches, self._ended, self._done = 0, True, True
            return
        if msg["op"] != "epoch":
            raise LoaderError(f"the feed sent {msg['op']!r} where an epoch starts")
        self._epoch, self._batches, self._state, self._ended = msg["epoch"], msg["batches"], state, False
        self._watch.evicted(msg.get("evicted"))
        self._whole = msg.get("whole_batches", self._batches)
        self._left = msg.get("left", [])

    def _current(self) -> Feed:
        """The feed, at the head of the epoch the loader stands in: after
        an epoch's end, the next one's head is read."""
        feed = self._running()
        if self._ended and not self._done:
            self._read_epoch()
        return feed

    def __len__(self) -> int:
        """The batches of an epoch on this rank, as DataLoader's len(): a
        resumed epoch's count those delivered before the resume too."""
        if self._o["epochs"] is not None and self._epoch >= self._o["epochs"]:
            return 0
        self._current()
        return self._whole

    def set_epoch(self, epoch: int) -> None:
        """Makes the next pass epoch's, from its start, as
        DistributedSampler.set_epoch does. Where the loader already stands
        at epoch's start, or at a position in it that load_state_dict gave,
        it stays there, so the usual loop is right after a resume too."""
        _args._int("epoch", epoch, 0, _args.MAX_EPOCH)
        if epoch == self._epoch and not self._partway:  # after an epoch's end, the loader stands in the next
            return
        self._restart(epoch)

    def _restart(self, epoch: int) -> None:
        """Stops the feed; the next one starts at epoch's start."""
        self._watch.end()
        self._stop()
        self._epoch, self._resume, self._state, self._partway = epoch, None, None, False

    def __iter__(self) -> Iterator[Any]:
        if self._partway:  # the last pass was left part way: the next epoch, afresh
            self._restart(self._epoch + 1)
        self._passes += 1
        if self._o["epochs"] is not None and self._epoch >= self._o["epochs"]:
            return iter(())
        return self._epoch_batches(self._passes)

    def _epoch_batches(self, this: int) -> Iterator[Any]:
        self._latest(this)
        feed = self._current()
        if self._ended:
            return
        watch = self._watch
        dropped = self.sample_names(self._left) if watch.ids is not None else []
        watch.begin(epoch=self._epoch, whole=self._whole, left=self._batches, dropped=dropped)
        while True:
            asked = watch.asked()
            b = self._next(feed)
            if b is None:
                self._partway = False
                watch.end()
                return
            names = self.sample_names(b["ids"]) if watch.ids is not None else None
            b.wait = watch.got(since=asked, epoch=b.epoch, index=b.index, rows=len(b["ids"]), names=names)
            self._partway = True
            yield b if self._o["fn"] is None else self._o["fn"](b)
            self._latest(this)

    def _latest(self, this: int) -> None:
        """Refuses to go on with pass this when a later iter() began one."""
        if this != self._passes:
            raise LoaderError("this iterator's pass was left for a later iter() of its loader: iterate the latest one")

    def _next(self, feed: Feed) -> Batch | None:
        """The next batch, or None at the epoch's end."""
        try:
            feed.give_back()
            if feed.held >= feed.slots:
                gc.collect()  # batches in reference cycles
                feed.give_back()
            if feed.held >= feed.slots:
                raise LoaderError(
                    f"all {feed.slots} slots of the ring are held by batches still referenced: copy what you keep "
                    "(array.copy(), tensor.clone()) or give the loader more slots=")
            msg, state = feed.message()
        except KeyboardInterrupt:
            self.close()
            raise
        except LoaderError as e:
            feed.close()  # its own failures closed it; not the loader's
            self._failed, self._feed = e, None
            raise
        if msg["op"] == "end":
            self._state, self._ended, self._epoch = state, True, msg["epoch"] + 1
            self._watch.evicted(msg.get("evicted"))
            return None
        if msg["op"] == "done":
            self._ended = self._done = True
            return None
        if msg["op"] != "batch":
            raise LoaderError(f"the feed sent {msg['op']!r} where a batch was due")
        b = Batch(feed.batch(msg, self._o["names"], self._o["torch"]))
        b.epoch, b.index, b.padding = msg["epoch"], msg["index"], msg.get("padding", 0)
        b.step_share = msg.get("step_share", 0.0)
        b.wait = 0.0
        self._state = state
        return b

    def state_dict(self) -> dict[str, Any]:
        """Where the loader stands after the last batch it yielded: save it
        with the model (torch.save); every rank's, to resume on another
        world."""
        if self._state is None:
            self._running()
        if self._state is None:
            raise LoaderError("the loader has no state to give: its feed ended before an epoch began")
        return {"actorfeed": STATE_VERSION, "rank": self.rank, "world": self.world, "state": json.loads(self._state)}

    def load_state_dict(self, state: dict[str, Any] | Sequence[dict[str, Any]]) -> None:
        """Continues where state stands: this rank's state_dict(), or a list
        of every rank's (in any order) to go on on another world."""
        states = state if isinstance(state, (list, tuple)) else [state]
        if not states:
            raise ValueError("state: an empty list of states")
        out: list[dict[str, Any]] = []
        for s in states:
            if not isinstance(s, dict) or s.get("actorfeed") != STATE_VERSION or not isinstance(s.get("state"), dict):
                raise ValueError(f"state: not a state_dict() of this loader (version {STATE_VERSION}): {str(s)[:80]!r}")
            out.append(s["state"])
        self._stop()
        self._resume, self._state, self._partway = out, None, False
        self._epoch = min(s["state"].get("epoch", 0) for s in states)

    def _stop(self) -> None:
        if self._feed is not None:
            self._feed.close()
            self._feed = None
            self._watch.feed_ended()

    def close(self) -> None:
        """Stops the pipeline's process; batches still held stay valid. With
        summary=True it prints the run's summary, once."""
        self._stop()
        if not self._closed:
            self._watch.close()
        self._closed = True

    def __enter__(self) -> Loader:
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        self.close()
        return False

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def left_out(self) -> list[int]:
        """The ids of samples the current epoch leaves out of this rank's
        share by design: with remainder="drop" the samples beyond equal
        shares (rank 0 tells them), with drop_last the last short batch.
        A check of exactly-once delivery counts them apart from losses."""
        self._current()
        return list(self._left)

    def sample_names(self, ids: Sequence[int] | Any) -> list[str]:
        """Sample ids as actorfeed verify-ids names them: <file>#<record>."""
        files = self.files
        bits = [int(i) & ((1 << 64) - 1) for i in ids]  # torch's int64 ids hold the same 64 bits
        return [f"{files[i >> 40]}#{i & ((1 << 40) - 1)}" for i in bits]
