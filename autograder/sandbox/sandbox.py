"""The sandbox policy: which paths a submission's kernel sees, under which uid and limits.

A kernel runs as

    (launcher joins the kernel's cgroup) prlimit <limits> -- bwrap <namespaces> <mounts> --seccomp FD
        -- setpriv <uid X> python -m ipykernel_launcher

`bwrap` starts as root (it needs no user namespace then), builds a private mount, pid, network,
IPC, UTS and cgroup namespace, installs the seccomp filter (seccomp.py), and `setpriv` drops to
an unprivileged uid X with no capabilities before the kernel starts.

Without root (the unprivileged mode, `privileged()` is False) the same policy runs as

    (launcher joins a delegated cgroup, if any) bwrap --unshare-user <namespaces> <mounts> --seccomp FD
        -- prlimit <limits> -- python -m ipykernel_launcher

bubblewrap as a plain user builds the same namespaces inside a new user namespace, with no
capabilities; the kernel keeps the grader's uid. The rlimits are set inside the user namespace,
where the kernel (6.x) counts `RLIMIT_NPROC` for the processes of that namespace alone, so one
kernel's fork bomb does not use up another's processes. `UNPRIVILEGED` is what is lost; it is
printed once when grading starts. Everything the kernel
starts shares one cgroup (cgroups.py): memory, processes and CPU are capped for all of them
together; the rlimits stay as a second layer. What the sandbox is (namespaces, system mounts,
limits, the seccomp deny-list) is one `Policy`, from which both this command and the zygote's
kernels (zygote.py) are derived.

The uid matters: Linux does not enforce `RLIMIT_NPROC` for root (not even root inside a user
namespace), so a fork bomb is only contained under a real non-root uid. Each running kernel
gets its own uid from a small range, held by a lock file, so one student's fork bomb cannot use
up the process budget of another student's kernel running beside it. Slots rotate (a counter
under the lock folder), so two kernels in a row never share a uid.

Inside, the kernel sees, read-only: of the system and the Python installation only the interpreter,
its standard library, the allowed distributions and the shared libraries they need
(kernel_site.py); where the `encdec` package is, its assignment's grading edition
(autograder/edition.py: the package without the exercise's targets, read-only, so `import encdec`
works and cannot reach the answers); over torch's files that define its ready-made Transformer
layers, their edition without them (autograder/torch_edition.py); its own working folder (read-write, mounted at nbgrader's working folder's path, and empty: the
kernel gets its cells over ZeroMQ and no file handed in beside the notebook, so what runs is what
the notebook's cells say; a size- and inode-limited tmpfs, mounts.py), a private `/tmp`
(size-limited tmpfs) and the folder of its ZeroMQ `ipc` sockets (as root, a limited tmpfs too). Nothing else: not the package itself, not `solutions/`, not `autograder/`
(reference material, gradebook, nbgrader's own copy of the submission and the notebook being
executed), not `build/` (the other assignments' editions), not other students' folders, not
the home folder. No network at all (its loopback is its own). Nothing the kernel writes is
copied back: its folders are unmounted and removed after it (`end_kernel_processes` first).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from . import SandboxUnavailable, cgroups, mounts, safefs, seccomp
from .policy import Limits, Policy, kernel_environment
from .uids import UID_BASE, UID_SLOTS, UidSlot, privileged  # noqa: F401 (the sandbox's names)

__all__ = [
    "Limits",
    "Policy",
    "SandboxUnavailable",
    "UidSlot",
    "bwrap_command",
    "check_available",
    "kernel_environment",
    "privileged",
    "zygote_command",
]

# Uids handed to sandboxed kernels: unlikely to belong to anyone on a normal machine.
POLICY_FILE = "sandbox.json"  # written next to the connection file by the kernel manager


# The one line the unprivileged mode prints when grading starts: what it cannot guarantee.
UNPRIVILEGED = (
    "grading sandbox: unprivileged mode (not root): kernels run in a user namespace under the "
    "grader's own uid, so there is no separate uid per kernel (an escape from the namespaces would "
    "act as the grader's user; the kernel keyring is closed by seccomp alone) and no fork server "
    "(a fresh sandbox per kernel, about 1.5 s more per notebook); its socket folder is a folder "
    "on the host, limited per file only (its working folder is a limited tmpfs as with root){cgroup}"
)


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
        raise SandboxUnavailable(
            f"the package `encdec` spans several folders ({locations}); the grading edition replaces one"
        )
    return Path(locations[0]).resolve()


def readonly_paths() -> list[Path]:
    """The folders a kernel sees whole: the standard library's and the `encdec` package folder (the
    rest of its view is file by file, kernel_site.py)."""
    from . import kernel_site  # here: a launcher on the fork server's path needs none of it (its imports)

    paths = {*kernel_site.stdlib(), package_path()}
    # Drop paths already inside another one.
    return sorted(p for p in paths if not any(q != p and q in p.parents for q in paths))


def view_listing(readonly: list[Path]) -> dict:
    """What of the machine a kernel sees beside its whole trees (kernel_site.py): each emptied folder of
    packages with the entries bound back, and the system's files. It depends on the machine and the
    allowed distributions only: the grader lists it once and hands it to each launcher in the policy
    (`listing`), where listing it again would cost a fresh launcher 0.3 to 0.8 s (bench_kernel_site.py)."""
    from . import kernel_site

    inside = _tools()["setpriv" if privileged() else "prlimit"]  # the tool that runs inside the sandbox
    sites = kernel_site.sites(tuple(readonly), tuple(readonly))
    return {"sites": {str(k): [str(p) for p in v] for k, v in sites.items()}, "files": kernel_site.files((inside,))}


def _view(
    policy: Policy, readonly: list[Path], extra: list[Path], listing: dict | None = None
) -> list[tuple[str, ...]]:
    """The rows of the view shared by kernels and the zygote (`Policy.mounts`, kernel_site.py)."""
    listing = listing or view_listing(readonly)
    sites = {Path(k): [Path(p) for p in v] for k, v in listing["sites"].items()}
    return policy.mounts(readonly, extra, sites, listing["files"])


def _system_mounts(rows: list[tuple[str, ...]], policy: Policy) -> list[str]:
    """bwrap arguments of the view's ``rows``, one option per row."""
    cmd: list[str] = []
    for kind, *paths in rows:
        if kind == "tmpfs":
            cmd += ["--perms", "1777", "--size", str(policy.limits.tmp_mb * 1024 * 1024), "--tmpfs", *paths]
        elif kind == "empty":
            cmd += ["--perms", "0755", "--size", str(1024 * 1024), "--tmpfs", *paths]
        elif kind == "dir":
            cmd += ["--perms", "0755", "--dir", *paths]
        else:  # ro-bind, symlink, proc, dev: bwrap's option of the same name
            cmd += [f"--{kind}", *paths]
    return cmd


def _torch_mounts(pairs) -> list[str]:
    """bwrap arguments that bind the torch edition (autograder/torch_edition.py: torch's files
    without its ready-made Transformer layers) read-only over the installed files."""
    cmd: list[str] = []
    for mine, installed in pairs:
        cmd += ["--ro-bind", str(mine), str(installed)]
    return cmd


def zygote_command(stage_root: Path, sockbase: Path, control: Path, editions: Path, torch_files: list) -> list[str]:
    """The fork server (zygote.py): root in its own namespaces, staging the folders it serves.

    ``editions`` (autograder/edition.py's output folder) is staged read-only: each kernel gets its
    own assignment's edition bound over the package, then the staging mount is detached.
    ``torch_files`` (edition file, installed torch file) are bound over torch here, before the
    zygote imports torch: its kernels inherit both the mounts and the modules imported through them.
    """
    if not torch_files:
        raise SandboxUnavailable("no torch edition to mount: the fork server would serve torch's ready-made layers")
    tools = _tools()
    policy = Policy()
    readonly = readonly_paths()
    here, opt = Path(__file__).parent, "/opt/encdec-sandbox"  # the script and the module it loads
    cmd = [
        tools["bwrap"],
        *policy.bwrap_namespaces(),
        "--die-with-parent",
        "--new-session",
        "--cap-add",
        "ALL",
        "--clearenv",
    ]
    for key, value in kernel_environment(dataclasses.asdict(policy.limits), sys.prefix, package_path()).items():
        cmd += ["--setenv", key, value]
    rows = _view(policy, readonly, [sockbase])
    cmd += _system_mounts(rows, policy)
    cmd += _torch_mounts(torch_files)  # after the venv's own bind: they win
    cmd += [
        "--bind",
        str(sockbase),
        str(sockbase),
        "--bind",
        str(stage_root),
        "/staging/work",
        "--bind",
        str(sockbase),
        "/staging/sock",
        "--ro-bind",
        str(editions),
        "/staging/editions",
        *(arg for name in ("zygote.py", "mounts.py") for arg in ("--ro-bind", str(here / name), f"{opt}/{name}")),
        "--chdir",
        "/",
        "--",
        sys.executable,
        f"{opt}/zygote.py",
        str(control),
        json.dumps(sorted({row[-1] for row in rows if row[0] in ("ro-bind", "symlink", "empty")})),
    ]
    return cmd


def bwrap_command(policy: dict, kernel_argv: list[str], seccomp_fd: int) -> list[str]:
    """The full command line that starts `kernel_argv` inside the sandbox described by `policy`.

    `policy` holds `uid`, `workdir`, `sockdir`, `readonly` (list of paths) and `limits` (the
    rest of the sandbox is `Policy`); a kernel's policy also holds `overlay`, [grading edition,
    package folder]: the edition is bound read-only over the package (launch.py refuses a kernel
    without it), and `torch`, [[edition file, installed torch file], ...]: torch's files without
    its ready-made Transformer layers, bound over the installed ones (no kernel without them). `seccomp_fd` holds `Policy.seccomp_program()` (`seccomp.program_fd`): the caller
    passes it on to bwrap (`pass_fds`).
    """
    tools = _tools()
    rules = Policy(Limits(**policy["limits"]))
    uid, gid = int(policy["uid"]), int(policy.get("gid", policy["uid"]))
    workdir = Path(policy["workdir"])
    sockdir = Path(policy["sockdir"])
    readonly = [Path(p) for p in policy["readonly"]]

    limits = [tools["prlimit"], *(f"--{name}={value}" for name, value in rules.rlimits()), "--"]
    if privileged():  # limits first, then bwrap as root, then down to the kernel's own uid
        cmd, inner = (
            [*limits, tools["bwrap"]],
            [
                tools["setpriv"],
                f"--reuid={uid}",
                f"--regid={gid}",
                "--clear-groups",
                "--no-new-privs",
                "--bounding-set=-all",
                "--inh-caps=-all",
                "--",
            ],
        )
    else:  # a user namespace; the limits inside it (RLIMIT_NPROC then counts this kernel alone)
        cmd, inner = [tools["bwrap"], "--unshare-user", "--cap-drop", "ALL"], limits
    cmd += [*rules.bwrap_namespaces(), "--die-with-parent", "--new-session", "--clearenv", "--seccomp", str(seccomp_fd)]
    package = policy["overlay"][1] if policy.get("overlay") else package_path()
    env = kernel_environment(dataclasses.asdict(rules.limits), sys.prefix, package)
    for key, value in env.items():
        cmd += ["--setenv", key, value]
    cmd += _system_mounts(_view(rules, readonly, [workdir, sockdir], policy.get("listing")), rules)
    if policy.get("overlay"):
        edition, package = policy["overlay"]
        cmd += ["--ro-bind", str(edition), str(package)]  # after the package's own bind: it wins
        if not policy.get("torch"):
            raise SandboxUnavailable("the policy names no torch edition to mount (autograder/torch_edition.py)")
        cmd += _torch_mounts(policy["torch"])
    # The kernel works in its own empty scratch folder, seen at nbgrader's working folder.
    scratch = Path(policy.get("scratch") or workdir)
    cmd += ["--bind", str(scratch), str(workdir), "--bind", str(sockdir), str(sockdir)]
    if not privileged():  # the skeleton bwrap made (/root, the course's parents) is the kernel's own uid's
        cmd += ["--remount-ro", "/"]
    cmd += ["--chdir", str(workdir), "--", *inner]
    return cmd + kernel_argv


_checked: bool = False


def check_available() -> None:
    """Start a trivial sandbox once per process; raise `SandboxUnavailable` if it cannot."""
    global _checked  # noqa: PLW0603 (the trial sandbox is once per process)
    if _checked:
        return
    with tempfile.TemporaryDirectory(prefix="encdec-sbcheck-") as tmp:
        slot = UidSlot()
        try:
            work, sock = Path(tmp) / "work", Path(tmp) / "sock"
            work.mkdir()
            sock.mkdir()
            policy = {
                "uid": slot.uid,
                "gid": slot.gid,
                "workdir": str(work),
                "sockdir": str(sock),
                "readonly": [str(p) for p in readonly_paths()],
                "limits": dataclasses.asdict(Limits()),
            }
            # prints the uid and the seccomp mode (2: a filter is in force)
            probe = (
                "import encdec, os; print(os.getuid(), [l.split()[1] for l in open('/proc/self/status') "
                "if l.startswith('Seccomp:')][0])"
            )
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
            f"(exit {proc.returncode}): {proc.stderr.strip()[-500:]}. "
            + ("" if privileged() else "Without root it needs user namespaces (see README: grading without root). ")
            + "Refusing to run student "
            "code unconfined."
        )
    hierarchy = cgroups.probe(**Policy().cgroup_limits())  # warns once if kernels get rlimits only
    if not privileged():
        cgroup = (
            ""
            if hierarchy is not None
            else (
                ", and no per-kernel cgroup (none delegated to this user: `python -m autograder.sandbox.cgroups "
                "delegate USER`, run once as root)"
            )
        )
        print(UNPRIVILEGED.format(cgroup=cgroup), file=sys.stderr, flush=True)
    else:  # the kernel folders' tmpfs mounts that killed graders left behind
        for top in mounts.sweep_stale():
            try:
                safefs.remove_tree(top)
            except OSError:
                pass
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
            "autograder.sandbox.kernel.SandboxKernelManager (the execution step of autograder/sandbox/execute.py)"
        )
    return json.loads(path.read_text())
