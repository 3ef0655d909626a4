"""The sandbox policy: which paths a submission's kernel sees, under which uid and limits.

A kernel runs as

    prlimit <limits> -- bwrap <namespaces> <mounts> -- setpriv <uid X> python -m ipykernel_launcher

`bwrap` starts as root (it needs no user namespace then), builds a private mount, pid, network,
IPC and UTS namespace, and `setpriv` drops to an unprivileged uid X with no capabilities before
the kernel starts. The uid matters: Linux does not enforce `RLIMIT_NPROC` for root (not even
root inside a user namespace), so a fork bomb is only contained under a real non-root uid. Each
running kernel gets its own uid from a small range, held by a lock file, so one student's fork
bomb cannot use up the process budget of another student's kernel running beside it.

Inside, the kernel sees: the system (`/usr`, `/etc`), the Python installation and the virtual
environment (read-only); where the `encdec` package is, its assignment's grading edition
(autograder/edition.py: the package without the exercise's targets, read-only, so `import encdec`
works and cannot reach the answers); its own working folder (read-write, except the notebook
files, which are bound read-only), a private `/tmp` (size-limited tmpfs) and the folder of its
ZeroMQ `ipc` sockets. Nothing else: not the package itself, not `solutions/`, not `autograder/`
(reference material, gradebook), not `build/` (the other assignments' editions), not other
students' folders, not the home folder. No network at all (its loopback is its own).
"""
from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Uids handed to sandboxed kernels: unlikely to belong to anyone on a normal machine.
UID_BASE = 2_000_000
UID_SLOTS = 256
POLICY_FILE = "sandbox.json"  # written next to the connection file by the kernel manager


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot start here; grading must stop rather than run unconfined."""


@dataclasses.dataclass
class Limits:
    """Resource limits of one kernel (all enforced by the kernel, see `prlimit(1)`)."""

    memory_mb: int = 4096  # address space (RLIMIT_AS): `import torch` alone maps ~1.5 GB
    cpu_seconds: int = 600  # CPU time of each process (RLIMIT_CPU), then SIGKILL
    nproc: int = 64  # processes + threads of the sandbox uid (RLIMIT_NPROC)
    fsize_mb: int = 64  # largest file it may write (RLIMIT_FSIZE)
    nofile: int = 256  # open file descriptors
    tmp_mb: int = 256  # size of the private /tmp (a tmpfs counts against RAM, not RLIMIT_AS)
    threads: int = 1  # OMP/MKL threads: workers run side by side, one core each

    def prlimit_args(self) -> list[str]:
        mb = 1024 * 1024
        return [
            f"--as={self.memory_mb * mb}",
            f"--cpu={self.cpu_seconds}",
            f"--nproc={self.nproc}",
            f"--fsize={self.fsize_mb * mb}",
            f"--nofile={self.nofile}",
            "--core=0",
        ]


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
    """An exclusive uid for one kernel, held by an advisory lock while the kernel lives."""

    def __init__(self) -> None:
        lock_dir = Path(tempfile.gettempdir()) / "encdec-sandbox-uids"
        lock_dir.mkdir(mode=0o700, exist_ok=True)
        start = os.getpid() % UID_SLOTS
        for k in range(UID_SLOTS):
            slot = (start + k) % UID_SLOTS
            fd = os.open(lock_dir / f"{slot}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self.fd, self.uid = fd, UID_BASE + slot
            return
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


def _system_mounts(limits: Limits, readonly: list[Path], extra: list[Path]) -> list[str]:
    """bwrap arguments shared by kernels and the zygote: the read-only system, /proc, /dev, /tmp."""
    cmd = ["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        top = Path("/") / name
        if top.is_symlink():
            cmd += ["--symlink", os.readlink(top), str(top)]
        elif top.is_dir():
            cmd += ["--ro-bind", str(top), str(top)]
    cmd += ["--proc", "/proc", "--dev", "/dev"]
    cmd += ["--perms", "1777", "--size", str(limits.tmp_mb * 1024 * 1024), "--tmpfs", "/tmp"]
    for parent in _ancestors_to_create(readonly + extra, [Path("/usr"), Path("/etc")], [Path("/tmp")]):
        cmd += ["--perms", "0755", "--dir", str(parent)]
    for p in readonly:
        cmd += ["--ro-bind", str(p), str(p)]
    return cmd


def zygote_command(stage_root: Path, sockbase: Path, control: Path, editions: Path) -> list[str]:
    """The fork server (zygote.py): root in its own namespaces, staging the folders it serves.

    ``editions`` (autograder/edition.py's output folder) is staged read-only: each kernel gets its
    own assignment's edition bound over the package, then the staging mount is detached.
    """
    tools = _tools()
    limits = Limits()
    readonly = readonly_paths()
    script = Path(__file__).with_name("zygote.py")
    cmd = [tools["bwrap"], "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
           "--unshare-cgroup-try", "--die-with-parent", "--new-session", "--cap-add", "ALL",
           "--hostname", "sandbox", "--clearenv"]
    for key, value in kernel_environment(dataclasses.asdict(limits), sys.prefix).items():
        cmd += ["--setenv", key, value]
    cmd += _system_mounts(limits, readonly, [sockbase])
    cmd += ["--bind", str(sockbase), str(sockbase),
            "--bind", str(stage_root), "/staging/work", "--bind", str(sockbase), "/staging/sock",
            "--ro-bind", str(editions), "/staging/editions",
            "--ro-bind", str(script), "/opt/encdec-zygote.py", "--chdir", "/",
            "--", sys.executable, "/opt/encdec-zygote.py", str(control)]
    return cmd


def bwrap_command(policy: dict, kernel_argv: list[str]) -> list[str]:
    """The full command line that starts `kernel_argv` inside the sandbox described by `policy`.

    `policy` holds `uid`, `workdir`, `sockdir`, `readonly` (list of paths) and `limits`; a
    kernel's policy also holds `overlay`, [grading edition, package folder]: the edition is bound
    read-only over the package (launch.py refuses a kernel without it).
    """
    tools = _tools()
    limits = Limits(**policy["limits"])
    uid = int(policy["uid"])
    workdir = Path(policy["workdir"])
    sockdir = Path(policy["sockdir"])
    readonly = [Path(p) for p in policy["readonly"]]

    cmd = [tools["prlimit"], *limits.prlimit_args(), "--", tools["bwrap"]]
    cmd += ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--die-with-parent", "--new-session",
            "--hostname", "sandbox", "--clearenv"]
    env = kernel_environment(dataclasses.asdict(limits), sys.prefix)
    for key, value in env.items():
        cmd += ["--setenv", key, value]
    cmd += _system_mounts(limits, readonly, [workdir, sockdir])
    if policy.get("overlay"):
        edition, package = policy["overlay"]
        cmd += ["--ro-bind", str(edition), str(package)]  # after the package's own bind: it wins
    cmd += ["--bind", str(workdir), str(workdir), "--bind", str(sockdir), str(sockdir)]
    # Notebook files of the working folder stay read-only (they cannot be replaced by links
    # that the grader would later write through); everything else there is the kernel's.
    for nb in sorted(workdir.glob("*.ipynb")):
        if nb.is_file() and not nb.is_symlink():
            cmd += ["--ro-bind", str(nb), str(nb)]
    cmd += ["--chdir", str(workdir), "--",
            tools["setpriv"], f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
            "--no-new-privs", "--bounding-set=-all", "--inh-caps=-all", "--"]
    return cmd + kernel_argv


def prepare_workdir(workdir: Path, uid: int) -> None:
    """Hand the working folder (not its notebooks) to the sandbox uid before the kernel starts."""
    os.chown(workdir, uid, uid)
    for root, dirs, files in os.walk(workdir, followlinks=False):
        for name in dirs + files:
            path = Path(root) / name
            if path.is_symlink():
                path.unlink()
            elif not (path.suffix == ".ipynb" and path.parent == workdir):
                os.chown(path, uid, uid)


def reclaim_workdir(workdir: Path, uid: int, wait_s: float = 5.0) -> list[str]:
    """After the kernel: make sure no sandbox process is left, then take the folder back.

    Removes whatever the grader (running as root) must never write through or read blindly:
    symbolic links, FIFOs, sockets, device nodes, and files with several hard links. Returns
    the relative paths removed.
    """
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
    removed: list[str] = []
    if not workdir.is_dir() or workdir.is_symlink():
        return removed
    for root, dirs, files in os.walk(workdir, topdown=True, followlinks=False):
        for name in dirs + files:
            path = Path(root) / name
            st = os.lstat(path)
            bad = stat.S_ISLNK(st.st_mode) or not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode))
            bad = bad or (stat.S_ISREG(st.st_mode) and st.st_nlink > 1)
            if bad:
                path.unlink()
                removed.append(str(path.relative_to(workdir)))
                continue
            os.lchown(path, 0, 0)
            os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o022)
        dirs[:] = [d for d in dirs if (Path(root) / d).is_dir() and not (Path(root) / d).is_symlink()]
    os.chown(workdir, 0, 0)
    os.chmod(workdir, 0o755)
    return removed


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
            cmd = bwrap_command(policy, [sys.executable, "-c", "import encdec, os; print(os.getuid())"])
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        finally:
            slot.release()
    if proc.returncode != 0 or proc.stdout.strip() != str(slot.uid):
        raise SandboxUnavailable(
            "the grading sandbox (bubblewrap) failed to start a test process "
            f"(exit {proc.returncode}): {proc.stderr.strip()[-500:]}. Refusing to run student "
            "code unconfined."
        )
    _checked = True


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
