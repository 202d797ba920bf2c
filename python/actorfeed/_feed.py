"""The child process that runs actorfeed's pipeline (actorfeed feed), the
socket to it and the shared-memory ring its batches arrive in
(docs/python.md has the protocol)."""

from __future__ import annotations

import collections
import io
import json
import mmap
import os
import signal
import socket
import subprocess
import tempfile
import weakref
from typing import Any, NoReturn

import numpy as np

from ._args import in_params
from ._binary import find_binary


class LoaderError(RuntimeError):
    """The pipeline failed, or its process died: the message names the cause."""


class BadArgument(LoaderError, ValueError):
    """A parameter the pipeline refused as it started (a map's or a data
    entry's words the loader does not check itself): the message names it."""


# How long close waits for the process after closing its socket, and how
# long a failure waits for its exit status and last words.
STOP_WAIT = 2.0
DIED_WAIT = 1.0


# The feeds this process has open. A child forked from it (a DataLoader
# worker, say) inherits their sockets: kept open there, a feed would live on
# after its trainer was killed, until the child ended. The child closes its
# copies at once (os.register_at_fork), and its feeds are closed to it.
_open: weakref.WeakSet[Feed] = weakref.WeakSet()

FORKED = ("this loader's pipeline belongs to the process that made it, not to this forked child: "
          "make a Loader in this process")


def _forget_in_child() -> None:
    for feed in list(_open):
        feed.forget()


os.register_at_fork(after_in_child=_forget_in_child)

_dtypes: dict[str, np.dtype[Any]] = {}


def _dtype(name: str) -> np.dtype[Any]:
    """numpy's little-endian dtype of a tensor dtype's name."""
    dt = _dtypes.get(name)
    if dt is None:
        dt = _dtypes[name] = np.dtype(name).newbyteorder("<")
    return dt


class Feed:
    """One run of actorfeed feed: the process, its socket and the ring.
    Messages come as pairs of lines: a JSON message and the pipeline's state
    after it, kept as bytes until a state is asked for."""

    def __init__(self, args: list[str], states: list[dict[str, Any]] | None,
                 env: dict[str, str] | None = None, stop_wait: float = STOP_WAIT) -> None:
        self.stop_wait = stop_wait
        self.proc: subprocess.Popen[bytes] | None = None
        self.rfile: io.IOBase | None = None
        self.mm: mmap.mmap | None = None
        self.slots, self.slot_bytes = 0, 0  # the ring's, from the feed's hello
        self.files: list[str] = []
        self.slot_names: list[str] = []
        # A batch's weak reference, by id, to its slot. The reference's
        # callback is a C function (deque.append), so letting go of a batch
        # runs no Python code: a Ctrl-C that lands in Python code run by the
        # garbage collector is printed and dropped ("Exception ignored").
        self.slot_of: dict[int, tuple[weakref.ref[np.ndarray[Any, Any]], int]] = {}
        self.released: collections.deque[weakref.ref[np.ndarray[Any, Any]]] = collections.deque()  # let go
        self.held = 0
        self.closed = False
        self.forked = False
        self.windowed: str | None = None  # why shuffle=True shuffles in a window, as the feed says
        self.metrics: str | None = None  # host:port of the feed's metrics (metrics_addr), as it says
        self.err = tempfile.TemporaryFile()  # unlinked at once: nothing is left behind
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock = ours
        _open.add(self)
        try:
            cmd = [find_binary(), "feed", "--fd", str(theirs.fileno())] + args
            if states is not None:
                cmd.append("--resume-stdin")
            # A session of its own: the terminal's Ctrl-C reaches the
            # trainer, which stops the feed by closing the socket.
            self.proc = subprocess.Popen(cmd, pass_fds=(theirs.fileno(),), stdout=subprocess.DEVNULL,
                                         stderr=self.err, start_new_session=True,
                                         env=None if not env else {**os.environ, **env},
                                         stdin=subprocess.PIPE if states is not None else subprocess.DEVNULL)
        except BaseException:
            self.close()
            raise
        finally:
            theirs.close()
        if states is not None and self.proc.stdin is not None:
            try:
                self.proc.stdin.write(json.dumps(states).encode())
                self.proc.stdin.close()
            except BrokenPipeError:
                pass  # it died: the socket says why
        self._start()

    def _start(self) -> None:
        try:
            first, fds, _, _ = socket.recv_fds(self.sock, 1, 1)
        except BaseException:
            self.close()
            raise
        for fd in fds[1:]:
            os.close(fd)
        self.rfile = self.sock.makefile("rb", buffering=1 << 16)
        if first == b"R" and fds:
            try:
                hello = json.loads(self._line())
                self.slots, self.slot_bytes, self.files = hello["slots"], hello["slot_bytes"], hello["files"]
                self.slot_names = hello.get("slot_names") or []
                self.windowed = hello.get("windowed")
                self.metrics = hello.get("metrics")
                self.mm = mmap.mmap(fds[0], self.slots * self.slot_bytes)
            finally:
                os.close(fds[0])
            return
        for fd in fds:
            os.close(fd)
        if first == b"E":
            self.message()  # raises with the error it holds
        self.fail(None)

    def _line(self) -> bytes:
        if self.rfile is None:
            self.fail(None)
        try:
            line = self.rfile.readline()
        except ConnectionError:  # it died with our lines unread
            line = b""
        if not line:
            self.fail(None)
        return line

    def message(self) -> tuple[dict[str, Any], bytes]:
        """The next message and the state line after it."""
        if self.forked:
            raise LoaderError(FORKED)
        msg: dict[str, Any] = json.loads(self._line())
        if msg.get("op") == "error":
            why = msg.get("message", "the pipeline failed")
            if msg.get("damaged"):
                why += f'; the {msg["damaged"]} data is damaged: on_corrupt="skip" skips it, actorfeed inspect shows it'
            if msg.get("usage"):
                self.fail(in_params(why), BadArgument)
            self.fail(why)
        return msg, self._line().rstrip(b"\n")

    def fail(self, why: str | None, kind: type[LoaderError] = LoaderError) -> NoReturn:
        """Raises kind: why, or what the process said as it died; a bad
        argument (exit status 2) is BadArgument, a ValueError."""
        rc = None
        if self.proc is not None:
            try:
                rc = self.proc.wait(DIED_WAIT)
            except subprocess.TimeoutExpired:
                pass
        if why is None:
            self.err.seek(0)
            lines = self.err.read().decode(errors="replace").strip().splitlines()
            why = lines[-1] if lines else "no message"
            if rc == 2:
                why, kind = in_params(why), BadArgument
            else:
                why = f"the actorfeed feed process ended (exit status {rc}): {why}"
        self.close()
        raise kind(why)

    def give_back(self) -> None:
        """Sends the slots whose batches were let go."""
        out: list[int] = []
        while True:
            try:
                ref = self.released.popleft()
            except IndexError:
                break
            out.append(self.slot_of.pop(id(ref))[1])
        if not out or self.closed:
            return
        self.held -= len(out)
        try:
            self.sock.sendall(b"".join(b"r %d\n" % s for s in out))
        except OSError:
            pass  # the process is gone: the next read says why

    def batch(self, msg: dict[str, Any], names: list[str] | None, as_torch: bool) -> dict[str, Any]:
        """The arrays of a batch message, views of its slot; the slot goes
        back once every array of the batch is let go."""
        slot = msg["slot"]
        if self.mm is None:
            raise LoaderError("the feed is closed")
        base = np.frombuffer(self.mm, dtype=np.uint8, count=self.slot_bytes, offset=slot * self.slot_bytes)
        ref = weakref.ref(base, self.released.append)
        self.slot_of[id(ref)] = (ref, slot)
        self.held += 1
        out: dict[str, Any] = {}
        for i, a in enumerate(msg["arrays"]):
            given = names or self.slot_names
            name = given[i] if i < len(given) else f"slot{i}"
            out[name] = np.ndarray(a["shape"], _dtype(a["dtype"]), base, a["offset"])
            for lvl, l in enumerate(a.get("lod") or []):
                out[f"{name}.lod{lvl}"] = np.ndarray(l["len"], "<i8", base, l["offset"])
        out["ids"] = np.ndarray(msg["rows"], "<u8", base, msg["ids"])
        if as_torch:
            import torch

            # torch has no uint64: ids become int64 tensors of the same bits
            # (sample_names reads them either way).
            out["ids"] = out["ids"].view("<i8")
            out = {k: torch.from_numpy(v) for k, v in out.items()}
        del base
        return out

    def forget(self) -> None:
        """In a forked child: closes this process's copies of the socket and
        the error file, not the connection (no shutdown, no wait: the
        parent's feed goes on), and the feed is closed here."""
        self.closed = self.forked = True
        for f in (self.rfile, self.sock, self.err):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass
        self.proc = None

    def close(self) -> None:
        """Closes the socket (the process ends when it sees that) and waits
        for the process, killing it if it does not end in stop_wait. The
        ring's memory goes when the last batch viewing it does."""
        if self.closed:
            return
        self.closed = True
        if self.sock is not None:
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.sock.close()
        if self.rfile is not None:
            self.rfile.close()
        if self.proc is not None:
            try:
                self.proc.wait(self.stop_wait)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.err.close()
        if self.mm is not None:
            try:
                self.mm.close()
            except BufferError:
                pass  # batches still view it: it goes with them
            self.mm = None
