"""The jupyter_client kernel manager that starts every autograded notebook's kernel in the sandbox.

- `SandboxKernelManager` starts the `encdec-sandbox` kernelspec (shipped in this folder, so
  nothing is installed into anyone's home) over ZeroMQ `ipc` sockets in a private folder:
  the kernel has no network, so TCP on localhost cannot reach it. The kernel imports the grading
  edition of its `assignment` (autograder/edition.py, built or reused before the start) where
  the package is, never the package itself. The kernelspec names the sandbox's provisioner
  (provisioner.py): the kernel's folders, uid and cgroup, made before it starts and removed after
  it in every outcome. The manager holds the settings (the limits, the assignment, where the
  folders go) and makes the grader's client, `SandboxKernelClient` (below).
- `Zygote` (fork_server.py) is the grader's handle on the fork server (zygote.py) that the
  manager's kernels are forked from.

`SandboxedExecute` (execute.py), nbgrader's execution step, runs notebooks with this manager.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from queue import Empty

import zmq
from jupyter_client import kernelspec, protocol_version_info
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager
from traitlets import Bool, Float, Integer, Type, Unicode, default
from traitlets.config import LoggingConfigurable

from .. import edition
from . import relay
from .fork_server import SOCKET_PATH_MAX, SOCKET_TAIL, Zygote, socket_base  # noqa: F401 (re-exported: fork_server's names)
from .sandbox import Limits, SandboxUnavailable, package_path, privileged

KERNEL_NAME = "encdec-sandbox"
KERNELS_DIR = Path(__file__).resolve().parent / "kernels"


RESEND = 1.0  # seconds without a reply on shell before asking again
IDLE_WAIT = 0.05  # seconds for the idle status after the reply: a kernel publishes it at once, unless
# IOPub was not yet subscribed when it did (then it is lost, and the next request's idle tells)


class SandboxKernelClient(AsyncKernelClient):
    """The grader's kernel client: ready when the kernel has answered, not 0.2 s after.

    jupyter_client's `wait_for_ready` ends by reading IOPub until 0.2 s pass with no message, so
    every kernel start waits 0.2 s for nothing: a sixth of a light notebook's grading. This client is
    ready once the kernel has replied to `kernel_info` and has said it is idle after that request on
    IOPub (which also shows IOPub connected, the reason for jupyter_client's read). A message that
    comes later belongs to no request of ours; nbclient reads only the replies to its own requests.
    """

    async def wait_for_ready(self, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (float("inf") if timeout is None else timeout)
        asked: set[str] = set()
        while True:
            asked.add(self.kernel_info())
            try:
                reply = await self.shell_channel.get_msg(timeout=RESEND)
            except Empty:
                reply = None
            answered = reply is not None and reply["parent_header"].get("msg_id") in asked
            if answered and await self._idle_after(asked, deadline=time.monotonic() + IDLE_WAIT):
                self._adapt(reply)
                return
            if not await self.is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout:g} seconds")

    def _adapt(self, reply: dict) -> None:
        """Speak the kernel's protocol version, as jupyter_client's own wait does with its reply."""
        major = str(reply["content"].get("protocol_version", "")).split(".")[0]
        if major.isdigit() and int(major) != protocol_version_info[0]:
            self.session.adapt_version = int(major)

    async def _idle_after(self, asked: set[str], deadline: float) -> bool:
        """Whether IOPub says idle after one of the requests `asked` before `deadline`."""
        while (left := deadline - time.monotonic()) > 0:
            try:
                msg = await self.iopub_channel.get_msg(timeout=left)
            except Empty:
                return False
            if (
                msg["msg_type"] == "status"
                and msg["parent_header"].get("msg_id") in asked
                and msg["content"].get("execution_state") == "idle"
            ):
                return True
        return False


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

    client_factory = Type(SandboxKernelClient)  # ready without a fixed wait (below)

    def __init__(self, **kwargs):
        kwargs["kernel_name"] = KERNEL_NAME
        super().__init__(**kwargs)
        self.transport = "ipc"

    @default("kernel_spec_manager")
    def _kernel_spec_manager_default(self):
        return kernelspec.KernelSpecManager(kernel_dirs=[str(KERNELS_DIR)], ensure_native_kernel=False)

    @property
    def kernel_dir(self) -> Path | None:
        """The kernel's working folder as the grader reaches it (provisioner.py), None without a kernel."""
        return getattr(self.provisioner, "kernel_dir", None)

    def kernel_cpu_seconds(self) -> float | None:
        """CPU seconds the kernel has used, read outside it (provisioner.py), None without a kernel.
        (Not ``cpu_seconds``: that is the setting of its CPU limit, a field of ``Limits``.)"""
        return self.provisioner.cpu_seconds() if self.provisioner is not None else None

    def message_cut(self) -> dict | None:
        """The message the relay cut, if it cut one (provisioner.py), None without a kernel."""
        return self.provisioner.message_cut() if self.provisioner is not None else None

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

    async def start_kernel(self, **kw):
        """jupyter_client's start. Its provisioner cleans up after a failed preparation or launch; a
        kernel that started but could not be reached (the manager's step after the launch failed) is
        killed and its folders removed here: a failed start leaves nothing behind."""
        try:
            await super().start_kernel(**kw)
        except BaseException:
            try:
                if self.has_kernel:  # killed, not asked to stop: its control channel may be what failed
                    await self.provisioner.kill()
                    await self.provisioner.wait()
            finally:
                await self.cleanup_resources()
            raise

    def client(self, **kwargs):
        """A client whose sockets queue at most `relay.UNREAD` messages unread (RCVHWM: the relay bounds
        the last of them together) and refuse a frame past the message limit (libzmq's MAXMSGSIZE: a
        second line behind the relay, which meters the whole message)."""
        kc = super().client(**kwargs)
        kc.context.setsockopt(zmq.RCVHWM, relay.UNREAD)  # its channels' sockets, made later
        kc.context.setsockopt(zmq.MAXMSGSIZE, self.limits().message_mb << 20)
        return kc


def prestart(config) -> None:
    """Start the fork server a course's kernels use (``config``: the course's), here: an RQ worker
    does, so that each job, run in a fork of the worker, uses it instead of its own."""
    km = SandboxKernelManager(config=config)
    if km.prefork and privileged():
        Zygote.get(edition.DEFAULT_OUT.resolve(), km.temp_dir)
