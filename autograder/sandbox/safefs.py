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
is the end of a log file; ``copy_tree`` copies the regular files of a folder, bounded, into a
new one owned by the kernel's uid (``copy_into``: into an open folder, the kernel's tmpfs).
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


class TreeTooLarge(OSError):
    """A folder to copy holds more files, bytes or levels than allowed."""


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


def remove_at(dir_fd: int, name: str) -> None:
    """``rm -rf`` of the entry ``name`` of the open folder ``dir_fd`` (see the module docstring)."""
    st = _lstat(name, dir_fd)
    if st is None:
        return
    if not stat.S_ISDIR(st.st_mode):
        _retry_removal(os.unlink, dir_fd, name, inside=False)
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
                sst = _lstat(sub, fd)
                if sst is None:
                    continue
                if not stat.S_ISDIR(sst.st_mode):
                    _retry_removal(os.unlink, fd, sub, inside=True)
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


def copy_tree(src, dst, *, owner: int | None = None, skip=lambda name: False, max_files: int = 2000,
              max_bytes: int = 256 * 2**20, max_depth: int = 32) -> int:
    """Copy the regular files and folders of ``src`` into the new folder ``dst``; return the bytes.

    Links, FIFOs, sockets and devices are left out, and so is every entry whose name ``skip``
    accepts. ``dst`` and everything in it get the owner ``owner`` (files 0644, folders 0755).
    Raises `TreeTooLarge` past ``max_files`` files, ``max_bytes`` bytes or ``max_depth`` levels.
    """
    parent, name = _parent_dir(dst)
    try:
        os.mkdir(name, 0o755, dir_fd=parent)
        dfd = os.open(name, _DIR, dir_fd=parent)
    finally:
        os.close(parent)
    try:
        sfd = os.open(src, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except BaseException:
        os.close(dfd)
        raise
    if owner is not None:
        os.fchown(dfd, owner, owner)
    return copy_into(sfd, dfd, owner=owner, skip=skip, max_files=max_files, max_bytes=max_bytes,
                     max_depth=max_depth)


def copy_into(sfd: int, dfd: int, *, owner: int | None = None, skip=lambda name: False, max_files: int = 2000,
              max_bytes: int = 256 * 2**20, max_depth: int = 32) -> int:
    """`copy_tree` from the open folder ``sfd`` into the open, empty folder ``dfd``; both
    descriptors are closed when it returns."""
    # A stack of (source folder, copy) descriptors and the entries of the source left to copy.
    try:
        stack = [(sfd, dfd, sorted(os.listdir(sfd)))]
    except BaseException:
        os.close(sfd)
        os.close(dfd)
        raise
    files = size = 0
    try:
        while stack:
            sfd, dfd, names = stack[-1]
            if not names:
                os.close(sfd)
                os.close(dfd)
                stack.pop()
                continue
            entry = names.pop()
            if skip(entry):
                continue
            st = _lstat(entry, sfd)
            if st is None:
                continue
            if stat.S_ISDIR(st.st_mode):
                if len(stack) >= max_depth:
                    raise TreeTooLarge(errno.EFBIG, f"more than {max_depth} levels of folders")
                os.mkdir(entry, 0o755, dir_fd=dfd)
                child_d = os.open(entry, _DIR, dir_fd=dfd)
                try:
                    if owner is not None:
                        os.fchown(child_d, owner, owner)
                    child_s = _open_dir(sfd, entry, st)
                except BaseException:
                    os.close(child_d)
                    raise
                stack.append((child_s, child_d, sorted(os.listdir(child_s))))
            elif stat.S_ISREG(st.st_mode):
                files += 1
                if files > max_files:
                    raise TreeTooLarge(errno.EFBIG, f"more than {max_files} files")
                size += _copy_file(sfd, dfd, entry, st, owner, max_bytes - size, max_bytes)
    finally:
        for sfd, dfd, _ in stack:
            os.close(sfd)
            os.close(dfd)
    return size


def _copy_file(sfd: int, dfd: int, name: str, st: os.stat_result, owner: int | None, budget: int,
               max_bytes: int) -> int:
    src = os.open(name, _FILE, dir_fd=sfd)
    try:
        if _ident(os.fstat(src)) != _ident(st):
            raise OSError(errno.ESTALE, f"{name} changed while being copied")
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dfd)
        try:
            if owner is not None:
                os.fchown(out, owner, owner)
            copied = 0
            while chunk := os.read(src, 1 << 20):
                copied += len(chunk)
                if copied > budget:
                    raise TreeTooLarge(errno.EFBIG, f"more than {max_bytes} bytes")
                view = memoryview(chunk)
                while view:
                    view = view[os.write(out, view):]
            return copied
        finally:
            os.close(out)
    finally:
        os.close(src)


# --- the grading files: handed to a kernel's folder and taken back, by folder descriptors -----------

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
