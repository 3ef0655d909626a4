"""A submission collected from the exchange: its data copied, never a link (``Collect``,
``autograder/exchange.py``), and what was left behind recorded for the grader (``handed_in.py``).

**Invariant: collect copies data, not links.** The student's folder is opened with ``O_NOFOLLOW``
and walked through directory descriptors (``os.scandir(fd)``, ``dir_fd=``), never by a path the
student could swap between a check and a use. Every entry is opened without following a link and
judged on its open descriptor (``fstat``): only a regular file the student owns with no other
hard link (``st_nlink == 1``), and a folder the student owns on the same file system, within
``Bounds``, is copied; a regular file is read up to the size ``fstat`` gave, so a file that grows
is cut there. Anything else (a symbolic link, a FIFO, socket or device, another user's file, a
hard link, what is past the bounds, what cannot be read) is left behind and said: in the collect
log, and in ``RECORD`` in the collected folder, which the grader turns into repair records
(``left_behind_<key>``, worded in ``encdec/grading/messages_collect.py``) at the top of the graded
notebook and the feedback.

**The server's clock decides when it was handed in.** The time in the folder's name and the
student's ``timestamp.txt`` are the student's to set (``nbgrader submit
'--Exchange.timestamp_format=...'`` forged one eleven minutes early and escaped the late penalty).
A file's status-change time (``st_ctime``) is the kernel's: nobody without root sets it, and every
write, rename or new entry moves it to the server's now. So the submission's time is the latest
``st_ctime`` of its folder and of every entry in it (``changed``), and the collected
``timestamp.txt``, which the late policy reads, holds that; the student's is skipped.
"""

from __future__ import annotations

import errno
import fnmatch
import itertools
import json
import os
import shutil
import stat
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

from autograder.state import LEFT_BEHIND

RECORD = LEFT_BEHIND  # in the collected folder, written by collect only (a student's is never copied)
TIMESTAMP = "timestamp.txt"  # nbgrader's name
# why an entry was left behind; no_notebook: the release's blank notebook graded in place of none (exchange.py)
KEYS = ("link", "not_regular", "not_yours", "past_limits", "unreadable", "no_notebook")
NAMES_SAID = 10  # names listed per key (the count says how many in all)
_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO opens without waiting


@dataclass(frozen=True)
class Bounds:
    """What one submission may hold to be collected (an honest one: under 10 files and 1 MB)."""

    files: int = 100  # regular files copied, at most
    megabytes: int = 50  # their bytes in all, in MB (10**6)
    depth: int = 3  # folders within folders (the release's reference/ is depth 1)
    entries: int = 1000  # names looked at in all: a folder of a million is not listed


BOUNDS = Bounds()


def copy_submission(
    parent_fd: int,
    name: str,
    dest: str,
    uid: int,
    bounds: Bounds = BOUNDS,
    ignore: tuple[str, ...] = (),
    include: tuple[str, ...] = ("*",),
    changed: list[int] | None = None,
) -> list[tuple[str, str]]:
    """The folder ``name`` of ``parent_fd`` copied into the new folder ``dest``, as the module says;
    returns what was left behind, (path in the folder, key). ``ignore``/``include``: nbgrader's
    ``CourseDirectory`` globs (names skipped silently, as nbgrader's own copy does). ``changed``,
    when given, receives the latest ``st_ctime_ns`` of the folder and of every entry looked at.
    Raises ``OSError`` when ``name`` is no folder of ``uid``'s (a link: ``ELOOP``); nothing is made then."""
    top = os.open(name, _OPEN | os.O_DIRECTORY, dir_fd=parent_fd)
    try:
        info = os.fstat(top)
        if info.st_uid != uid:
            raise PermissionError(f"{name} is not owned by uid {uid}")
        os.mkdir(dest)
        left: list[tuple[str, str]] = []
        budget = [bounds.files, bounds.megabytes * 10**6, bounds.entries, info.st_ctime_ns]
        _copy_folder(top, "", dest, 0, info.st_dev, uid, bounds, budget, left, ignore, include)
        if changed is not None:
            changed.append(max(budget[3], os.fstat(top).st_ctime_ns))  # an entry made while it was copied
        return left
    finally:
        os.close(top)


def _copy_folder(fd, rel, dest, depth, dev, uid, bounds, budget, left, ignore, include) -> None:
    with os.scandir(fd) as listing:
        entries = list(itertools.islice(listing, budget[2] + 1))
    if len(entries) > budget[2]:
        left.append((rel + "...", "past_limits"))  # the rest of the folder, unlisted
        entries = entries[: budget[2]]
    budget[2] -= len(entries)
    entries.sort(key=lambda e: (e.is_dir(follow_symlinks=False), e.name))  # files first
    for entry in entries:
        path = rel + entry.name
        if any(fnmatch.fnmatch(entry.name, g) for g in ignore) or (not rel and entry.name in (RECORD, TIMESTAMP)):
            continue
        if not (entry.is_file(follow_symlinks=False) or entry.is_dir(follow_symlinks=False)):
            left.append((path, "link" if entry.is_symlink() else "not_regular"))
            continue
        try:
            child = os.open(entry.name, _OPEN, dir_fd=fd)
        except OSError as error:
            left.append((path, "link" if error.errno == errno.ELOOP else "unreadable"))  # swapped for a link
            continue
        try:
            key = _copy_entry(child, entry.name, path, dest, depth, dev, uid, bounds, budget, left, ignore, include)
        except OSError:
            key = "unreadable"
        finally:
            os.close(child)
        if key:
            left.append((path, key))


def _copy_entry(fd, name, path, dest, depth, dev, uid, bounds, budget, left, ignore, include) -> str | None:
    """One opened entry judged on its descriptor and copied; the key it is left behind for, or None."""
    info = os.fstat(fd)
    budget[3] = max(budget[3], info.st_ctime_ns)  # the server's time of its last change
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)) or info.st_dev != dev:
        return "not_regular"
    if info.st_uid != uid or (stat.S_ISREG(info.st_mode) and info.st_nlink != 1):
        return "not_yours"
    if stat.S_ISDIR(info.st_mode):
        if depth >= bounds.depth:
            return "past_limits"
        os.mkdir(os.path.join(dest, name), stat.S_IMODE(info.st_mode) & 0o777 | 0o700)
        _copy_folder(
            fd, path + "/", os.path.join(dest, name), depth + 1, dev, uid, bounds, budget, left, ignore, include
        )
        return None
    if not any(fnmatch.fnmatch(name, g) for g in include):
        return None  # not included: skipped silently, as nbgrader's copy does
    if budget[0] < 1 or info.st_size > budget[1]:
        return "past_limits"
    budget[0], budget[1] = budget[0] - 1, budget[1] - info.st_size
    target = os.path.join(dest, name)
    out = os.open(
        target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, stat.S_IMODE(info.st_mode) & 0o777 | 0o600
    )
    try:
        remaining = info.st_size  # a file that grew since fstat is cut here
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 20))
            if not chunk:
                break
            os.write(out, chunk)  # a regular file: written whole
            remaining -= len(chunk)
        os.utime(out, ns=(info.st_atime_ns, info.st_mtime_ns))
    except OSError:
        os.unlink(target)  # no half of a file: it is left behind whole
        raise
    finally:
        os.close(out)
    return None


def collect(
    parent_fd: int,
    name: str,
    dest: str,
    uid: int,
    ignore: tuple[str, ...] = (),
    include: tuple[str, ...] = ("*",),
    release: str | None = None,
) -> tuple[datetime, list[dict]]:
    """The submission folder ``name`` of ``parent_fd`` (an inbound folder) collected into ``dest``:
    copied as ``copy_submission`` copies, then timed by the server's clock and its left-behind
    records written (``write``); returns that time and those records. A folder left with no
    notebook (its only one was a link, say) gets the blank notebooks of ``release`` (the
    assignment's release folder), graded with no answers, and the records say why
    (``no_notebook``): every hand-in ends graded. Nbgrader's ``collect`` (``exchange.Collect``) and
    the feedback service (``autograder/ontime.py``) both collect this way. Raises ``OSError`` as
    ``copy_submission`` does."""
    changed: list[int] = []
    left = copy_submission(parent_fd, name, dest, uid, ignore=ignore, include=include, changed=changed)
    if release and os.path.isdir(release) and not any(n.endswith(".ipynb") for n in os.listdir(dest)):
        for blank in sorted(n for n in os.listdir(release) if n.endswith(".ipynb")):
            shutil.copyfile(os.path.join(release, blank), os.path.join(dest, blank))
            left.append((blank, "no_notebook"))
    records = said(left)
    when = datetime.fromtimestamp(changed[0] / 1e9, UTC)  # the server's clock, not the name's
    write(dest, when.strftime("%Y-%m-%d %H:%M:%S.%f UTC"), records)
    return when, records


def said(left: list[tuple[str, str]], bounds: Bounds = BOUNDS) -> list[dict]:
    """What was left behind, as repair records: one per key, its count and its first names."""
    records = []
    for key in KEYS:
        paths = [p for p, k in left if k == key]
        if paths:
            limits = {f"limit_{k}": v for k, v in asdict(bounds).items()} if key == "past_limits" else {}
            names = [os.fsencode(p).decode("utf-8", "replace")[:200] for p in paths[:NAMES_SAID]]  # any bytes: text
            records.append({"key": f"left_behind_{key}", "count": len(paths), "files": names, **limits})
    return records


def write(dest: str, stamp: str, records: list[dict]) -> None:
    """nbgrader's ``timestamp.txt`` and, when anything was left behind, ``RECORD`` into ``dest``."""
    with open(os.path.join(dest, TIMESTAMP), "w") as f:
        f.write(stamp)
    if records:
        with open(os.path.join(dest, RECORD), "w") as f:
            json.dump(records, f)


def left_behind(folder: str) -> list[dict]:
    """The repair records (``autograder/repairs.py``) of what collect left behind of the submission
    in ``folder`` (``[]``: nothing, or no record): ``RECORD`` read without following a link, within
    a size that ``write`` never reaches."""
    try:
        fd = os.open(os.path.join(folder, RECORD), _OPEN)
    except OSError:
        return []
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return []
        data = f.read(1 << 16)
    try:
        records = json.loads(data)
    except ValueError:
        return []
    known = {f"left_behind_{k}" for k in KEYS}
    return (
        [
            {**r, "files": ", ".join(str(p) for p in r["files"])}
            for r in records
            if isinstance(r, dict) and r.get("key") in known and isinstance(r.get("files"), list)
        ]
        if isinstance(records, list)
        else []
    )
