"""What a Loader shows of its run, each by an opt-in argument: a progress
bar, the time the trainer waited for each batch, a summary at close, and
the ids of every batch it yielded, as `actorfeed run` shows and writes
them (docs/python.md, "Watching a run")."""

from __future__ import annotations

import io
import json
import random
import sys
import time
from typing import Any, TextIO

# The waits a summary's quantiles are taken from: every step's up to this
# many, then a uniform sample of them (reservoir sampling), so that the
# memory a long job's summary takes stays bounded.
KEPT_WAITS = 1 << 16


class Watch:
    """The run as the Loader's arguments ask to show it. The waits are
    counted whatever is asked, as they cost a clock read a batch."""

    def __init__(self, *, progress: bool, summary: bool, emit_ids: str | TextIO | None, rank: int) -> None:
        if progress:
            try:
                import tqdm  # noqa: F401
            except ImportError:
                raise ValueError("progress=True draws its bar with tqdm, which is not installed "
                                 "(apt-get install python3-tqdm)") from None
        if emit_ids is not None and not isinstance(emit_ids, (str, io.TextIOBase)):
            raise ValueError(f"emit_ids={emit_ids!r}: want a path or a file open for writing text")
        self.progress, self.summary, self.rank = progress, summary, rank
        self.ids: TextIO | None = None
        self.own_ids = isinstance(emit_ids, str)
        if isinstance(emit_ids, str):
            self.ids = open(emit_ids, "a", encoding="utf-8")  # a resumed job goes on in the same file
        elif emit_ids is not None:
            self.ids = emit_ids
        self.bar: Any = None
        self.batches = self.samples = 0
        self.waited = 0.0
        self.waits: list[float] = []
        self.rng = random.Random(0)
        self.started: float | None = None  # when the first batch was asked for
        self.gone = {"decode": [0, 0], "object": [0, 0]}  # files and bytes evicted by earlier feeds
        self.now = {"decode": [0, 0], "object": [0, 0]}  # by the current feed, as it last said

    def evicted(self, counts: dict[str, list[int]] | None) -> None:
        """The current feed's evictions from the caches so far."""
        for cache in ("decode", "object"):
            self.now[cache] = list((counts or {}).get(cache, [0, 0]))

    def feed_ended(self) -> None:
        """The current feed stopped: its evictions are kept."""
        for cache in ("decode", "object"):
            self.gone[cache] = [a + b for a, b in zip(self.gone[cache], self.now[cache])]
            self.now[cache] = [0, 0]

    def begin(self, *, epoch: int, whole: int, left: int, dropped: list[str]) -> None:
        """A pass over epoch starts, with left of its whole batches to come
        and the samples it leaves out by design."""
        if self.ids is not None and dropped:
            self._line({"epoch": epoch, "rank": self.rank, "dropped": dropped})
        if self.progress:
            import tqdm

            self.end()
            self.bar = tqdm.tqdm(total=whole, initial=whole - left, desc=f"epoch {epoch}", unit="batch",
                                 file=sys.stderr, dynamic_ncols=True)

    def asked(self) -> float:
        """The trainer asks for a batch: the time it starts waiting."""
        now = time.perf_counter()
        if self.started is None:
            self.started = now
        return now

    def got(self, *, since: float, epoch: int, index: int, rows: int, names: list[str] | None) -> float:
        """The batch asked for since came: its wait is counted, shown and,
        with emit_ids, its ids written (names). Returns the wait."""
        wait = time.perf_counter() - since
        self.batches, self.samples, self.waited = self.batches + 1, self.samples + rows, self.waited + wait
        if len(self.waits) < KEPT_WAITS:
            self.waits.append(wait)
        else:
            at = self.rng.randrange(self.batches)
            if at < KEPT_WAITS:
                self.waits[at] = wait
        if names is not None and self.ids is not None:
            self._line({"epoch": epoch, "device": self.rank, "seq": index, "ids": names})
        if self.bar is not None:
            self.bar.set_postfix_str(f"waited {wait * 1e3:.1f} ms", refresh=False)
            self.bar.update(1)
        return wait

    def end(self) -> None:
        """A pass ended, or was left: its bar is closed."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def _line(self, rec: dict[str, Any]) -> None:
        assert self.ids is not None
        self.ids.write(json.dumps(rec) + "\n")
        self.ids.flush()  # a checkpoint taken now counts the line

    def stats(self) -> dict[str, float]:
        """The run so far: batches and samples yielded, seconds since the
        first was asked for, seconds waited for data and their quantiles a
        step."""
        elapsed = 0.0 if self.started is None else time.perf_counter() - self.started
        waits = sorted(self.waits)

        def q(f: float) -> float:
            return waits[min(len(waits) - 1, int(f * len(waits)))] if waits else 0.0

        out = {"batches": self.batches, "samples": self.samples, "seconds": elapsed, "waited": self.waited,
               "wait_p50": q(0.5), "wait_p99": q(0.99), "wait_max": waits[-1] if waits else 0.0}
        for cache in ("decode", "object"):
            copies, size = (a + b for a, b in zip(self.gone[cache], self.now[cache]))
            out[f"{cache}_cache_evicted"], out[f"{cache}_cache_evicted_bytes"] = copies, size
        return out

    def close(self) -> None:
        """The loader closes: the bar goes, the summary is printed, and an
        ids file the loader opened is closed."""
        self.end()
        if self.summary and self.started is not None:
            print(summary_line(self.stats(), self.rank), file=sys.stderr, flush=True)
        if self.ids is not None and self.own_ids:
            self.ids.close()
        self.ids = None


def summary_line(s: dict[str, float], rank: int) -> str:
    """The summary at close, as one line."""
    rate = s["samples"] / s["seconds"] if s["seconds"] > 0 else 0.0
    share = 100 * s["waited"] / s["seconds"] if s["seconds"] > 0 else 0.0
    line = (f"actorfeed: rank {rank}: {s['batches']:.0f} batches, {s['samples']:.0f} samples in {s['seconds']:.1f} s "
            f"({rate:,.0f} samples/s); waited {s['waited']:.2f} s for data ({share:.1f}% of the time), "
            f"a step's wait median {s['wait_p50'] * 1e3:.2f} ms, p99 {s['wait_p99'] * 1e3:.2f} ms, "
            f"max {s['wait_max'] * 1e3:.2f} ms")
    for cache in ("decode", "object"):
        if s[f"{cache}_cache_evicted"]:
            line += (f"; evicted {s[f'{cache}_cache_evicted']:.0f} files "
                     f"({s[f'{cache}_cache_evicted_bytes'] / 1e6:.1f} MB) from the {cache} cache to stay under its limit")
    return line
