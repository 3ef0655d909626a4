"""File operations of the root grader on folders a sandboxed kernel could write.

A kernel owns its scratch working folder and its socket folder: it can put links, FIFOs,
devices it was given, folders 10,000 levels deep or without any permission there, and swap a
file for a link to the instructor's notebook or to /dev/zero. Everything the grader (root) does
in such a folder goes through this module, which

- never follows a symbolic link (``O_NOFOLLOW``, ``*at`` calls relative to folder descriptors),
- never crosses into another file system (a mount point is refused, not entered),
- walks iteratively, one open folder at a time (no recursion, no descriptor per level), and
  checks that ``..`` leads back to the folder it came from (nothing can make it loop or climb
  out),
- reads a bounded number of bytes, and only from regular files.

``remove_tree`` is ``rm -rf`` with those rules (it also takes back folders left mode 000 or
read-only, and clears the immutable and append-only flags of what it removes); ``read_tail``
is the end of a log file. Nothing is copied into a kernel's folder (it starts empty).
Standard library only: the kernelspec's launcher imports it, the zygote loads it by path.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import struct

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO must not block us

FS_IOC_GETFLAGS, FS_IOC_SETFLAGS = 0x80086601, 0x40086602  # linux/fs.h (64-bit encoding)
FS_IMMUTABLE_FL, FS_APPEND_FL = 0x10, 0x20


def _ident(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def _lstat(name: str, dir_fd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _clear_flags(fd: int) -> None:
    """Drop the immutable and append-only flags of an open file or folder (root may; else nothing)."""
    try:
        flags = struct.unpack("i4x", fcntl.ioctl(fd, FS_IOC_GETFLAGS, bytes(8)))[0]
        if flags & (FS_IMMUTABLE_FL | FS_APPEND_FL):
            fcntl.ioctl(fd, FS_IOC_SETFLAGS, struct.pack("i4x", flags & ~(FS_IMMUTABLE_FL | FS_APPEND_FL)))
    except OSError:
        pass


def _clear_entry_flags(dir_fd: int, name: str) -> None:
    """`_clear_flags` of an entry, if it is a regular file or a folder (never open a device or FIFO)."""
    st = _lstat(name, dir_fd)
    if st is None or not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        return
    try:
        fd = os.open(name, _FILE, dir_fd=dir_fd)
    except OSError:
        return
    try:
        if _ident(os.fstat(fd)) == _ident(st):
            _clear_flags(fd)
    finally:
        os.close(fd)


def _retry_removal(remove, dir_fd: int, name: str, inside: bool) -> None:
    """Run ``remove(name, dir_fd=dir_fd)``; if refused, make the entry (and, ``inside`` the tree,
    its folder) removable and try once more."""
    try:
        remove(name, dir_fd=dir_fd)
        return
    except FileNotFoundError:
        return
    except PermissionError:
        pass
    if inside:  # a folder of the tree left read-only, immutable or append-only by the kernel
        os.fchmod(dir_fd, stat.S_IMODE(os.fstat(dir_fd).st_mode) | stat.S_IRWXU)
        _clear_flags(dir_fd)
    _clear_entry_flags(dir_fd, name)
    try:
        remove(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass


def _open_dir(dir_fd: int, name: str, st: os.stat_result) -> int:
    """The folder ``name`` (known by ``st``), opened without following a link, even if mode 000."""
    try:
        fd = os.open(name, _DIR, dir_fd=dir_fd)
    except PermissionError:  # only when not root: a folder the kernel left without permissions
        path_fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        try:
            if _ident(os.fstat(path_fd)) != _ident(st):
                raise OSError(errno.ESTALE, f"{name} changed while being opened")
            os.chmod(f"/proc/self/fd/{path_fd}", stat.S_IRWXU)  # the inode itself, not a link
        finally:
            os.close(path_fd)
        fd = os.open(name, _DIR, dir_fd=dir_fd)
    if _ident(os.fstat(fd)) != _ident(st):
        os.close(fd)
        raise OSError(errno.ESTALE, f"{name} changed while being opened")
    return fd


def _parent_dir(path: str) -> tuple[int, str]:
    """(descriptor of the parent folder, last component) of a path the caller chose itself."""
    path = os.path.abspath(os.fspath(path))
    parent, name = os.path.split(path)
    if not name or name in (".", ".."):
        raise ValueError(f"refusing to work on {path!r}")
    return os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), name


def remove_tree(path) -> None:
    """``rm -rf path``: whatever it is (a link is removed, never followed); nothing if absent.

    Only the last component of ``path`` may be the kernel's: its parents are the caller's own.
    """
    parent, name = _parent_dir(path)
    try:
        remove_at(parent, name)
    finally:
        os.close(parent)


def _folder_or_removed(dir_fd: int, name: str, inside: bool) -> os.stat_result | None:
    """The entry ``name`` of ``dir_fd``: its stat if it is a folder, else removed (if there) and None."""
    st = _lstat(name, dir_fd)
    if st is not None and not stat.S_ISDIR(st.st_mode):
        _retry_removal(os.unlink, dir_fd, name, inside=inside)
        return None
    return st


def remove_at(dir_fd: int, name: str) -> None:
    """``rm -rf`` of the entry ``name`` of the open folder ``dir_fd`` (see the module docstring)."""
    st = _folder_or_removed(dir_fd, name, inside=False)
    if st is None:
        return
    dev = st.st_dev
    fd = _open_dir(dir_fd, name, st)
    # One frame per level below the top: the folder's name, its parent's identity (checked when
    # climbing back by ``..``), and its subfolders still to remove (None: not listed yet).
    frames: list[list] = [[name, _ident(os.fstat(dir_fd)), None]]
    try:
        while frames:
            frame = frames[-1]
            if frame[2] is None:
                frame[2] = _remove_entries(fd, dev)
            if frame[2]:
                sub = frame[2].pop()
                sst = _folder_or_removed(fd, sub, inside=True)
                if sst is None:
                    continue
                child = _open_dir(fd, sub, sst)
                here = _ident(os.fstat(fd))
                os.close(fd)
                fd = child
                frames.append([sub, here, None])
                continue
            # this folder is empty now: climb back to its parent and remove it
            frames.pop()
            if not frames:
                os.close(fd)
                fd = -1
                _retry_removal(os.rmdir, dir_fd, name, inside=False)
                return
            up = os.open("..", _DIR, dir_fd=fd)
            if _ident(os.fstat(up)) != frame[1]:
                os.close(up)
                raise OSError(errno.ESTALE, f"a folder under {name} was moved during its removal")
            os.close(fd)
            fd = up
            _retry_removal(os.rmdir, fd, frame[0], inside=True)
    finally:
        if fd >= 0:
            os.close(fd)


def _remove_entries(fd: int, dev: int) -> list[str]:
    """Remove every entry of the open folder ``fd`` except subfolders, which are returned."""
    subfolders = []
    for entry in os.listdir(fd):
        st = _lstat(entry, fd)
        if st is None:
            continue
        if stat.S_ISDIR(st.st_mode):
            if st.st_dev != dev:  # a mount point (not in the grader's namespace, but never cross one)
                raise OSError(errno.EXDEV, f"{entry} is on another file system; not removed")
            subfolders.append(entry)
        else:
            _retry_removal(os.unlink, fd, entry, inside=True)
    return subfolders


def read_tail(path, limit: int = 4096) -> bytes:
    """At most the last ``limit`` bytes of a regular file, never through a link (OSError else)."""
    fd = os.open(path, _FILE)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f"{os.fspath(path)} is not a regular file")
        return os.pread(fd, limit, max(0, st.st_size - limit))
    finally:
        os.close(fd)


def _folder_in(parent_fd: int, name: str, create: bool) -> int:
    """A folder inside ``parent_fd``, never through a symbolic link the kernel planted."""
    if create:
        try:
            os.mkdir(name, 0o755, dir_fd=parent_fd)
        except FileExistsError:
            pass
    return os.open(name, _DIR, dir_fd=parent_fd)


def write_new(workdir, folder: str, name: str, data: bytes) -> None:
    """Write ``workdir/folder/name`` afresh (whatever stood there is unlinked first, never followed)."""
    top = os.open(workdir, _DIR)
    try:
        d = _folder_in(top, folder, create=True)
        try:
            try:
                os.unlink(name, dir_fd=d)
            except FileNotFoundError:
                pass
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=d)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        finally:
            os.close(d)
    finally:
        os.close(top)


def read_bounded(workdir, folder: str, name: str, limit: int) -> bytes:
    """``workdir/folder/name`` if it is a regular file of at most ``limit`` bytes (a link, a FIFO or a
    larger file raises ``OSError`` or ``ValueError``)."""
    top = os.open(workdir, _DIR)
    try:
        d = _folder_in(top, folder, create=False)
        try:
            fd = os.open(name, _FILE, dir_fd=d)
            with os.fdopen(fd, "rb") as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    raise ValueError(f"{name} is not a regular file")
                data = f.read(limit + 1)
        finally:
            os.close(d)
    finally:
        os.close(top)
    if len(data) > limit:
        raise ValueError(f"{name} is larger than {limit} bytes")
    return data


def unlink_in(workdir, folder: str, name: str) -> None:
    """Remove ``workdir/folder/name`` if it is there (never through a link)."""
    try:
        top = os.open(workdir, _DIR)
        try:
            d = _folder_in(top, folder, create=False)
            try:
                os.unlink(name, dir_fd=d)
            finally:
                os.close(d)
        finally:
            os.close(top)
    except OSError:
        pass
