"""Every message a kernel sends, and all it sends over time, bounded before the grader receives it:
a metering relay at the socket.

jupyter_client receives a multipart message whole (``recv_multipart``), and libzmq's own limits do
not bound one: ``ZMQ_MAXMSGSIZE`` limits each frame, the high-water marks count whole messages. A
kernel that sends one message of many large frames (an mmap of zero pages as buffers costs the
kernel nothing) took the grader to 2.4 GB before any cap on outputs applied; 64 messages of 31 MiB
on stdin, which nbclient never reads, took it to 3.66 GB.

So the grader never connects to the kernel's sockets. The kernel binds its five ZeroMQ sockets in
its socket folder (a connection file of its own, ``kernel_connection``); the launcher, outside the
sandbox (launch.py), listens where the grader connects, in a folder of the grader's that no
sandbox mounts, and relays each connection's bytes. From the kernel to the grader it parses the
ZMTP 3.x stream as it passes (the 64-byte greeting, NULL mechanism; then frames: a flags byte,
MORE, LONG and COMMAND, and a size of one or eight bytes) and meters it (``Budget``):

- one message: at most ``Limits.message_mb``, ``message_frames`` and ``message_values`` (the bytes that
  open or separate a JSON value, ``VALUE_BYTES``: jupyter_client parses every message it receives, and
  31 MiB of ``[{}, {}, ...`` become 800 MB of Python objects); a command at most ``COMMAND_MAX``;
- what the grader may hold unread, per channel: its sockets queue at most ``UNREAD`` messages
  (RCVHWM, kernel.py) and libzmq decodes one more, so the relay keeps the last ``UNREAD`` + 1
  messages of a connection within ``Limits.unread_mb`` (each frame counted ``FRAME_COST`` more,
  libzmq's own record of it);
- the channels the grader does not read (``QUIET``), over the kernel's life and all their
  connections together: at most ``Limits.quiet_kb``, and on the heartbeat (``ECHO``) as much again
  as the grader sent on it (its pings, each echoed, for as long as the kernel lives).

A frame header that would pass a limit, or anything that is not ZMTP 3.x, is never forwarded: the
relay writes what it saw (``CUT_FILE``) and the launcher exits, which stops the kernel. The grader
has then received at most the limit, which libzmq drops unfinished. A side that does not read
holds back only its own connection: the relay keeps one chunk for it and reads no more from the
other side until it is taken (the rest waits in the kernel, under its own memory limit); but on a
quiet channel it reads the kernel whatever the grader takes, so that a kernel the grader does not
read still reaches its cut (what waits then is under ``Limits.quiet_kb``). The
grader's own sockets refuse a frame past the limit too (``ZMQ_MAXMSGSIZE``, kernel.py): a second line.
"""

from __future__ import annotations

import json
import os
import selectors
import socket
import struct
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

CHANNELS = ("shell", "iopub", "stdin", "control", "hb")
# the grader never reads these: nbclient runs with allow_stdin False (an input_request is the kernel's
# own doing), the kernel manager sends interrupt and shutdown requests on control and reads no reply,
# and the heartbeat echoes the grader's few bytes of ping
QUIET = ("stdin", "control", "hb")
ECHO = "hb"  # the kernel echoes what the grader sends: its budget grows by what the grader sent
UNREAD = 16  # messages a grader's socket queues unread (its RCVHWM, kernel.py): the window is one more
FRAME_COST = 64  # bytes libzmq holds per frame beyond its body (its zmq_msg_t)
CUT_FILE = "cut.json"  # in the relay folder: {"channel", "why", "bytes", "frames", "limit_bytes", ...}
COMMAND_MAX = 1 << 16  # a ZMTP command (READY, PING, ...): the kernel's are tens of bytes
CHUNK = 1 << 16  # bytes relayed at a time, each way: what the relay holds of a connection's direction
GREETING = 64
VALUE_BYTES = b',:[{"'  # each JSON value the grader parses has one of these (objects of at most ~40 bytes each)
MORE, LONG, COMMAND = 1, 2, 4


@dataclass(frozen=True)
class Budget:
    """What a kernel may send the grader (bytes): one message, the last ``UNREAD`` + 1 messages of a
    connection, and over its life on a ``QUIET`` channel."""

    message: int
    frames: int
    unread: int
    quiet: int
    values: int = 1 << 62

    @classmethod
    def of(cls, limits) -> Budget:
        """From the sandbox's `Limits` (policy.py)."""
        return cls(
            limits.message_mb << 20,
            limits.message_frames,
            limits.unread_mb << 20,
            limits.quiet_kb << 10,
            limits.message_values,
        )

    def limit(self, why: str) -> int:
        return {"unread": self.unread, "quiet": self.quiet, "too_many_values": self.values}.get(why, self.message)


class Cut(Exception):
    """The kernel's stream past a limit, or not ZMTP 3.x: ``why`` is a key (``too_large``,
    ``too_many_frames``, ``too_many_values``, ``unread``, ``quiet``, ``command``, ``not_zmtp``)."""

    def __init__(self, why: str, size: int = 0, frames: int = 0) -> None:
        super().__init__(why)
        self.why, self.size, self.frames = why, size, frames


@dataclass
class Tally:
    """Bytes a channel has carried to the grader over the kernel's life, all its connections together;
    on a quiet channel at most the budget and ``credit``, what the grader sent on it (an echo's due)."""

    quiet: bool
    total: int = 0
    credit: int = 0


class Meter:
    """The kernel-to-grader half of one ZMTP 3.x connection, parsed as it passes: ``feed`` raises
    ``Cut`` before a byte past a limit would be forwarded."""

    def __init__(self, budget: Budget, tally: Tally | None = None) -> None:
        self.budget, self.tally = budget, tally or Tally(quiet=False)
        self.greeting = b""
        self.head = b""  # the frame header read so far (flags, size)
        self.left = 0  # body bytes of the current frame still to pass
        self.command = self.ending = False  # the current frame is a command; the last of its message
        self.values = 0  # VALUE_BYTES in the message under way
        self.size = self.frames = 0  # of the message under way
        self.cost = 0  # of the message under way, as libzmq holds it (FRAME_COST per frame)
        self.recent: deque[int] = deque(maxlen=UNREAD)  # costs of the last complete messages
        self.largest = 0  # the largest message passed (bytes)

    def feed(self, data: bytes) -> None:
        i = 0
        while i < len(data):
            if len(self.greeting) < GREETING:
                take = data[i : i + GREETING - len(self.greeting)]
                self.greeting += take
                i += len(take)
                self._check_greeting()
            elif self.left:
                step = min(self.left, len(data) - i)
                if not self.command:
                    body = data[i : i + step]
                    self.values += step - len(body.translate(None, VALUE_BYTES))
                    if self.values > self.budget.values:
                        raise Cut("too_many_values", self.values, self.frames)  # size: the values counted
                self.left -= step
                i += step
                if self.ending and not self.left:
                    self.values = 0
            else:
                self.head += data[i : i + 1]
                i += 1
                self._header()

    def _check_greeting(self) -> None:
        g = self.greeting
        if g[:1] not in (b"", b"\xff") or (len(g) >= 10 and g[9:10] != b"\x7f") or (len(g) >= 11 and g[10] != 3):
            raise Cut("not_zmtp")
        if len(g) >= 32 and g[12:32] != b"NULL".ljust(20, b"\0"):
            raise Cut("not_zmtp")

    def _header(self) -> None:
        flags = self.head[0]
        if flags & ~(MORE | LONG | COMMAND) or (flags & COMMAND and flags & MORE):
            raise Cut("not_zmtp")
        need = 9 if flags & LONG else 2
        if len(self.head) < need:
            return
        size = struct.unpack(">Q", self.head[1:9])[0] if flags & LONG else self.head[1]
        self.head = b""
        self._charge(size + FRAME_COST)
        self.command = bool(flags & COMMAND)
        if flags & COMMAND:
            if size > COMMAND_MAX:
                raise Cut("command", size)
        else:
            self.size += size
            self.frames += 1
            self.cost += size + FRAME_COST
            if self.size > self.budget.message:
                raise Cut("too_large", self.size, self.frames)
            if self.frames > self.budget.frames:
                raise Cut("too_many_frames", self.size, self.frames)
            if sum(self.recent) + self.cost > self.budget.unread:  # at most UNREAD + 1 messages held
                raise Cut("unread", sum(self.recent) + self.cost, self.frames)
            if not flags & MORE:
                self.largest = max(self.largest, self.size)
                self.recent.append(self.cost)
                self.size = self.frames = self.cost = 0
        self.left = size
        self.ending = not flags & (MORE | COMMAND)  # the message's last frame: its values are counted, then reset
        if self.ending and not size:
            self.values = 0

    def _charge(self, cost: int) -> None:
        self.tally.total += cost
        if self.tally.quiet and self.tally.total > self.budget.quiet + self.tally.credit:
            raise Cut("quiet", self.tally.total, self.frames)


UNMETERED = Budget(1 << 62, 1 << 62, 1 << 62, 1 << 62)  # the grader's own stream: measured, never cut


def kernel_connection(connection_file: str, sockdir: Path) -> Path:
    """The kernel's connection file: the grader's, its sockets in the kernel's socket folder."""
    info = json.loads(Path(connection_file).read_text())
    if info.get("transport") != "ipc":
        raise ValueError("the relay carries ipc connections only")
    info["ip"] = str(sockdir / "k")
    path = sockdir / "kernel.json"
    path.write_text(json.dumps(info))
    return path


@dataclass
class _Pair:
    channel: str
    grader: socket.socket
    kernel: socket.socket
    meter: Meter
    waiting: dict = field(default_factory=lambda: {"grader": bytearray(), "kernel": bytearray()})  # not yet taken
    watched: dict = field(default_factory=dict)  # side -> the events the selector waits for on it
    sent: Meter | None = None  # on ECHO, the grader's half, measured
    closed: bool = False


class Relay:
    """The launcher's relay: for each channel, listens at ``<grader ip>-<port>`` and carries each
    connection to ``<kernel ip>-<port>``, metering the kernel's half (``Meter``)."""

    def __init__(self, info: dict, kernel_ip: str, folder: Path, budget: Budget) -> None:
        self.folder, self.kernel_ip, self.budget = folder, kernel_ip, budget
        self.tallies = {channel: Tally(quiet=channel in QUIET) for channel in CHANNELS}
        self.echoed = Tally(quiet=False)  # what the grader sent on ECHO, all connections together
        self.sel = selectors.DefaultSelector()
        for channel in CHANNELS:
            port = int(info[f"{channel}_port"])
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            path = f"{info['ip']}-{port}"
            if os.path.lexists(path):
                os.unlink(path)
            listener.bind(path)
            listener.listen(8)
            listener.setblocking(False)
            self.sel.register(listener, selectors.EVENT_READ, (None, (channel, port)))

    def run(self) -> Cut:
        """Relay until a message is cut; returns that cut (the caller stops the kernel)."""
        while True:
            for key, events in self.sel.select():
                pair, side = key.data
                if pair is None:  # a listener: side is its (channel, port)
                    self._accept(key.fileobj, *side)
                    continue
                if pair.closed:  # by an event before this one
                    continue
                try:
                    self._step(pair, side, events)
                except Cut as cut:
                    self._record(pair.channel, cut)
                    return cut
                except OSError:
                    self._close(pair)

    def _accept(self, listener: socket.socket, channel: str, port: int) -> None:
        grader, _ = listener.accept()
        kernel = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            kernel.connect(f"{self.kernel_ip}-{port}")
        except OSError:  # the kernel has not bound it yet: libzmq connects again
            grader.close()
            kernel.close()
            return
        grader.setblocking(False)
        kernel.setblocking(False)
        pair = _Pair(channel, grader, kernel, Meter(self.budget, self.tallies[channel]))
        if channel == ECHO:  # the grader's pings, measured as the kernel's echo is
            pair.sent = Meter(UNMETERED, self.echoed)
        self._watch(pair)

    def _step(self, pair: _Pair, side: str, events: int) -> None:
        """One ready socket: give it what waits for it, and relay a chunk of what it sent."""
        own, other = (pair.kernel, pair.grader) if side == "kernel" else (pair.grader, pair.kernel)
        peer = "grader" if side == "kernel" else "kernel"
        if events & selectors.EVENT_WRITE and pair.waiting[side]:
            del pair.waiting[side][: _send(own, pair.waiting[side])]
        if events & selectors.EVENT_READ and self._reads(pair, side):
            chunk = own.recv(CHUNK)
            if not chunk:
                raise OSError("closed")
            if side == "kernel":
                pair.meter.feed(chunk)  # raises before a byte past a limit is forwarded
            elif pair.sent is not None:
                pair.sent.feed(chunk)
                self.tallies[pair.channel].credit = self.echoed.total
            waiting = pair.waiting[peer]
            waiting += chunk
            del waiting[: _send(other, waiting)]
        self._watch(pair)

    @staticmethod
    def _reads(pair: _Pair, side: str) -> bool:
        """Whether to read a side: when what it sent before has been taken; on a quiet channel the
        kernel's side always, so that its tally grows to the cut even when the grader reads nothing
        (what waits is less than the tally's budget)."""
        peer = "grader" if side == "kernel" else "kernel"
        return not pair.waiting[peer] or (side == "kernel" and pair.meter.tally.quiet)

    def _watch(self, pair: _Pair) -> None:
        """Each side is read only when what it sends has been taken, and written when something waits
        for it: the relay holds one chunk of a connection each way (on a quiet channel, its tally)."""
        for side in ("grader", "kernel"):
            s = getattr(pair, side)
            events = (selectors.EVENT_READ if self._reads(pair, side) else 0) | (
                selectors.EVENT_WRITE if pair.waiting[side] else 0
            )
            was = pair.watched.get(side, 0)
            if events == was:
                continue
            if not events:
                self.sel.unregister(s)
            elif not was:
                self.sel.register(s, events, (pair, side))
            else:
                self.sel.modify(s, events, (pair, side))
            pair.watched[side] = events

    def _close(self, pair: _Pair) -> None:
        pair.closed = True
        for side in ("grader", "kernel"):
            s = getattr(pair, side)
            if pair.watched.pop(side, 0):
                self.sel.unregister(s)
            s.close()

    def _record(self, channel: str, cut: Cut) -> None:
        tmp = self.folder / f".{CUT_FILE}"
        tmp.write_text(
            json.dumps(
                {
                    "channel": channel,
                    "why": cut.why,
                    "bytes": cut.size,
                    "frames": cut.frames,
                    "limit_bytes": self.budget.limit(cut.why),
                    "limit_frames": self.budget.frames,
                }
            )
        )
        os.replace(tmp, self.folder / CUT_FILE)


def _send(s: socket.socket, data: bytes) -> int:
    try:
        return s.send(data)
    except BlockingIOError:
        return 0


def read_cut(folder: Path | None) -> dict | None:
    """What the relay cut in ``folder`` (the grader's), or None."""
    if folder is None:
        return None
    try:
        with open(folder / CUT_FILE, "rb") as f:
            found = json.loads(f.read(4096))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None
