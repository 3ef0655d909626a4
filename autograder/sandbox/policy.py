"""The sandbox of a grading kernel as data: its limits (`Limits`) and what it is (`Policy`).

Both launch paths are derived from one `Policy`: `sandbox.bwrap_command` (a fresh bubblewrap
sandbox per kernel) and `sandbox.zygote_command` with the zygote's kernels (zygote.py, which
receives `Policy.request()`, plain data, since it imports only the standard library). Per
kernel come only its uid, folders and grading edition (the dict in sandbox.json).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from . import seccomp


def _limit(default, help: str):
    """A field of `Limits`; its help text becomes the help of its nbgrader setting (kernel.py)."""
    return dataclasses.field(default=default, metadata={"help": help})


@dataclasses.dataclass
class Limits:
    """Resource limits of one kernel: per process (rlimits, see `prlimit(1)`) and for all its
    processes together (its cgroup, see cgroups.py). Declared here only: each field is also a
    setting of `SandboxKernelManager` (``c.SandboxKernelManager.<field>``), made from it."""

    # address space of each process (RLIMIT_AS: `import torch` alone maps ~1.5 GB), and memory of
    # the whole kernel (its cgroup: memfds, shared memory, /tmp and children included)
    memory_mb: int = _limit(4096, "Address-space limit of each kernel process, and memory of the whole kernel (MiB).")
    cpu_seconds: int = _limit(600, "CPU time of each kernel process (RLIMIT_CPU), then SIGKILL (s).")
    nproc: int = _limit(64, "Processes and threads the kernel may have (RLIMIT_NPROC and the cgroup's pids.max).")
    fsize_mb: int = _limit(64, "Largest file the kernel may write (RLIMIT_FSIZE, MiB).")
    nofile: int = _limit(256, "Open file descriptors of each kernel process (RLIMIT_NOFILE).")
    # a tmpfs counts against RAM, not RLIMIT_AS
    tmp_mb: int = _limit(256, "Size of the kernel's private /tmp, a tmpfs (MiB).")
    work_mb: int = _limit(512, "Size of the kernel's working folder, a tmpfs of its own (MiB).")
    work_files: int = _limit(4096, "Files and folders the kernel's working folder may hold (its tmpfs's nr_inodes).")
    threads: int = _limit(1, "OMP/MKL threads of the kernel: workers run side by side, one core each.")
    cpus: float = _limit(1.0, "CPU quota of the whole kernel, all its processes together (its cgroup).")
    # one message from the kernel to the grader, metered at the socket before the grader receives it
    # (relay.py): above the echo of a cell's code (under the intake limit of 10 MB) and one print of a
    # 30 MB line (the hostile row big_line: the output cap cuts it to the cell's budget, graded on)
    message_mb: int = _limit(
        32,
        "Largest message (all its frames) the kernel may send the grader (MiB); past it "
        "the kernel is stopped before the grader receives the message.",
    )
    message_frames: int = _limit(64, "Frames of one message from the kernel (a jupyter message has 7 and its buffers).")
    # the grader parses each message's JSON: 31 MiB of "[{}, {}, ..." became 800 MB of Python objects
    message_values: int = _limit(
        4_000_000,
        "JSON values of one message from the kernel, counted as the bytes that "
        "open or separate one (relay.VALUE_BYTES; each value the grader parses "
        "is an object of up to ~40 bytes).",
    )
    # what the grader may hold of a kernel's messages over time (relay.py): its sockets queue a few
    # messages unread, so the last of them together are bounded; on the channels it never reads, all
    unread_mb: int = _limit(
        64,
        "What the kernel's messages the grader may hold unread come to, per channel: the "
        "last relay.UNREAD + 1 messages of a connection together (MiB); past it the kernel "
        "is stopped.",
    )
    quiet_kb: int = _limit(
        1024,
        "What the kernel may send over its life on each channel the grader does not read "
        "(stdin, control; the heartbeat beyond the echo of the grader's pings), in KiB; past "
        "it the kernel is stopped.",
    )


SOCK_FILES = 64  # files of the socket folder: connection file, policy, log, ZeroMQ sockets

# bwrap's option for each namespace a kernel gets (a mount namespace it always gets); the zygote
# has the same names mapped to CLONE_NEW* flags.
BWRAP_NAMESPACES = {
    "pid": "--unshare-pid",
    "net": "--unshare-net",
    "ipc": "--unshare-ipc",
    "uts": "--unshare-uts",
    "cgroup": "--unshare-cgroup-try",
}


@dataclasses.dataclass(frozen=True)
class Policy:
    """What the sandbox of a kernel is, as data; `bwrap_command`, `zygote_command` and the zygote's
    kernels (zygote.py, which receives `request()`) are all derived from it. Per kernel come only
    its uid, working and socket folders and grading edition (the dict in sandbox.json)."""

    limits: Limits = dataclasses.field(default_factory=Limits)
    namespaces: tuple[str, ...] = ("pid", "net", "ipc", "uts", "cgroup")  # unshared (and a mount namespace)
    hostname: str = "sandbox"
    # of the system, only what kernel_site.py lists (the interpreter, its standard library, the
    # allowed distributions, the shared libraries they need), these files of /etc, and the top-level
    # links of a merged /usr (/lib64 -> usr/lib64: the loader's path), kept as links
    etc: tuple[str, ...] = ("/etc/ld.so.cache", "/etc/localtime")
    links: tuple[str, ...] = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
    tmp: str = "/tmp"  # a private tmpfs of limits.tmp_mb, mode 1777
    seccomp_eperm: tuple[str, ...] = (  # refused with EPERM (seccomp.py says why)
        "add_key",
        "request_key",
        "keyctl",
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        "mount",
        "umount2",
        "pivot_root",
        "open_tree",
        "move_mount",
        "fsopen",
        "fsconfig",
        "fsmount",
        "fspick",
        "mount_setattr",
        "setns",
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "kexec_load",
        "kexec_file_load",
        "init_module",
        "finit_module",
        "delete_module",
        "bpf",
        "perf_event_open",
        "userfaultfd",
    )
    seccomp_enosys: tuple[str, ...] = ("clone3",)  # glibc falls back to clone, whose flags the filter sees
    seccomp_clone_flags: int = seccomp.CLONE_NEWUSER  # clone and unshare with any of these: EPERM

    def rlimits(self) -> list[tuple[str, int]]:
        """(name, value) per process: `prlimit --<name>` and `resource.RLIMIT_<NAME>`."""
        mb, lim = 1024 * 1024, self.limits
        return [
            ("as", lim.memory_mb * mb),
            ("cpu", lim.cpu_seconds),
            ("nproc", lim.nproc),
            ("fsize", lim.fsize_mb * mb),
            ("nofile", lim.nofile),
            ("core", 0),
        ]

    def sock_mb(self) -> int:
        """Size of the socket folder's tmpfs: the kernel's log (capped by RLIMIT_FSIZE) and a little."""
        return self.limits.fsize_mb + 1

    def cgroup_limits(self) -> dict:
        """The limits of the kernel's cgroup, for all its processes together (cgroups.create)."""
        return {
            "memory_bytes": self.limits.memory_mb * 1024 * 1024,
            "pids": self.limits.nproc,
            "cpus": self.limits.cpus,
        }

    def seccomp_program(self) -> bytes:
        return seccomp.assemble(self.seccomp_eperm, self.seccomp_enosys, self.seccomp_clone_flags)

    def mounts(
        self,
        readonly: list[Path],
        extra: list[Path],
        sites: dict[Path, list[Path]] | None = None,
        files: list[str] = (),
    ) -> list[tuple[str, ...]]:
        """The view of a kernel, as rows (kind, path...): the top-level links, its own /proc, /dev and
        /tmp, the parents its paths need, `readonly` trees; `files` and `etc` one by one, each with the
        links on its way (`_chain`); then each folder of installed packages in `sites` emptied
        (`empty`: a small read-only-owned tmpfs) with only its listed entries bound back
        (kernel_site.py), in the folders they need. Nothing else of the host is there."""
        rows: list[tuple[str, ...]] = [("symlink", os.readlink(p), p) for p in self.links if os.path.islink(p)]
        rows += [("proc", "/proc"), ("dev", "/dev"), ("tmpfs", self.tmp)]
        chains = list(dict.fromkeys(r for f in [*files, *self.etc] if os.path.lexists(f) for r in _chain(f)))
        places = [*readonly, *extra, *(sites or {}), *(Path(r[-1]) for r in chains)]
        rows += [("dir", str(parent)) for parent in _ancestors_to_create(places, readonly, [Path(self.tmp)])]
        rows += [("ro-bind", str(p), str(p)) for p in readonly]
        rows += [r for r in chains if r not in rows]
        for folder, kept in (sites or {}).items():
            rows.append(("empty", str(folder)))
            for parent in dict.fromkeys(p.parent for p in kept if p.parent != folder):  # made 0755, not bwrap's 0700
                rows.append(("dir", str(parent)))
            rows += [("ro-bind", str(p), str(p)) for p in kept]
        return rows

    def bwrap_namespaces(self) -> list[str]:
        return [BWRAP_NAMESPACES[ns] for ns in self.namespaces] + ["--hostname", self.hostname]

    def request(self) -> dict:
        """The plain data the zygote applies to each kernel (it imports only the standard library)."""
        return {
            "namespaces": list(self.namespaces),
            "hostname": self.hostname,
            "tmp": self.tmp,
            "tmp_mb": self.limits.tmp_mb,
            "work_mb": self.limits.work_mb,
            "work_files": self.limits.work_files,
            "rlimits": self.rlimits(),
            "seccomp": self.seccomp_program().hex(),
        }

    def table(self) -> str:
        """The policy as the markdown table in README.md (a test keeps the two equal)."""
        lim = self.limits
        shown = {"as": f"{lim.memory_mb} MiB", "fsize": f"{lim.fsize_mb} MiB", "cpu": f"{lim.cpu_seconds} s"}
        flags = self.seccomp_clone_flags
        flags = "CLONE_NEWUSER" if flags == seccomp.CLONE_NEWUSER else f"flags {flags:#x}"
        rows = [
            ("namespaces", ", ".join(self.namespaces) + f" and mount; hostname `{self.hostname}`"),
            (
                "system, read-only",
                "only the interpreter, its standard library, the shared libraries these, the "
                "allowed distributions and `setpriv` (without root: `prlimit`) link against "
                "(their ELF closure), "
                + ", ".join(f"`{p}`" for p in self.etc)
                + " and the links "
                + ", ".join(f"`{p}`" for p in self.links)
                + "; nothing else of `/usr` or `/etc` "
                "(`kernel_site.py`)",
            ),
            (
                "folders of packages",
                "the interpreter's own and those of the allowed distributions: emptied; only "
                "the files of ipykernel, numpy, torch and what they require bound back, "
                "read-only (`kernel_site.py`)",
            ),
            (f"`{self.tmp}`", f"private tmpfs of {lim.tmp_mb} MiB"),
            (
                "working folder",
                f"tmpfs of {lim.work_mb} MiB and {lim.work_files} files and folders of its own, "
                "empty at the start (no file handed in reaches the kernel); unmounted after the kernel",
            ),
            (
                "socket folder",
                f"tmpfs of {self.sock_mb()} MiB (its log: the file-size limit) and {SOCK_FILES} "
                "files of its own (without root: a folder on the host, see README)",
            ),
            ("rlimits, each process", ", ".join(f"{n} {shown.get(n, v)}" for n, v in self.rlimits())),
            (
                "cgroup, all processes together",
                f"memory {lim.memory_mb} MiB (memfds, shared memory, `/tmp` and "
                f"children included), {lim.nproc} processes and threads, "
                f"{lim.cpus:g} CPU",
            ),
            (
                "seccomp: EPERM",
                ", ".join(f"`{n}`" for n in self.seccomp_eperm) + f"; `clone` and `unshare` with {flags}",
            ),
            ("seccomp: ENOSYS", ", ".join(f"`{n}`" for n in self.seccomp_enosys) + " (glibc falls back to `clone`)"),
            (
                "each message to the grader",
                f"at most {lim.message_mb} MiB, {lim.message_frames} frames and "
                f'{lim.message_values} JSON values (bytes `,:[{{"`), metered '
                "at the socket by the launcher's relay before the grader receives it "
                "(`relay.py`); past it the kernel is stopped",
            ),
            (
                "messages to the grader over time",
                f"per channel, the last messages its sockets may hold unread at "
                f"most {lim.unread_mb} MiB together; on stdin, control and heartbeat, "
                f"which it does not read, {lim.quiet_kb} KiB over the kernel's life "
                "(the heartbeat also the echo of the grader's pings) "
                "(`relay.py`); past either the kernel is stopped",
            ),
        ]
        return "\n".join(["| `sandbox.Policy()` | |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows)])


def _ancestors_to_create(paths: list[Path], bound: list[Path], empty: list[Path]) -> list[Path]:
    """Parent folders that the sandbox's root lacks (created 0755, see bwrap --dir).

    ``bound`` trees are mounted whole, so nothing below them is missing; ``empty`` mounts (the
    private /tmp) exist themselves but hold nothing, so a repository checked out under /tmp
    needs its parents made there, traversable by the kernel's uid.
    """
    out: list[Path] = []
    for p in paths:
        for parent in reversed(Path(p).parents):
            if parent == Path("/") or parent in out or parent in empty:
                continue
            if any(parent == q or q in parent.parents for q in bound):
                continue
            out.append(parent)
    return out


def _chain(path: str) -> list[tuple[str, ...]]:
    """The rows that make ``path`` resolve in the sandbox as on the host: each link on its way (with
    its target as written), then the file it comes to, bound read-only at its own path."""
    rows, here, todo, hops = [], "/", [p for p in path.split("/") if p], 0
    while todo:
        part = todo.pop(0)
        if part == "..":
            here = os.path.dirname(here)
        elif part != "." and os.path.islink(there := os.path.join(here, part)):
            hops += 1
            if hops > 40:
                raise OSError(f"too many links on the way to {path}")
            target = os.readlink(there)
            rows += [("symlink", target, there)] if ("symlink", target, there) not in rows else []
            todo[:0] = [p for p in target.split("/") if p]
            here = "/" if target.startswith("/") else here
        elif part != ".":
            here = os.path.join(here, part)
    return rows + [("ro-bind", here, here)]


# glibc's allocator, held steady in every graded kernel (GLIBC_TUNABLES, read at its start) and in
# the grader where it times the lesson's structure (judge/budget.py). Left to adapt, it returns a
# run's large temporaries (the prefill run's (N, H, P, P) scores: 16 MB) to the system after each call
# in some processes and not in others: the same call cost 46 ms in one process and 90 ms in the next,
# for its whole life. A bound timed in a slow grader let a wrong structure through; a fast grader's
# failed an honest kernel that happened to be slow. Fixed thresholds keep such temporaries in the heap.
MALLOC = {"mmap_threshold": 32 * 2**20, "trim_threshold": 128 * 2**20}  # 32 MiB: glibc's largest mmap threshold


def malloc_tunables() -> str:
    """``MALLOC`` as glibc reads it at a process's start (GLIBC_TUNABLES)."""
    return ":".join(f"glibc.malloc.{k}={v}" for k, v in MALLOC.items())


def kernel_environment(limits: dict, prefix: str, package: Path | None = None) -> dict[str, str]:
    """The whole environment of a sandboxed kernel (nothing is inherited from the grader).

    ``package``: where the grader found `encdec` (its grading edition is mounted there); the
    kernel imports it from that folder's parent first, whatever the environment's own install
    points at (an editable install of another checkout, say). Only what the sandbox mounts is
    there, so nothing else of that folder is importable.
    """
    env = {
        "PATH": f"{Path(prefix) / 'bin'}:/usr/bin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "TMPDIR": "/tmp",
        "MPLCONFIGDIR": "/tmp/matplotlib",
        "IPYTHONDIR": "/tmp/ipython",
        "JUPYTER_RUNTIME_DIR": "/tmp/jupyter",
        "PYTHONDONTWRITEBYTECODE": "1",
        "OMP_NUM_THREADS": str(limits["threads"]),
        "MKL_NUM_THREADS": str(limits["threads"]),
        "PYTHONHASHSEED": "0",
        # the allocator the grader times the lesson's structure under (judge/budget.py: MALLOC)
        "GLIBC_TUNABLES": malloc_tunables(),
        # pid 1 is the sandbox's init: ipykernel then neither polls a parent nor prints the
        # "Ctrl-C will not work" banner meant for terminals.
        "JPY_PARENT_PID": "1",
    }
    if package is not None:
        env["PYTHONPATH"] = str(Path(package).parent)
    return env
