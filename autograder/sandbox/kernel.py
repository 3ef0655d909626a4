"""The jupyter_client kernel manager that starts every autograded notebook's kernel in the sandbox.

- `SandboxKernelManager` starts the `encdec-sandbox` kernelspec (shipped in this folder, so
  nothing is installed into anyone's home) over ZeroMQ `ipc` sockets in a private folder:
  the kernel has no network, so TCP on localhost cannot reach it. The kernel imports the grading
  edition of its `assignment` (autograder/edition.py, built or reused before the start) where
  the package is, never the package itself. Before the start it makes an empty scratch folder of
  a fresh sandbox uid (no file handed in beside the notebook reaches the kernel: a helper module
  could run what no cell shows), which the sandbox mounts at nbgrader's working folder
  (`kernel_dir` is where the grader reaches it);
  after the kernel, in every outcome, it removes the scratch and socket folders (safefs.py:
  nothing the kernel wrote is copied back or followed) and gives the uid back.
- `Zygote` (fork_server.py) is the grader's handle on the fork server (zygote.py) that the
  manager's kernels are forked from.

`SandboxedExecute` (execute.py), nbgrader's execution step, runs notebooks with this manager.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from pathlib import Path

import zmq
from jupyter_client import kernelspec
from jupyter_client.manager import AsyncKernelManager
from traitlets import Bool, Float, Integer, Unicode, default
from traitlets.config import LoggingConfigurable

from .. import edition
from . import mounts, relay, safefs
from .cgroups import Cgroup
from .fork_server import SOCKET_PATH_MAX, SOCKET_TAIL, Zygote, _sweep, socket_base  # noqa: F401 (SOCKET_*: re-exported)
from .policy import SOCK_FILES, Policy
from .processes import end_kernel_processes
from .sandbox import (
    Limits,
    SandboxUnavailable,
    UidSlot,
    check_available,
    kernel_cgroup,
    package_path,
    privileged,
    readonly_paths,
    view_listing,
    write_policy,
)

KERNEL_NAME = "encdec-sandbox"
KERNELS_DIR = Path(__file__).resolve().parent / "kernels"


def _limit_settings() -> type:
    """A configurable with one setting per field of `Limits` (its default and help from the field):
    the limits are declared once, in policy.py."""
    traits = {
        f.name: (Float if f.type in (float, "float") else Integer)(f.default, help=f.metadata["help"]).tag(config=True)
        for f in dataclasses.fields(Limits)
    }
    return type("LimitSettings", (LoggingConfigurable,), traits)


class SandboxKernelManager(_limit_settings(), AsyncKernelManager):
    """Starts kernels only through the sandbox's kernelspec, over private `ipc` sockets. Its settings
    include every field of `Limits` (``c.SandboxKernelManager.memory_mb = 6144``, say)."""

    prefork = Bool(
        os.environ.get("ENCDEC_SANDBOX_PREFORK", "1") != "0",
        help="Fork kernels from a zygote that has imported torch already (zygote.py) instead of "
        "starting a fresh bwrap sandbox for each (ENCDEC_SANDBOX_PREFORK=0: a fresh one).",
    ).tag(config=True)
    assignment = Unicode(
        "",
        help="The assignment graded (set by SandboxedExecute): the kernel sees its grading edition "
        "of the package; without one the kernel is not started.",
    )
    temp_dir = Unicode(
        "",
        help="Where the grader makes each kernel's private folders (its scratch working folder and its "
        "socket folder) and the zygote's; default: the system's temporary folder. Socket folders go to "
        "the system's temporary folder instead when this path is too long for a socket's address "
        "(socket_base).",
    ).tag(config=True)

    def __init__(self, **kwargs):
        kwargs["kernel_name"] = KERNEL_NAME
        super().__init__(**kwargs)
        self.transport = "ipc"
        self._slot: UidSlot | None = None
        self._cgroup: Cgroup | None = None
        self._sockdir: Path | None = None
        self._workdir: Path | None = None  # nbgrader's working folder: the kernel sees its scratch there
        self._holder: Path | None = None  # root's folder holding the scratch folder
        self._scratch: Path | None = None
        self._mounted: list[Path] = []  # its tmpfs mounts (as root): the scratch and socket folders
        self._relaydir: Path | None = None  # where the grader connects: the launcher's relay (relay.py)

    @default("kernel_spec_manager")
    def _kernel_spec_manager_default(self):
        return kernelspec.KernelSpecManager(kernel_dirs=[str(KERNELS_DIR)], ensure_native_kernel=False)

    @property
    def kernel_dir(self) -> Path | None:
        """The kernel's working folder as the grader reaches it (None without a kernel): its
        scratch folder, a size- and inode-limited tmpfs (mounts.py); without root, the one the
        launcher mounted in its own namespace, seen through `/proc/<launcher>/root`.

        Inside the sandbox it is mounted at nbgrader's working folder; nothing written there is
        copied back, and it is removed after the kernel.
        """
        if self._scratch is None or privileged():
            return self._scratch
        process = getattr(getattr(self, "provisioner", None), "process", None)  # the launcher, our child
        return None if process is None else Path(f"/proc/{process.pid}/root{self._scratch}")

    def limits(self) -> Limits:
        return Limits(**{f.name: getattr(self, f.name) for f in dataclasses.fields(Limits)})

    def grading_edition(self) -> tuple[Path, Path]:
        """(the edition's `encdec` folder, the package folder it is mounted over), built if stale."""
        if not self.assignment:
            raise SandboxUnavailable(
                "no assignment given to SandboxKernelManager: a graded kernel imports its assignment's "
                "grading edition of encdec (autograder/edition.py), never the package itself, so it is "
                "not started"
            )
        package = package_path()
        try:
            folder = edition.ensure(self.assignment, edition.DEFAULT_OUT, source=package)
        except (edition.EditionError, OSError) as err:
            raise SandboxUnavailable(
                f"no grading edition of encdec for the assignment {self.assignment!r}, so its kernel is not "
                f"started: {err}"
            ) from err
        return folder.resolve(), package

    def torch_edition(self) -> list[tuple[Path, Path]]:
        """(edition file, installed torch file) pairs: torch without its ready-made Transformer
        layers (autograder/torch_edition.py), built if stale."""
        try:
            return edition.torch_files(edition.DEFAULT_OUT)
        except (edition.EditionError, OSError) as err:
            raise SandboxUnavailable(f"no torch edition, so no kernel is started: {err}") from err

    async def _async_pre_start_kernel(self, **kw):
        overlay = self.grading_edition()
        torch_files = self.torch_edition()
        check_available()
        sockets = socket_base(self.temp_dir)
        _sweep(self.temp_dir or tempfile.gettempdir())
        _sweep(sockets)  # the same folder unless temp_dir is too deep for a socket's address (once each)
        self._workdir = Path(kw.get("cwd") or os.getcwd()).resolve()
        try:
            self._sockdir = Path(tempfile.mkdtemp(prefix=mounts.folder_prefix("k"), dir=sockets))
            self._slot = UidSlot()
            self._prepare(overlay, torch_files)
        except BaseException:
            await self._async_cleanup_resources()
            raise
        env = dict(kw.get("env") or os.environ)
        env.pop("JPY_PARENT_PID", None)  # its parent is outside the sandbox's pid namespace
        kw["env"] = env
        return await super()._async_pre_start_kernel(**kw)

    def _prepare(self, overlay: tuple[Path, Path], torch_files: list[tuple[Path, Path]]) -> None:
        uid, gid = self._slot.uid, self._slot.gid
        os.chown(self._sockdir, uid, gid)
        # the kernel's own cgroup (None where there is none to use: rlimits only, warned once)
        self._cgroup = kernel_cgroup(self.limits(), self._slot.slot)
        policy = {
            "uid": uid,
            "gid": gid,
            "workdir": str(self._workdir),
            "readonly": [str(p) for p in readonly_paths()],
            "overlay": [str(p) for p in overlay],
            "torch": [[str(mine), str(installed)] for mine, installed in torch_files],
            "limits": dataclasses.asdict(self.limits()),
            "cgroup": self._cgroup.to_json() if self._cgroup is not None else None,
        }
        scratch_base = self.temp_dir or None
        if not (self.prefork and privileged()):  # a fresh bwrap: its launcher gets the view listed here, once
            policy["listing"] = view_listing(readonly_paths())
        else:  # the zygote builds namespaces as root (unprivileged: no fork server)
            editions = edition.DEFAULT_OUT.resolve()
            zygote = Zygote.get(editions, self.temp_dir, torch_files)
            os.rmdir(self._sockdir)  # still empty: the zygote stages its own socket folders
            self._sockdir = Path(tempfile.mkdtemp(dir=zygote.sockbase))
            os.chown(self._sockdir, uid, gid)
            scratch_base = zygote.workbase  # the zygote stages its scratch area, never nbgrader's folders
            policy.update(
                zygote=str(zygote.control),
                stage_root=str(zygote.workbase),
                sockbase=str(zygote.sockbase),
                editions=str(editions),
            )
        limits = self.limits()
        if privileged():  # the kernel's log, connection file and sockets: a tmpfs too (mounts.py)
            mounts.tmpfs(str(self._sockdir), Policy(limits).sock_mb(), SOCK_FILES, uid, gid, mode=0o700)
            self._mounted.append(self._sockdir)
        policy["sockdir"] = str(self._sockdir)
        # The grader connects to the launcher's metering relay, in a folder of its own (0700) that no
        # sandbox mounts; the kernel binds its sockets in its socket folder (relay.py)
        self._relaydir = Path(tempfile.mkdtemp(prefix=mounts.folder_prefix("r"), dir=socket_base(self.temp_dir)))
        policy["relay"] = str(self._relaydir)
        self.ip = str(self._relaydir / "k")
        self.connection_file = str(self._sockdir / "connection.json")
        # The kernel's working folder: an empty scratch folder, in a folder of root's (0700), bound at
        # nbgrader's working folder inside the sandbox. Nothing handed in is copied there (the cells
        # come over ZeroMQ: what runs is the notebook), and nothing of it is ever copied back. As
        # root it is a tmpfs mounted here; without root the launcher mounts one over it.
        self._holder = Path(tempfile.mkdtemp(prefix=mounts.folder_prefix("w"), dir=scratch_base))
        self._scratch = self._holder / "work"
        self._scratch.mkdir()
        if privileged():
            mounts.tmpfs(str(self._scratch), limits.work_mb, limits.work_files, uid, gid)
            self._mounted.append(self._scratch)
        policy["scratch"] = str(self._scratch)
        write_policy(self._sockdir, policy)

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        try:
            await super()._async_cleanup_resources(restart=restart)
        finally:  # whatever the kernel left running is killed, and its cgroup goes, in every outcome
            try:
                if self._cgroup is not None:
                    cgroup, self._cgroup = self._cgroup, None
                    if not cgroup.close():
                        self.log.warning("sandbox cgroup %s: not all of it could be killed and removed", cgroup.dirs)
            finally:
                self._release()

    def _release(self) -> None:
        """After the kernel, in every outcome: no process of its uid left, its scratch and socket
        folders removed (safefs: the kernel could write there), its uid slot given back."""
        slot, holder, sockdir, workdir = self._slot, self._holder, self._sockdir, self._workdir
        relaydir, self._relaydir = self._relaydir, None
        mounted, self._mounted = self._mounted, []
        self._slot = self._holder = self._scratch = self._sockdir = None
        try:
            if slot is not None:
                end_kernel_processes(slot.uid, workdir)
            for mount in mounted:  # all it wrote there goes at once: nothing to walk
                try:
                    mounts.umount(str(mount))
                except OSError as err:
                    self.log.warning("sandbox: could not unmount %s: %r", mount, err)
            for folder in (holder, sockdir, relaydir):
                if folder is None:
                    continue
                try:
                    safefs.remove_tree(folder)
                except Exception as err:
                    self.log.warning("sandbox: could not remove %s: %r", folder, err)
        finally:
            if slot is not None:
                slot.release()

    def message_cut(self) -> dict | None:
        """The message the relay cut, if it cut one (relay.py's record), while the kernel's folders last."""
        return relay.read_cut(self._relaydir)

    def client(self, **kwargs):
        """A client whose sockets queue at most `relay.UNREAD` messages unread (RCVHWM: the relay bounds
        the last of them together) and refuse a frame past the message limit (libzmq's MAXMSGSIZE: a
        second line behind the relay, which meters the whole message)."""
        kc = super().client(**kwargs)
        kc.context.setsockopt(zmq.RCVHWM, relay.UNREAD)  # its channels' sockets, made later
        kc.context.setsockopt(zmq.MAXMSGSIZE, self.limits().message_mb << 20)
        return kc

    async def _async_start_kernel(self, **kw):
        try:
            await super()._async_start_kernel(**kw)
        except BaseException:
            # a launch that failed after the folders were made leaves nothing behind
            try:
                if self.has_kernel:
                    await self._async_kill_kernel()
            finally:
                await self._async_cleanup_resources()
            raise

    # AsyncKernelManager exposes the coroutines under the public names; keep ours there too.
    start_kernel = _async_start_kernel
    pre_start_kernel = _async_pre_start_kernel
    cleanup_resources = _async_cleanup_resources


def prestart(config) -> None:
    """Start the fork server a course's kernels use (``config``: the course's), here: an RQ worker
    does, so that each job, run in a fork of the worker, uses it instead of its own."""
    km = SandboxKernelManager(config=config)
    if km.prefork and privileged():
        Zygote.get(edition.DEFAULT_OUT.resolve(), km.temp_dir)
