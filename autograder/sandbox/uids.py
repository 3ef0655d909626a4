"""Which uid a kernel runs under: as root, a fresh one of ``UID_SLOTS`` per kernel, held while it
lives; without root, the grader's own (the slot still numbers its cgroup)."""

from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path

from . import SandboxUnavailable

UID_BASE = 2_000_000
UID_SLOTS = 256


def privileged() -> bool:
    """Root grades with a fresh uid per kernel; anyone else in the unprivileged mode."""
    return os.geteuid() == 0


class UidSlot:
    """An exclusive uid for one kernel, held by an advisory lock while the kernel lives.

    Slots rotate through the range: a counter file in the lock folder, advanced under its own
    lock, names the next slot to try, so the kernel after this one (of any grader on the
    machine) gets another uid, and whatever a uid leaves behind in the kernel (its keyring,
    which seccomp forbids too) is not found by the next student.
    """

    def __init__(self, lock_dir: Path | None = None) -> None:
        # Without root the kernel keeps the grader's uid; the slot still numbers its cgroup.
        name = "encdec-sandbox-uids" if privileged() else f"encdec-sandbox-slots-{os.geteuid()}"
        lock_dir = lock_dir or Path(tempfile.gettempdir()) / name
        lock_dir.mkdir(mode=0o700, exist_ok=True)
        counter = os.open(lock_dir / "next", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(counter, fcntl.LOCK_EX)
            text = os.pread(counter, 32, 0).decode(errors="replace").strip()
            start = int(text) % UID_SLOTS if text.isdigit() else os.getpid() % UID_SLOTS
            for k in range(UID_SLOTS):
                slot = (start + k) % UID_SLOTS
                fd = os.open(lock_dir / f"{slot}.lock", os.O_RDWR | os.O_CREAT, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                os.ftruncate(counter, 0)
                os.pwrite(counter, str((slot + 1) % UID_SLOTS).encode(), 0)
                self.fd, self.slot = fd, slot
                self.uid, self.gid = (UID_BASE + slot,) * 2 if privileged() else (os.getuid(), os.getgid())
                return
        finally:
            os.close(counter)  # and its lock
        raise SandboxUnavailable(f"all {UID_SLOTS} sandbox uids are in use")

    def release(self) -> None:
        if getattr(self, "fd", None) is not None:
            os.close(self.fd)
            self.fd = None
