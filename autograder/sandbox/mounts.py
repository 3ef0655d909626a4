"""Mounts, as thin wrappers over the Linux calls: the kernel's folders are size- and
inode-limited tmpfs mounts.

A kernel can write in two folders, its working folder and its socket folder. Neither is on the
host's disk: each is a tmpfs of its own, limited in bytes (`size`) and in files (`nr_inodes`),
so a kernel cannot fill the disk or leave a million files to walk, and unmounting it takes all
it wrote along at once.

- As root the grader mounts both on the host (`tmpfs`), before it fills the working folder with
  the submission's files (`sandbox.prepare_workdir`), and unmounts them after the kernel. The
  zygote's staging folders are shared mounts (`make_shared`), so a kernel's tmpfs made there
  after the zygote started reaches it.
  A grader killed before it unmounts them leaves them mounted (they hold at most the limits):
  folders that hold mounts are named after the grader's pid (`folder_prefix`), and the next
  grader as root unmounts and removes those of graders that are gone (`sweep_stale`), and any
  grader removes its own user's folders of graders that are gone (`stale_folders`).
- Without root the grader cannot mount on the host. The kernelspec's launcher moves into a user
  and mount namespace of its own (`private_namespace`) and mounts the working folder's tmpfs
  over the grader's copy there, then copies the files in; the grader reaches that folder
  through `/proc/<launcher>/root`. The socket folder stays on the host (the grader's ZeroMQ
  client must reach its sockets by their path).

Standard library only: the zygote loads this file by path.
"""

import ctypes
import os
import re

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x02000000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE, MS_SHARED = 32, 4096, 16384, 1 << 18, 1 << 20
MNT_DETACH = 2

libc = ctypes.CDLL("libc.so.6", use_errno=True)


def check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(src, dst, fstype, flags: int, data=None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731 (a one-line helper named where it is used)
    check(libc.mount(enc(src), enc(dst), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {dst}")


def bind(src, dst, readonly: bool) -> None:
    mount(src, dst, None, MS_BIND | MS_REC)
    mount(None, dst, None, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV | (MS_RDONLY if readonly else 0))


def umount(path: str) -> None:
    check(libc.umount2(path.encode(), MNT_DETACH), f"umount {path}")


def make_shared(path: str) -> None:
    """Make ``path`` a mount point of its own whose submounts propagate into the sandboxes that
    bind it later (bwrap makes its mounts slaves of the host's): the zygote's staging folders."""
    mount(path, path, None, MS_BIND)
    mount(None, path, None, MS_SHARED)


def private_namespace(as_root: bool) -> None:
    """Move this process into a mount namespace of its own, where nothing it mounts reaches the
    host. Without root it needs a user namespace too, in which it keeps its own uid and gid (it
    gets the capabilities to mount there, and loses them at its next `execve`)."""
    uid, gid = os.getuid(), os.getgid()
    check(libc.unshare(CLONE_NEWNS if as_root else CLONE_NEWNS | CLONE_NEWUSER), "unshare")
    if not as_root:
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
    mount(None, "/", None, MS_REC | MS_PRIVATE)


def tmpfs(path: str, size_mb: int, files: int, owner: int, group: int, mode: int = 0o755) -> None:
    """Mount a tmpfs of ``size_mb`` MiB and ``files`` inodes (files and folders, itself included)
    at the existing folder ``path``, owned by ``owner``."""
    mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size_mb}m,nr_inodes={files},mode={mode:o}")
    os.chown(path, owner, group, follow_symlinks=False)


# encdec-<kind>-<grader pid>-<random>: kernel socket folder (k), working folder holder (w), the
# zygote's socket (z) and scratch (zw) areas, the grader's side of a kernel's relay (r, relay.py)
_FOLDER = re.compile(r"^encdec-(?:k|w|z|zw|r|g)-(\d+)-")  # g: a grading unit's throwaway gradebook


def folder_prefix(kind: str) -> str:
    """The name prefix of a folder of this grader that holds (or is) a mount: see `sweep_stale`."""
    return f"encdec-{kind}-{os.getpid()}-"


def _mount_points() -> list[str]:
    with open("/proc/self/mountinfo") as f:  # field 5: the mount point, octal-escaped
        return [re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4]) for line in f]


def sweep_stale() -> list[str]:
    """As root: unmount what graders that are gone left mounted (killed before their clean-up),
    deepest first; returns the top folders they were in (the caller removes them)."""
    stale, tops = [], {}
    for point in _mount_points():
        parts = point.split("/")
        for i, part in enumerate(parts):
            match = _FOLDER.match(part)
            if match and not os.path.exists(f"/proc/{match.group(1)}"):
                stale.append(point)
                tops.setdefault("/".join(parts[: i + 1]), None)
                break
    for point in sorted(stale, key=lambda p: p.count("/"), reverse=True):
        try:
            umount(point)
        except OSError:
            pass
    return [top for top in tops if not any(t != top and top.startswith(t + "/") for t in tops)]


def stale_folders(base: str) -> list[str]:
    """This user's kernel folders in ``base`` whose grader is gone (killed before its clean-up;
    without root they are plain folders; root's include those it gave a kernel's uid): the
    caller removes them with safefs."""
    out = []
    try:
        entries = list(os.scandir(base))
    except OSError:
        return out
    for entry in entries:
        match = _FOLDER.match(entry.name)
        try:
            mine = entry.is_dir(follow_symlinks=False) and os.geteuid() in (0, entry.stat(follow_symlinks=False).st_uid)
        except OSError:
            continue
        if match and mine and not os.path.exists(f"/proc/{match.group(1)}"):
            out.append(entry.path)
    return out
