"""autograder/sandbox/safefs.py: what the root grader does in folders a kernel could write.

Each tree here is one a hostile kernel can leave behind: 10,000 levels deep, full of links out of
the tree, FIFOs, devices, folders mode 000, immutable files, a log that became a link to a secret
or to /dev/zero. Removing and reading must neither recurse, follow, block nor read
without bound.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import stat
import struct
from pathlib import Path

import pytest

from autograder.sandbox import safefs

UID = 2_000_000 + 250  # a sandbox uid nobody else uses in these tests


def deep_tree(top: Path, levels: int, leaf: str = "leaf.txt") -> None:
    """``top/d/d/.../d/leaf`` made through folder descriptors (no path is longer than a name)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(levels):
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(os.open(leaf, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    os.close(fd)


@pytest.fixture
def outside(tmp_path):
    """A folder outside every tree under test, with a file that must survive."""
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.txt").write_text("the instructor's answers")
    return out


def survives(outside: Path) -> bool:
    return (outside / "secret.txt").read_text() == "the instructor's answers"


@pytest.fixture
def fast_tmp(tmp_path):
    """A folder on a tmpfs where there is one (each rmdir costs milliseconds on some disks)."""
    import tempfile

    if not os.access("/dev/shm", os.W_OK):
        yield tmp_path
        return
    base = Path(tempfile.mkdtemp(prefix="safefs-", dir="/dev/shm"))
    yield base
    safefs.remove_tree(base)


def test_removes_a_10000_level_tree(fast_tmp):
    tmp_path = fast_tmp
    top = tmp_path / "tree"
    top.mkdir()
    deep_tree(top, 10_000)
    (top / "side").mkdir()
    for i in range(50):
        (top / "side" / f"f{i}").write_text("x")
    safefs.remove_tree(top)
    assert not top.exists() and list(tmp_path.iterdir()) == []


def test_never_follows_links(tmp_path, outside):
    top = tmp_path / "tree"
    (top / "sub").mkdir(parents=True)
    (top / "to_dir").symlink_to(outside)
    (top / "sub" / "to_file").symlink_to(outside / "secret.txt")
    (top / "dangling").symlink_to(tmp_path / "nowhere")
    os.link(outside / "secret.txt", top / "hardlink")  # a second name: removing it keeps the file
    safefs.remove_tree(top)
    assert not top.exists() and survives(outside) and (outside / "secret.txt").stat().st_nlink == 1
    link = tmp_path / "link_itself"
    link.symlink_to(outside)
    safefs.remove_tree(link)  # a link given as the tree: the link goes, its target stays
    assert not os.path.lexists(link) and survives(outside)
    safefs.remove_tree(tmp_path / "absent")  # nothing to do


def test_removes_fifos_sockets_and_devices_without_opening_them(tmp_path):
    top = tmp_path / "tree"
    top.mkdir()
    os.mkfifo(top / "fifo")  # opening it for reading would block
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(top / "sock"))
    srv.close()
    if os.geteuid() == 0:
        os.mknod(top / "null", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    safefs.remove_tree(top)
    assert not top.exists()


def mode_000_tree(top: Path) -> None:
    (top / "inner" / "deeper").mkdir(parents=True)
    for folder in (top, top / "inner", top / "inner" / "deeper"):
        for i in range(3):
            (folder / f"f{i}.txt").write_text("x")
    (top / "readonly").mkdir()
    (top / "readonly" / "kept.txt").write_text("x")
    os.chmod(top / "readonly", 0o500)
    os.chmod(top / "inner" / "deeper", 0)
    os.chmod(top / "inner", 0)
    os.chmod(top, 0)


def test_removes_folders_left_mode_000(tmp_path):
    top = tmp_path / "tree"
    top.mkdir()
    mode_000_tree(top)
    safefs.remove_tree(top)
    assert not top.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another uid")
def test_removes_mode_000_folders_without_root_privileges():
    """Not only root's bypass: the owner of a tree it chmod'ed 000 can still remove it."""
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="safefs-"))  # pytest's own folders are closed to other uids
    os.chmod(base, 0o777)
    top = base / "tree"
    (top / "inner" / "deeper").mkdir(parents=True)
    (top / "inner" / "deeper" / "f.txt").write_text("x")
    for path in [top, *top.rglob("*")]:
        os.chown(path, UID, UID)
    os.chmod(top / "inner" / "deeper", 0)
    os.chmod(top / "inner", 0)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgroups([])
            os.setresgid(UID, UID, UID)
            os.setresuid(UID, UID, UID)
            safefs.remove_tree(top)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    try:
        assert os.waitstatus_to_exitcode(status) == 0 and not top.exists()
    finally:
        safefs.remove_tree(base)


def _set_immutable(path: Path) -> bool:
    fd = os.open(path, os.O_RDONLY)
    try:
        flags = struct.unpack("i4x", fcntl.ioctl(fd, safefs.FS_IOC_GETFLAGS, bytes(8)))[0]
        fcntl.ioctl(fd, safefs.FS_IOC_SETFLAGS, struct.pack("i4x", flags | safefs.FS_IMMUTABLE_FL | 0))
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def test_removes_immutable_files(tmp_path):
    top = tmp_path / "tree"
    (top / "sub").mkdir(parents=True)
    (top / "sub" / "frozen.txt").write_text("x")
    if not _set_immutable(top / "sub" / "frozen.txt"):
        pytest.skip("this file system or user cannot set the immutable flag")
    with pytest.raises(PermissionError):
        os.unlink(top / "sub" / "frozen.txt")
    safefs.remove_tree(top)
    assert not top.exists()


def test_wide_folders_are_removed_in_one_pass(fast_tmp):
    top = fast_tmp / "tree"
    top.mkdir()
    for i in range(300):
        (top / f"d{i}").mkdir()
        (top / f"d{i}" / "f").write_text("x")
    for i in range(3000):
        (top / f"f{i}").write_text("x")
    safefs.remove_tree(top)
    assert not top.exists()


def test_read_tail_is_bounded_and_reads_regular_files_only(tmp_path, outside):
    log = tmp_path / "kernel.log"
    log.write_bytes(b"a" * 10_000 + b"the end")
    assert safefs.read_tail(log, 100) == (b"a" * 10_000 + b"the end")[-100:]
    sparse = tmp_path / "sparse.log"
    with open(sparse, "wb") as f:
        f.truncate(2**40)  # a terabyte, sparse: only the tail is read
    assert safefs.read_tail(sparse, 10) == bytes(10)
    secret = tmp_path / "to_secret"
    secret.symlink_to(outside / "secret.txt")
    zero = tmp_path / "to_zero"
    zero.symlink_to("/dev/zero")
    for link in (secret, zero):
        with pytest.raises(OSError) as err:
            safefs.read_tail(link)
        assert err.value.errno == errno.ELOOP
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        safefs.read_tail(fifo)  # neither blocks nor reads
    with pytest.raises(OSError, match="not a regular file"):
        safefs.read_tail(tmp_path)


def test_stale_folders_are_those_of_graders_gone(tmp_path):
    """A grader killed before its clean-up leaves its kernel folders (named after its pid); the
    next grader finds those, and never a live grader's."""
    import subprocess

    from autograder.sandbox import mounts

    gone = subprocess.Popen(["true"])
    gone.wait()
    names = (f"encdec-k-{gone.pid}-a", f"encdec-w-{gone.pid}-b", f"{mounts.folder_prefix('k')}c", "encdec-k-x-d")
    for name in (*names, f"encdec-g-{gone.pid}-e", f"{mounts.folder_prefix('g')}f"):  # g: a unit's gradebook
        (tmp_path / name).mkdir()
    (tmp_path / f"encdec-z-{gone.pid}-file").write_text("not a folder")
    assert sorted(os.path.basename(p) for p in mounts.stale_folders(str(tmp_path))) == [
        f"encdec-g-{gone.pid}-e",
        f"encdec-k-{gone.pid}-a",
        f"encdec-w-{gone.pid}-b",
    ]
