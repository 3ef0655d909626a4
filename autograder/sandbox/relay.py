"""Every message a kernel sends is bounded before the grader receives it: a metering relay at the socket.

jupyter_client receives a multipart message whole (``recv_multipart``), and libzmq's own limits do
not bound one: ``ZMQ_MAXMSGSIZE`` limits each frame, the high-water marks count whole messages. A
kernel that sends one message of many large frames (an mmap of zero pages as buffers costs the
kernel nothing) took the grader to 2.4 GB before any cap on outputs applied.

So the grader never connects to the kernel's sockets. The kernel binds its five ZeroMQ sockets in
its socket folder (a connection file of its own, ``kernel_connection``); the launcher, outside the
sandbox (launch.py), listens where the grader connects, in a folder of the grader's that no
sandbox mounts, and relays each connection's bytes. From the kernel to the grader it parses the
ZMTP 3.x stream as it passes (the 64-byte greeting, NULL mechanism; then frames: a flags byte,
MORE, LONG and COMMAND, and a size of one or eight bytes) and counts each message's bytes and
frames. A frame that would take a message past ``Limits.message_mb`` or ``Limits.message_frames``,
a command past ``COMMAND_MAX``, or anything that is not ZMTP 3.x is never forwarded: the relay
writes what it saw (``CUT_FILE``) and the launcher exits, which stops the kernel. The grader has
then received at most the limit of that message, which libzmq drops unfinished. The grader's own
sockets refuse a frame past the limit too (``ZMQ_MAXMSGSIZE``, kernel.py): a second line.
"""
from __future__ import annotations

import json
import os
import selectors
import socket
import struct
from dataclasses import dataclass
from pathlib import Path

CHANNELS = ("shell", "iopub", "stdin", "control", "hb")
CUT_FILE = "cut.json"  # in the relay folder: {"channel", "bytes", "frames", "why"} of the message cut
COMMAND_MAX = 1 << 16  # a ZMTP command (READY, PING, ...): the kernel's are tens of bytes
CHUNK = 1 << 16  # bytes relayed at a time, each way: all the relay holds of a connection
SEND_WAIT = 30.0  # seconds a side may leave a chunk unread before its connection is closed
GREETING = 64
MORE, LONG, COMMAND = 1, 2, 4


class Cut(Exception):
    """The kernel's stream past a limit, or not ZMTP 3.x: ``why`` is a key (``too_large``,
    ``too_many_frames``, ``command``, ``not_zmtp``)."""

    def __init__(self, why: str, size: int = 0, frames: int = 0) -> None:
        super().__init__(why)
        self.why, self.size, self.frames = why, size, frames


class Meter:
    """The kernel-to-grader half of one ZMTP 3.x connection, parsed as it passes: ``feed`` raises
    ``Cut`` before a byte past a limit would be forwarded."""

    def __init__(self, max_bytes: int, max_frames: int) -> None:
        self.max_bytes, self.max_frames = max_bytes, max_frames
        self.greeting = b""
        self.head = b""  # the frame header read so far (flags, size)
        self.left = 0  # body bytes of the current frame still to pass
        self.size = self.frames = 0  # of the message under way
        self.largest = 0  # the largest message passed (bytes)

    def feed(self, data: bytes) -> None:
        i = 0
        while i < len(data):
            if len(self.greeting) < GREETING:
                take = data[i:i + GREETING - len(self.greeting)]
                self.greeting += take
                i += len(take)
                self._check_greeting()
            elif self.left:
                step = min(self.left, len(data) - i)
                self.left -= step
                i += step
            else:
                self.head += data[i:i + 1]
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
        if flags & COMMAND:
            if size > COMMAND_MAX:
                raise Cut("command", size)
        else:
            self.size += size
            self.frames += 1
            if self.size > self.max_bytes:
                raise Cut("too_large", self.size, self.frames)
            if self.frames > self.max_frames:
                raise Cut("too_many_frames", self.size, self.frames)
            if not flags & MORE:
                self.largest = max(self.largest, self.size)
                self.size = self.frames = 0
        self.left = size


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


class Relay:
    """The launcher's relay: for each channel, listens at ``<grader ip>-<port>`` and carries each
    connection to ``<kernel ip>-<port>``, metering the kernel's half (``Meter``)."""

    def __init__(self, info: dict, kernel_ip: str, folder: Path, max_bytes: int, max_frames: int) -> None:
        self.folder, self.kernel_ip = folder, kernel_ip
        self.max_bytes, self.max_frames = max_bytes, max_frames
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
            for key, _ in self.sel.select():
                pair, side = key.data
                if pair is None:  # a listener: side is its (channel, port)
                    self._accept(key.fileobj, *side)
                    continue
                try:
                    self._step(pair, side)
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
        pair = _Pair(channel, grader, kernel, Meter(self.max_bytes, self.max_frames))
        self.sel.register(grader, selectors.EVENT_READ, (pair, "grader"))
        self.sel.register(kernel, selectors.EVENT_READ, (pair, "kernel"))

    def _step(self, pair: _Pair, side: str) -> None:
        """One ready socket: relay a chunk of it to the other side."""
        src, dst = (pair.kernel, pair.grader) if side == "kernel" else (pair.grader, pair.kernel)
        chunk = src.recv(CHUNK)
        if not chunk:
            raise OSError("closed")
        if side == "kernel":
            pair.meter.feed(chunk)  # raises before a byte past a limit is forwarded
        # the chunk is written whole before anything more is read: all the relay holds of a
        # connection is one chunk. A receiver that stops reading for SEND_WAIT loses its connection.
        dst.settimeout(SEND_WAIT)
        try:
            dst.sendall(chunk)
        finally:
            dst.setblocking(False)

    def _close(self, pair: _Pair) -> None:
        for s in (pair.grader, pair.kernel):
            try:
                self.sel.unregister(s)
            except (KeyError, ValueError):
                pass
            s.close()

    def _record(self, channel: str, cut: Cut) -> None:
        tmp = self.folder / f".{CUT_FILE}"
        tmp.write_text(json.dumps({"channel": channel, "why": cut.why, "bytes": cut.size, "frames": cut.frames,
                                   "limit_bytes": self.max_bytes, "limit_frames": self.max_frames}))
        os.replace(tmp, self.folder / CUT_FILE)


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
