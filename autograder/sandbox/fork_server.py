"""The grader's handle on the fork server (``zygote.py``): ``Zygote`` starts one per grader process
(and temporary folder), hands it to ``kernel.SandboxKernelManager``, and stops it; ``socket_base``
says where socket folders fit an address."""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from .. import edition
from . import mounts, safefs
from .sandbox import SandboxUnavailable, zygote_command

_swept: set[str] = set()


def _relay(stream, said: list[str], keep: int = 20) -> None:
    """Copy the fork server's stderr to the grader's, keeping its first ``keep`` lines in ``said``."""
    for raw in iter(stream.readline, b""):
        text = raw.decode(errors="replace")
        if len(said) < keep:
            said.append(text)
        sys.stderr.write(text)
        sys.stderr.flush()
    stream.close()


# A socket's address holds at most 107 bytes (AF_UNIX): the zygote's control socket and the
# kernels' ZeroMQ ipc sockets sit at most SOCKET_TAIL bytes below the folder their socket folders
# are made in ("/encdec-z-<pid>-<8>/tmp<8>/k-<port>", "/encdec-z-<pid>-<8>/ctl/zygote.sock").
SOCKET_PATH_MAX, SOCKET_TAIL = 107, 48


def socket_base(temp_dir: str) -> str:
    """Where socket folders are made: ``temp_dir`` (else the system's temporary folder) when its
    sockets' addresses fit, else the system's temporary folder, else /tmp. A course under a deep
    path (a test's temporary folder, a deployment's) would otherwise fail to bind its sockets."""
    for base in (temp_dir, tempfile.gettempdir(), "/tmp"):
        if base and len(os.fsencode(base)) + SOCKET_TAIL <= SOCKET_PATH_MAX:
            return base
    return "/tmp"


def _sweep(base: str) -> None:
    """Once per grader and folder: remove the kernel folders that killed graders left there."""
    if base in _swept:
        return
    _swept.add(base)
    for folder in mounts.stale_folders(base):
        try:
            safefs.remove_tree(folder)
        except OSError:
            pass


class Zygote:
    """One fork server per grader process (and temporary folder), for every assignment (see zygote.py).

    It stages its own scratch area (``workbase``: each kernel's working folder is made there)
    and socket area (``sockbase``), both folders of root's, removed when it stops.
    """

    _running: dict[tuple, Zygote] = {}

    def __init__(self, editions: Path, temp_dir: str = "", torch_files: list | None = None) -> None:
        self.owner = os.getpid()  # the process that started it (a fork of that process may use it too)
        self.sockbase = Path(tempfile.mkdtemp(prefix=mounts.folder_prefix("z"), dir=socket_base(temp_dir)))
        self.workbase = Path(tempfile.mkdtemp(prefix=mounts.folder_prefix("zw"), dir=temp_dir or None))
        for base in (self.sockbase, self.workbase):  # each kernel's tmpfs made there reaches the zygote
            mounts.make_shared(str(base))
        ctl = self.sockbase / "ctl"
        ctl.mkdir(mode=0o700)
        self.control = ctl / "zygote.sock"
        torch_files = edition.torch_files(edition.DEFAULT_OUT) if torch_files is None else torch_files
        self.proc = subprocess.Popen(
            zygote_command(self.workbase, self.sockbase, self.control, editions, torch_files),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        said: list[str] = []  # its first lines of stderr, for the error below; all of it reaches ours
        relay = threading.Thread(target=_relay, args=(self.proc.stderr, said), daemon=True)
        relay.start()
        line = self.proc.stdout.readline()
        self.proc.stdout.close()  # nothing else comes that way (the zygote moves stdout to stderr)
        if b"zygote ready" not in line:
            self.stop()
            relay.join(timeout=5)
            why = " ".join(s.strip() for s in said[-5:]) or "it said nothing"
            raise SandboxUnavailable(f"the sandbox's fork server did not start (exit {self.proc.wait()}): {why}")
        atexit.register(self.stop)

    @classmethod
    def get(cls, editions: Path, temp_dir: str = "", torch_files: list | None = None) -> Zygote:
        """The running fork server for these editions (and torch edition: a rebuilt one starts another)."""
        torch_files = edition.torch_files(edition.DEFAULT_OUT) if torch_files is None else torch_files
        key = (editions, temp_dir, tuple(map(tuple, torch_files)))
        z = cls._running.get(key)
        if z is None or not z.alive():
            if z is not None and z.owner == os.getpid():
                z.stop()  # a dead zygote's folders go too
            z = cls._running[key] = cls(editions, temp_dir, torch_files)
        return z

    @classmethod
    def stop_all(cls, started_here: bool = False) -> None:
        """Stop the fork servers this process knows (``started_here``: only those it started)."""
        for key, z in list(cls._running.items()):
            if not started_here or z.owner == os.getpid():
                z.stop()
                del cls._running[key]

    def alive(self) -> bool:
        """Running: its own child polled, or, from a fork of the process that started it, a process
        of that id that is no zombie."""
        if self.owner == os.getpid():
            return self.proc.poll() is None
        try:
            with open(f"/proc/{self.proc.pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, IndexError):
            return False

    def stop(self) -> None:
        if self.owner != os.getpid():
            return  # the process that started it stops it (this one cannot reap it)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for folder in (self.sockbase, self.workbase):
            try:
                mounts.umount(str(folder))  # and the tmpfs of any kernel left mounted there
            except OSError:
                pass
            try:
                safefs.remove_tree(folder)  # what a kernel left there (its cleanup failed) goes too
            except OSError:
                pass
