"""The grader's kernel client: ready when the kernel has answered, not 0.2 s after.

jupyter_client's `wait_for_ready` ends by reading IOPub until 0.2 s pass with no message, so every
kernel start waits 0.2 s for nothing: a sixth of a light notebook's grading. This client is ready
once the kernel has replied to `kernel_info` and has said it is idle after that request on IOPub
(which also shows IOPub connected, the reason for jupyter_client's read). A message that comes later
belongs to no request of ours; nbclient reads only the replies to its own requests.
"""

from __future__ import annotations

import time
from queue import Empty

from jupyter_client import protocol_version_info
from jupyter_client.asynchronous import AsyncKernelClient

RESEND = 1.0  # seconds without a reply on shell before asking again
IDLE_WAIT = 0.05  # seconds for the idle status after the reply: a kernel publishes it at once, unless
# IOPub was not yet subscribed when it did (then it is lost, and the next request's idle tells)


class SandboxKernelClient(AsyncKernelClient):
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
