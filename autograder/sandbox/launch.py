"""Kernel launcher of the `encdec-sandbox` kernelspec: starts ipykernel inside the sandbox.

Run by jupyter_client (as the grader's user) with the connection file written by
`SandboxKernelManager`; the sandbox policy (uid, working folder, limits) sits next to it. The
launcher stays the parent of `bwrap` (which dies with it), so killing the kernel process that
jupyter_client knows kills the whole sandbox. Interrupts travel as messages (the kernelspec's
`interrupt_mode`), so SIGINT sent to this process group is ignored here.
"""
import os
import signal
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from autograder.sandbox.sandbox import SandboxUnavailable, bwrap_command, read_policy  # noqa: E402


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] != "-f":
        print("usage: launch.py -f CONNECTION_FILE [kernel args]", file=sys.stderr)
        return 2
    connection_file, extra = argv[1], argv[2:]
    try:
        policy = read_policy(connection_file)
        os.chown(connection_file, policy["uid"], policy["uid"])
        kernel = [sys.executable, "-m", "ipykernel_launcher", "-f", connection_file, *extra]
        cmd = bwrap_command(policy, kernel)
    except (SandboxUnavailable, OSError, KeyError, ValueError) as err:
        print(f"encdec sandbox: cannot start the kernel: {err}", file=sys.stderr)
        return 70
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, env=env)

    def forward(signum, _frame):
        proc.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, lambda *_: None)
    code = proc.wait()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
