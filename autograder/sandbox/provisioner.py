"""The sandbox as a jupyter_client kernel provisioner: the folders, uid and cgroup of one graded kernel.

jupyter_client starts a kernel through the provisioner its kernelspec names (``encdec-sandbox``,
registered under ``jupyter_client.kernel_provisioners`` in pyproject.toml), calling only its public
methods:

- `pre_launch` makes the kernel's folders, before the launch: an empty scratch folder of a fresh
  sandbox uid (no file handed in beside the notebook reaches the kernel: a helper module could run
  what no cell shows), which the sandbox mounts at nbgrader's working folder (`kernel_dir` is where
  the grader reaches it), a socket folder for the kernel and one for the launcher's metering relay
  (relay.py), the kernel's cgroup, and the policy the launcher reads (launch.py);
- `launch_kernel` starts the kernelspec's launcher (forked from the zygote, or a fresh bwrap);
- `kill` waits for the launcher's end, so the manager's first poll finds it gone;
- `cleanup`, in every outcome (a failed launch included): whatever the kernel left running is
  killed, its cgroup removed, its scratch and socket folders removed (safefs.py: nothing the kernel
  wrote is copied back or followed), and its uid given back.

Its settings are the kernel manager's (kernel.py): the limits, the assignment, `temp_dir`, `prefork`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import tempfile
from pathlib import Path

from jupyter_client.provisioning import LocalProvisioner

from .. import edition
from . import mounts, relay, safefs
from .cgroups import Cgroup
from .fork_server import Zygote, _sweep, socket_base
from .policy import SOCK_FILES, Policy
from .processes import end_kernel_processes, tree_cpu_seconds
from .sandbox import (
    UidSlot,
    check_available,
    kernel_cgroup,
    privileged,
    readonly_paths,
    view_listing,
    write_policy,
)


class SandboxProvisioner(LocalProvisioner):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._slot: UidSlot | None = None
        self._cgroup: Cgroup | None = None
        self._sockdir: Path | None = None
        self._workdir: Path | None = None  # nbgrader's working folder: the kernel sees its scratch there
        self._holder: Path | None = None  # root's folder holding the scratch folder
        self._scratch: Path | None = None
        self._mounted: list[Path] = []  # its tmpfs mounts (as root): the scratch and socket folders
        self._relaydir: Path | None = None  # where the grader connects: the launcher's relay (relay.py)

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
        return None if self.process is None else Path(f"/proc/{self.process.pid}/root{self._scratch}")

    def cpu_seconds(self) -> float | None:
        """CPU seconds the kernel has used, read outside it: its cgroup's (every process and thread it
        started), else its launcher's process tree's; None when neither can be read."""
        try:
            used = self._cgroup.cpu_seconds() if self._cgroup is not None else None
        except (OSError, ValueError):
            used = None
        return used if used is not None or self.process is None else tree_cpu_seconds(self.process.pid)

    def message_cut(self) -> dict | None:
        """The message the relay cut, if it cut one (relay.py's record), while the kernel's folders last."""
        return relay.read_cut(self._relaydir)

    async def pre_launch(self, **kw):
        km = self.parent
        overlay = km.grading_edition()
        torch_files = km.torch_edition()
        check_available()
        sockets = socket_base(km.temp_dir)
        _sweep(km.temp_dir or tempfile.gettempdir())
        _sweep(sockets)  # the same folder unless temp_dir is too deep for a socket's address (once each)
        self._workdir = Path(kw.get("cwd") or os.getcwd()).resolve()
        try:
            self._sockdir = Path(tempfile.mkdtemp(prefix=mounts.folder_prefix("k"), dir=sockets))
            self._slot = UidSlot()
            self._prepare(km, overlay, torch_files)
            env = dict(kw.get("env") or os.environ)
            env.pop("JPY_PARENT_PID", None)  # its parent is outside the sandbox's pid namespace
            kw["env"] = env
            return await super().pre_launch(**kw)  # writes the connection file _prepare named
        except BaseException:
            await self.cleanup()
            raise

    async def launch_kernel(self, cmd, **kw):
        try:
            return await super().launch_kernel(cmd, **kw)
        except BaseException:  # a launch that failed after the folders were made leaves nothing behind
            await self.cleanup()
            raise

    async def kill(self, restart: bool = False) -> None:
        """SIGKILL, then wait (1 ms at a time, a second at most) for the launcher's end: the kernel
        manager polls every 0.1 s, and its first poll comes right after the signal."""
        await super().kill(restart=restart)
        for _ in range(1000):
            if self.process is None or self.process.poll() is not None:
                return
            await asyncio.sleep(0.001)

    def _prepare(self, km, overlay: tuple[Path, Path], torch_files: list[tuple[Path, Path]]) -> None:
        uid, gid = self._slot.uid, self._slot.gid
        os.chown(self._sockdir, uid, gid)
        # the kernel's own cgroup (None where there is none to use: rlimits only, warned once)
        self._cgroup = kernel_cgroup(km.limits(), self._slot.slot)
        policy = {
            "uid": uid,
            "gid": gid,
            "workdir": str(self._workdir),
            "readonly": [str(p) for p in readonly_paths()],
            "overlay": [str(p) for p in overlay],
            "torch": [[str(mine), str(installed)] for mine, installed in torch_files],
            "limits": dataclasses.asdict(km.limits()),
            "cgroup": self._cgroup.to_json() if self._cgroup is not None else None,
        }
        scratch_base = km.temp_dir or None
        if not (km.prefork and privileged()):  # a fresh bwrap: its launcher gets the view listed here, once
            policy["listing"] = view_listing(readonly_paths())
        else:  # the zygote builds namespaces as root (unprivileged: no fork server)
            editions = edition.DEFAULT_OUT.resolve()
            zygote = Zygote.get(editions, km.temp_dir, torch_files)
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
        limits = km.limits()
        if privileged():  # the kernel's log, connection file and sockets: a tmpfs too (mounts.py)
            mounts.tmpfs(str(self._sockdir), Policy(limits).sock_mb(), SOCK_FILES, uid, gid, mode=0o700)
            self._mounted.append(self._sockdir)
        policy["sockdir"] = str(self._sockdir)
        # The grader connects to the launcher's metering relay, in a folder of its own (0700) that no
        # sandbox mounts; the kernel binds its sockets in its socket folder (relay.py)
        self._relaydir = Path(tempfile.mkdtemp(prefix=mounts.folder_prefix("r"), dir=socket_base(km.temp_dir)))
        policy["relay"] = str(self._relaydir)
        km.ip = str(self._relaydir / "k")
        km.connection_file = str(self._sockdir / "connection.json")
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

    async def cleanup(self, restart: bool = False) -> None:
        try:
            await super().cleanup(restart=restart)
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
