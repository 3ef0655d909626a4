"""The kernel's processes, read from ``/proc``: which are left after a kernel (to end them), and the
CPU seconds a process tree has used (the structure items' budget, ``autograder/judge/budget.py``)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from .uids import privileged


def end_kernel_processes(uid: int, workdir: Path | None = None, wait_s: float = 5.0) -> None:
    """After the kernel: make sure none of its processes is left (killed after ``wait_s``).

    As root the kernel's processes are those of its own uid. Without root they share the
    grader's uid: they are the processes in a pid namespace where one works in ``workdir``.
    """
    deadline = time.monotonic() + wait_s
    while True:
        alive = _pids_of_uid(uid) if privileged() else _pids_working_in(workdir)
        if not alive:
            return
        if time.monotonic() > deadline:
            for pid in alive:
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass
        time.sleep(0.05)


def _proc_uids() -> list[tuple[int, int]]:
    out = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                out.append((int(entry.name), entry.stat().st_uid))
            except FileNotFoundError:
                pass
    return out


def _pids_of_uid(uid: int) -> list[int]:
    return [pid for pid, owner in _proc_uids() if owner == uid]


def _pids_working_in(workdir: Path | None) -> list[int]:
    """Processes of the grader's uid in the pid namespaces of those that work in ``workdir`` (as
    their own namespace shows it: nbgrader's working folder, unique to one kernel)."""
    if workdir is None:
        return []
    mine, own_ns = os.getuid(), os.readlink("/proc/self/ns/pid")
    spaces, candidates = set(), []
    for pid, owner in _proc_uids():
        if owner != mine:
            continue
        try:
            ns = os.readlink(f"/proc/{pid}/ns/pid")
            if ns == own_ns:
                continue
            candidates.append((pid, ns))
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if cwd == str(workdir) or cwd.startswith(f"{workdir}/"):
            spaces.add(ns)
    return [pid for pid, ns in candidates if ns in spaces]


def tree_cpu_seconds(root: int) -> float | None:
    """User and system CPU seconds of ``root`` and every process under it, with the children they
    reaped (``/proc/<pid>/stat``); None when ``root`` is gone."""
    stats: dict[int, tuple[int, int]] = {}  # pid -> (parent, ticks)
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()  # after the name: state ppid ... utime stime cutime cstime
        except OSError:
            continue
        stats[int(entry)] = (int(fields[1]), sum(int(x) for x in fields[11:15]))
    if root not in stats:
        return None
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += stats[pid][1]
        todo += [p for p, (parent, _) in stats.items() if parent == pid]
    return total / os.sysconf("SC_CLK_TCK")
