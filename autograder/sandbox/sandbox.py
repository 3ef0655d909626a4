"""The sandbox policy: which paths a submission's kernel sees, under which uid and limits.

A kernel runs as

    (launcher joins the kernel's cgroup) prlimit <limits> -- bwrap <namespaces> <mounts> --seccomp FD
        -- setpriv <uid X> python -m ipykernel_launcher

`bwrap` starts as root (it needs no user namespace then), builds a private mount, pid, network,
IPC, UTS and cgroup namespace, installs the seccomp filter (seccomp.py), and `setpriv` drops to
an unprivileged uid X with no capabilities before the kernel starts. Everything the kernel
starts shares one cgroup (cgroups.py): memory, processes and CPU are capped for all of them
together; the rlimits stay as a second layer. What the sandbox is (namespaces, system mounts,
limits, the seccomp deny-list) is one `Policy`, from which both this command and the zygote's
kernels (zygote.py) are derived.

The uid matters: Linux does not enforce `RLIMIT_NPROC` for root (not even root inside a user
namespace), so a fork bomb is only contained under a real non-root uid. Each running kernel
gets its own uid from a small range, held by a lock file, so one student's fork bomb cannot use
up the process budget of another student's kernel running beside it. Slots rotate (a counter
under the lock folder), so two kernels in a row never share a uid.

Inside, the kernel sees: the system (`/usr`, `/etc`), the Python installation and the virtual
environment (read-only); where the `encdec` package is, its assignment's grading edition
(autograder/edition.py: the package without the exercise's targets, read-only, so `import encdec`
works and cannot reach the answers); its own working folder (read-write: a scratch copy of
the regular files of nbgrader's working folder, without notebooks, mounted at that folder's
path; `prepare_workdir`), a private `/tmp` (size-limited tmpfs) and the folder of its ZeroMQ
`ipc` sockets. Nothing else: not the package itself, not `solutions/`, not `autograder/`
(reference material, gradebook, nbgrader's own copy of the submission and the notebook being
executed), not `build/` (the other assignments' editions), not other students' folders, not
the home folder. No network at all (its loopback is its own). Nothing the kernel writes is
copied back: its scratch folder is removed after it (`reclaim_workdir`, with safefs.py).
"""
from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import cgroups, safefs, seccomp

# Uids handed to sandboxed kernels: unlikely to belong to anyone on a normal machine.
UID_BASE = 2_000_000
UID_SLOTS = 256
POLICY_FILE = "sandbox.json"  # written next to the connection file by the kernel manager


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot start here; grading must stop rather than run unconfined."""


@dataclasses.dataclass
class Limits:
    """Resource limits of one kernel: per process (rlimits, see `prlimit(1)`) and for all its
    processes together (its cgroup, see cgroups.py)."""

    # address space of each process (RLIMIT_AS: `import torch` alone maps ~1.5 GB), and memory of
    # the whole kernel (its cgroup: memfds, shared memory, /tmp and children included)
    memory_mb: int = 4096
    cpu_seconds: int = 600  # CPU time of each process (RLIMIT_CPU), then SIGKILL
    nproc: int = 64  # processes + threads of the sandbox uid (RLIMIT_NPROC) and of the cgroup (pids.max)
    fsize_mb: int = 64  # largest file it may write (RLIMIT_FSIZE)
    nofile: int = 256  # open file descriptors
    tmp_mb: int = 256  # size of the private /tmp (a tmpfs counts against RAM, not RLIMIT_AS)
    threads: int = 1  # OMP/MKL threads: workers run side by side, one core each
    cpus: float = 1.0  # CPU quota of the whole kernel (cgroup): four spinning children share one CPU


# bwrap's option for each namespace a kernel gets (a mount namespace it always gets); the zygote
# has the same names mapped to CLONE_NEW* flags.
BWRAP_NAMESPACES = {"pid": "--unshare-pid", "net": "--unshare-net", "ipc": "--unshare-ipc",
                    "uts": "--unshare-uts", "cgroup": "--unshare-cgroup-try"}


@dataclasses.dataclass(frozen=True)
class Policy:
    """What the sandbox of a kernel is, as data; `bwrap_command`, `zygote_command` and the zygote's
    kernels (zygote.py, which receives `request()`) are all derived from it. Per kernel come only
    its uid, working and socket folders and grading edition (the dict in sandbox.json)."""

    limits: Limits = dataclasses.field(default_factory=Limits)
    namespaces: tuple[str, ...] = ("pid", "net", "ipc", "uts", "cgroup")  # unshared (and a mount namespace)
    hostname: str = "sandbox"
    # read-only, as on the host: a top-level link stays a link, a missing folder is skipped
    system: tuple[str, ...] = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
    tmp: str = "/tmp"  # a private tmpfs of limits.tmp_mb, mode 1777
    seccomp_eperm: tuple[str, ...] = (  # refused with EPERM (seccomp.py says why)
        "add_key", "request_key", "keyctl", "io_uring_setup", "io_uring_enter", "io_uring_register",
        "mount", "umount2", "pivot_root", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount",
        "fspick", "mount_setattr", "setns", "ptrace", "process_vm_readv", "process_vm_writev",
        "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "bpf",
        "perf_event_open", "userfaultfd")
    seccomp_enosys: tuple[str, ...] = ("clone3",)  # glibc falls back to clone, whose flags the filter sees
    seccomp_clone_flags: int = seccomp.CLONE_NEWUSER  # clone and unshare with any of these: EPERM

    def rlimits(self) -> list[tuple[str, int]]:
        """(name, value) per process: `prlimit --<name>` and `resource.RLIMIT_<NAME>`."""
        mb, lim = 1024 * 1024, self.limits
        return [("as", lim.memory_mb * mb), ("cpu", lim.cpu_seconds), ("nproc", lim.nproc),
                ("fsize", lim.fsize_mb * mb), ("nofile", lim.nofile), ("core", 0)]

    def cgroup_limits(self) -> dict:
        """The limits of the kernel's cgroup, for all its processes together (cgroups.create)."""
        return {"memory_bytes": self.limits.memory_mb * 1024 * 1024, "pids": self.limits.nproc,
                "cpus": self.limits.cpus}

    def seccomp_program(self) -> bytes:
        return seccomp.assemble(self.seccomp_eperm, self.seccomp_enosys, self.seccomp_clone_flags)

    def mounts(self, readonly: list[Path], extra: list[Path]) -> list[tuple[str, ...]]:
        """The system view of a kernel, as rows (kind, path...): the read-only system, its own
        /proc, /dev and /tmp, the parents that `readonly` and `extra` paths need, `readonly`."""
        rows: list[tuple[str, ...]] = []
        bound = []
        for top in map(Path, self.system):
            if top.is_symlink():
                rows.append(("symlink", os.readlink(top), str(top)))
            elif top.is_dir():
                rows.append(("ro-bind", str(top), str(top)))
                bound.append(top)
        rows += [("proc", "/proc"), ("dev", "/dev"), ("tmpfs", self.tmp)]
        for parent in _ancestors_to_create(readonly + extra, bound, [Path(self.tmp)]):
            rows.append(("dir", str(parent)))
        rows += [("ro-bind", str(p), str(p)) for p in readonly]
        return rows

    def bwrap_namespaces(self) -> list[str]:
        return [BWRAP_NAMESPACES[ns] for ns in self.namespaces] + ["--hostname", self.hostname]

    def request(self) -> dict:
        """The plain data the zygote applies to each kernel (it imports only the standard library)."""
        return {"namespaces": list(self.namespaces), "hostname": self.hostname, "tmp": self.tmp,
                "tmp_mb": self.limits.tmp_mb, "rlimits": self.rlimits(),
                "seccomp": self.seccomp_program().hex()}

    def table(self) -> str:
        """The policy as the markdown table in README.md (a test keeps the two equal)."""
        lim = self.limits
        shown = {"as": f"{lim.memory_mb} MiB", "fsize": f"{lim.fsize_mb} MiB", "cpu": f"{lim.cpu_seconds} s"}
        flags = self.seccomp_clone_flags
        flags = "CLONE_NEWUSER" if flags == seccomp.CLONE_NEWUSER else f"flags {flags:#x}"
        rows = [
            ("namespaces", ", ".join(self.namespaces) + f" and mount; hostname `{self.hostname}`"),
            ("system, read-only", ", ".join(f"`{p}`" for p in self.system) + " (a link stays a link)"),
            (f"`{self.tmp}`", f"private tmpfs of {lim.tmp_mb} MiB"),
            ("rlimits, each process", ", ".join(f"{n} {shown.get(n, v)}" for n, v in self.rlimits())),
            ("cgroup, all processes together", f"memory {lim.memory_mb} MiB (memfds, shared memory, `/tmp` and "
                                               f"children included), {lim.nproc} processes and threads, "
                                               f"{lim.cpus:g} CPU"),
            ("seccomp: EPERM", ", ".join(f"`{n}`" for n in self.seccomp_eperm)
             + f"; `clone` and `unshare` with {flags}"),
            ("seccomp: ENOSYS", ", ".join(f"`{n}`" for n in self.seccomp_enosys) + " (glibc falls back to `clone`)"),
        ]
        return "\n".join(["| `sandbox.Policy()` | |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows)])


def _tools() -> dict[str, str]:
    found = {name: shutil.which(name) for name in ("bwrap", "prlimit", "setpriv")}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        raise SandboxUnavailable(
            f"the grading sandbox needs {', '.join(missing)} on PATH (Debian packages "
            "bubblewrap and util-linux; `make system` installs them). Refusing to run "
            "student code unconfined."
        )
    return found  # type: ignore[return-value]


def package_path() -> Path:
    """Where `import encdec` resolves (found, not imported): the grading edition is mounted there."""
    import importlib.util

    spec = importlib.util.find_spec("encdec")
    if spec is None or not spec.submodule_search_locations:
        raise SandboxUnavailable("the package `encdec` is not importable by the grader")
    locations = list(spec.submodule_search_locations)
    if len(locations) != 1:
        raise SandboxUnavailable(f"the package `encdec` spans several folders ({locations}); the grading "
                                 "edition replaces one")
    return Path(locations[0]).resolve()


def readonly_paths() -> list[Path]:
    """What the kernel must read: Python, the virtual environment and the `encdec` package folder."""
    paths = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), package_path()}
    # Drop paths already inside another one (a venv inside the repo, say).
    return sorted(p for p in paths if not any(q != p and q in p.parents for q in paths))


class UidSlot:
    """An exclusive uid for one kernel, held by an advisory lock while the kernel lives.

    Slots rotate through the range: a counter file in the lock folder, advanced under its own
    lock, names the next slot to try, so the kernel after this one (of any grader on the
    machine) gets another uid, and whatever a uid leaves behind in the kernel (its keyring,
    which seccomp forbids too) is not found by the next student.
    """

    def __init__(self, lock_dir: Path | None = None) -> None:
        lock_dir = lock_dir or Path(tempfile.gettempdir()) / "encdec-sandbox-uids"
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
                self.fd, self.slot, self.uid = fd, slot, UID_BASE + slot
                return
        finally:
            os.close(counter)  # and its lock
        raise SandboxUnavailable(f"all {UID_SLOTS} sandbox uids are in use")

    def release(self) -> None:
        if getattr(self, "fd", None) is not None:
            os.close(self.fd)
            self.fd = None


def _ancestors_to_create(paths: list[Path], bound: list[Path], empty: list[Path]) -> list[Path]:
    """Parent folders that the sandbox's root lacks (created 0755, see bwrap --dir).

    ``bound`` trees are mounted whole, so nothing below them is missing; ``empty`` mounts (the
    private /tmp) exist themselves but hold nothing, so a repository checked out under /tmp
    needs its parents made there, traversable by the kernel's uid.
    """
    out: list[Path] = []
    for p in paths:
        for parent in reversed(p.parents):
            if parent == Path("/") or parent in out or parent in empty:
                continue
            if any(parent == q or q in parent.parents for q in bound):
                continue
            out.append(parent)
    return out


def kernel_environment(limits: dict, prefix: str) -> dict[str, str]:
    """The whole environment of a sandboxed kernel (nothing is inherited from the grader)."""
    return {
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
        # pid 1 is the sandbox's init: ipykernel then neither polls a parent nor prints the
        # "Ctrl-C will not work" banner meant for terminals.
        "JPY_PARENT_PID": "1",
    }


def _system_mounts(policy: Policy, readonly: list[Path], extra: list[Path]) -> list[str]:
    """bwrap arguments shared by kernels and the zygote: `policy.mounts`, one option per row."""
    cmd: list[str] = []
    for kind, *paths in policy.mounts(readonly, extra):
        if kind == "tmpfs":
            cmd += ["--perms", "1777", "--size", str(policy.limits.tmp_mb * 1024 * 1024), "--tmpfs", *paths]
        elif kind == "dir":
            cmd += ["--perms", "0755", "--dir", *paths]
        else:  # ro-bind, symlink, proc, dev: bwrap's option of the same name
            cmd += [f"--{kind}", *paths]
    return cmd


def zygote_command(stage_root: Path, sockbase: Path, control: Path, editions: Path) -> list[str]:
    """The fork server (zygote.py): root in its own namespaces, staging the folders it serves.

    ``editions`` (autograder/edition.py's output folder) is staged read-only: each kernel gets its
    own assignment's edition bound over the package, then the staging mount is detached.
    """
    tools = _tools()
    policy = Policy()
    readonly = readonly_paths()
    script = Path(__file__).with_name("zygote.py")
    cmd = [tools["bwrap"], *policy.bwrap_namespaces(), "--die-with-parent", "--new-session",
           "--cap-add", "ALL", "--clearenv"]
    for key, value in kernel_environment(dataclasses.asdict(policy.limits), sys.prefix).items():
        cmd += ["--setenv", key, value]
    cmd += _system_mounts(policy, readonly, [sockbase])
    cmd += ["--bind", str(sockbase), str(sockbase),
            "--bind", str(stage_root), "/staging/work", "--bind", str(sockbase), "/staging/sock",
            "--ro-bind", str(editions), "/staging/editions",
            "--ro-bind", str(script), "/opt/encdec-zygote.py", "--chdir", "/",
            "--", sys.executable, "/opt/encdec-zygote.py", str(control)]
    return cmd


def bwrap_command(policy: dict, kernel_argv: list[str], seccomp_fd: int) -> list[str]:
    """The full command line that starts `kernel_argv` inside the sandbox described by `policy`.

    `policy` holds `uid`, `workdir`, `sockdir`, `readonly` (list of paths) and `limits` (the
    rest of the sandbox is `Policy`); a kernel's policy also holds `overlay`, [grading edition,
    package folder]: the edition is bound read-only over the package (launch.py refuses a kernel
    without it). `seccomp_fd` holds `Policy.seccomp_program()` (`seccomp.program_fd`): the caller
    passes it on to bwrap (`pass_fds`).
    """
    tools = _tools()
    rules = Policy(Limits(**policy["limits"]))
    uid = int(policy["uid"])
    workdir = Path(policy["workdir"])
    sockdir = Path(policy["sockdir"])
    readonly = [Path(p) for p in policy["readonly"]]

    cmd = [tools["prlimit"], *(f"--{name}={value}" for name, value in rules.rlimits()), "--", tools["bwrap"]]
    cmd += [*rules.bwrap_namespaces(), "--die-with-parent", "--new-session", "--clearenv",
            "--seccomp", str(seccomp_fd)]
    env = kernel_environment(dataclasses.asdict(rules.limits), sys.prefix)
    for key, value in env.items():
        cmd += ["--setenv", key, value]
    cmd += _system_mounts(rules, readonly, [workdir, sockdir])
    if policy.get("overlay"):
        edition, package = policy["overlay"]
        cmd += ["--ro-bind", str(edition), str(package)]  # after the package's own bind: it wins
    # The kernel works in its scratch copy (prepare_workdir), seen at nbgrader's working folder.
    scratch = Path(policy.get("scratch") or workdir)
    cmd += ["--bind", str(scratch), str(workdir), "--bind", str(sockdir), str(sockdir)]
    cmd += ["--chdir", str(workdir), "--",
            tools["setpriv"], f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
            "--no-new-privs", "--bounding-set=-all", "--inh-caps=-all", "--"]
    return cmd + kernel_argv


def prepare_workdir(source: Path, scratch: Path, uid: int, max_files: int, max_mb: int) -> None:
    """The kernel's working folder: a new folder ``scratch`` (whose parent is the grader's own)
    holding a copy of the regular files of nbgrader's working folder ``source``, owned by ``uid``.

    No notebook is copied (the kernel gets its cells over ZeroMQ; the notebook nbgrader executes
    holds the hidden tests), no link, FIFO or device; at most ``max_files`` files and ``max_mb``
    MiB (`SandboxUnavailable` beyond: the kernel is not started).
    """
    def skip(name: str) -> bool:
        return name.endswith(".ipynb") or name == ".ipynb_checkpoints"

    try:
        safefs.copy_tree(source, scratch, owner=uid, skip=skip, max_files=max_files, max_bytes=max_mb * 2**20)
    except safefs.TreeTooLarge as err:
        raise SandboxUnavailable(f"the submission's folder {source} is too large to hand to its kernel "
                                 f"({err.strerror}); it is not graded") from err


def reclaim_workdir(holder: Path, uid: int, wait_s: float = 5.0) -> None:
    """After the kernel: make sure no process of its uid is left, then remove ``holder`` (the
    parent of its scratch folder) with everything the kernel left in it. Nothing is copied back."""
    deadline = time.monotonic() + wait_s
    while True:
        alive = _pids_of_uid(uid)
        if not alive:
            break
        if time.monotonic() > deadline:
            for pid in alive:
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass
        time.sleep(0.05)
    safefs.remove_tree(holder)


def _pids_of_uid(uid: int) -> list[int]:
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    pids.append(int(entry.name))
            except FileNotFoundError:
                pass
    return pids


_checked: bool = False


def check_available() -> None:
    """Start a trivial sandbox once per process; raise `SandboxUnavailable` if it cannot."""
    global _checked
    if _checked:
        return
    if os.geteuid() != 0:
        raise SandboxUnavailable(
            "the grading sandbox drops each kernel to its own unprivileged uid and therefore "
            "runs as root (the grader's user); run the grader as root, e.g. in the course's "
            "grading container. Refusing to run student code unconfined."
        )
    with tempfile.TemporaryDirectory(prefix="encdec-sbcheck-") as tmp:
        slot = UidSlot()
        try:
            work, sock = Path(tmp) / "work", Path(tmp) / "sock"
            work.mkdir()
            sock.mkdir()
            policy = {"uid": slot.uid, "workdir": str(work), "sockdir": str(sock),
                      "readonly": [str(p) for p in readonly_paths()],
                      "limits": dataclasses.asdict(Limits())}
            # prints the uid and the seccomp mode (2: a filter is in force)
            probe = ("import encdec, os; print(os.getuid(), [l.split()[1] for l in open('/proc/self/status') "
                     "if l.startswith('Seccomp:')][0])")
            fd = seccomp.program_fd(Policy().seccomp_program())
            try:
                cmd = bwrap_command(policy, [sys.executable, "-c", probe], fd)
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, pass_fds=[fd])
            finally:
                os.close(fd)
        finally:
            slot.release()
    if proc.returncode != 0 or proc.stdout.strip() != f"{slot.uid} 2":
        raise SandboxUnavailable(
            "the grading sandbox (bubblewrap) failed to start a test process "
            f"(exit {proc.returncode}): {proc.stderr.strip()[-500:]}. Refusing to run student "
            "code unconfined."
        )
    cgroups.probe(**Policy().cgroup_limits())  # warns once if kernels get rlimits only
    _checked = True


def kernel_cgroup(limits: Limits, slot: int) -> cgroups.Cgroup | None:
    """A new cgroup with the kernel's limits, or None where there is no cgroup to use (warned once)."""
    rules = Policy(limits).cgroup_limits()
    hierarchy = cgroups.probe(**rules)
    return None if hierarchy is None else cgroups.create(hierarchy, slot, **rules)


def write_policy(sockdir: Path, policy: dict) -> None:
    (sockdir / POLICY_FILE).write_text(json.dumps(policy))


def read_policy(connection_file: str) -> dict:
    path = Path(connection_file).parent / POLICY_FILE
    if not path.is_file():
        raise SandboxUnavailable(
            f"no sandbox policy next to {connection_file}: this kernel must be started by "
            "autograder.sandbox.kernel.SandboxKernelManager (see autograder/sandbox/nbgrader_sandbox.py)"
        )
    return json.loads(path.read_text())
