"""Kernel launcher of the `encdec-sandbox` kernelspec: starts ipykernel inside the sandbox.

Run by jupyter_client (as the grader's user, with the grader's interpreter) as
`python -I -m autograder.sandbox.launch` with the connection file written by
`SandboxKernelManager`: the installed package, and `-I` keeps the working folder (the student's
files) off `sys.path`. The sandbox policy (uid, scratch and working folder, limits) sits next
to the connection file. Two ways to start the kernel, same isolation:

- `bwrap` (default): a fresh sandbox per kernel (`sandbox.bwrap_command`). The launcher stays
  the parent of `bwrap`, which dies with it.
- the zygote (when the policy names one, see `zygote.py`): the kernel is forked from a sandboxed
  process that has imported torch already. The launcher stays connected to it; when the
  launcher dies, the zygote kills the kernel.

Either way the kernel sees its assignment's grading edition (the policy's `overlay`) bound over
the `encdec` package; a policy without one starts no kernel. Either way the kernel runs under
the seccomp filter of `sandbox.Policy` (bwrap `--seccomp`; the zygote gets the program in its
request) and, where the grader made one (the policy's `cgroup`), in its own cgroup before any
of its code runs: on the bwrap path this launcher moves itself in before it starts `bwrap`; on
the zygote path it sends the zygote open `cgroup.procs` files, and the supervisor moves itself
in before it forks the kernel (the zygote cannot see /sys/fs/cgroup).

Either way the grader reaches the kernel only through this launcher's metering relay (relay.py,
`prepare_relay`): the kernel binds its sockets in its socket folder, and a message past the limit
stops this launcher, and so the kernel, before the grader receives it.

Either way killing this process (what jupyter_client does) kills the kernel and everything it
started. Interrupts travel as messages (the kernelspec's `interrupt_mode`), so SIGINT sent to
this process group is ignored here.
"""

import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from autograder.sandbox import cgroups, mounts, relay, safefs, seccomp
from autograder.sandbox.sandbox import (
    Limits,
    Policy,
    SandboxUnavailable,
    bwrap_command,
    kernel_environment,
    privileged,
    read_policy,
)


def _die_with_parent() -> None:
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() == 1:
        sys.exit(70)


def via_zygote(policy: dict, connection_file: str, extra: list[str], log: Path, relay_on) -> int:
    relay_on()
    scratch, sockdir = Path(policy["scratch"]), Path(policy["sockdir"])
    req = {
        "policy": policy,
        "connection_file": connection_file,
        "extra": extra,
        "log": str(log),
        "work_rel": str(scratch.relative_to(policy["stage_root"])),  # bound at policy["workdir"]
        "sock_rel": str(sockdir.relative_to(policy["sockbase"])),
        "edition_rel": str(Path(policy["overlay"][0]).relative_to(policy["editions"])),
        "env": kernel_environment(policy["limits"], sys.prefix),
        "sandbox": Policy(Limits(**policy["limits"])).request(),
    }
    cgroup = policy_cgroup(policy)
    fds = cgroup.open_procs() if cgroup is not None else []
    req["cgroup_fds"] = len(fds)  # the supervisor refuses a request whose descriptors went missing
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(policy["zygote"])
        data = json.dumps(req).encode() + b"\n"
        sent = socket.send_fds(conn, [data], fds) if fds else 0  # they travel with the first bytes
        conn.sendall(data[sent:])
    finally:
        for fd in fds:
            os.close(fd)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # closing the socket stops the kernel
    buf = b""
    while True:
        chunk = conn.recv(4096)
        if not chunk:
            print("encdec sandbox: the zygote went away", file=sys.stderr)
            return 70
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            msg = json.loads(line)
            if "exit" in msg:
                code = int(msg["exit"])
                return code if code >= 0 else 128 - code


def via_bwrap(policy: dict, connection_file: str, extra: list[str], log: Path, relay_on) -> int:
    kernel = [sys.executable, "-m", "ipykernel_launcher", "-f", connection_file, *extra]
    cgroup = policy_cgroup(policy)
    if cgroup is not None:
        cgroup.join()  # this launcher, so prlimit, bwrap and the kernel are born inside
    if not privileged():  # as root the grader mounted the working folder's tmpfs already
        own_working_folder(policy)  # unshares: this launcher must still have one thread
    relay_on()
    fd = seccomp.program_fd(Policy(Limits(**policy["limits"])).seccomp_program())
    cmd = bwrap_command(policy, kernel, fd)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env, pass_fds=[fd])
    os.close(fd)
    signal.signal(signal.SIGTERM, lambda signum, _frame: proc.send_signal(signum))
    code = proc.wait()
    return code if code >= 0 else 128 - code


def own_working_folder(policy: dict) -> None:
    """Without root: an empty tmpfs with the kernel's limits over the grader's (empty) scratch folder,
    in this launcher's own user and mount namespace (mounts.py). bwrap, started from here, binds it
    at nbgrader's working folder; it goes when the sandbox ends."""
    limits = Limits(**policy["limits"])
    mounts.private_namespace(as_root=False)
    mounts.tmpfs(policy["scratch"], limits.work_mb, limits.work_files, os.getuid(), os.getgid())


def policy_cgroup(policy: dict) -> cgroups.Cgroup | None:
    """The cgroup the grader made for this kernel (None: the grader has none to use, and said so)."""
    if not policy.get("cgroup"):
        return None
    cgroup = cgroups.Cgroup.from_json(policy["cgroup"])
    if not cgroup.dirs or any(d.parent.name != cgroups.parent_name() for d in cgroup.dirs):
        raise SandboxUnavailable(f"not a kernel cgroup: {policy['cgroup']}")
    return cgroup


def prepare_relay(policy: dict, connection_file: str):
    """The metering relay between the grader and the kernel (relay.py), listening before the kernel
    starts: the kernel's connection file (its sockets in its socket folder), and the call that starts
    the relay's thread. Each launch path makes that call before the kernel starts, and after its
    last `unshare`: a process of two threads cannot enter a new user namespace (EINVAL), which is
    how the launcher without root makes its working folder's tmpfs. A message cut stops this
    launcher, and so the kernel, on both launch paths."""
    import threading

    sockdir, limits = Path(policy["sockdir"]), Limits(**policy["limits"])
    info = json.loads(Path(connection_file).read_text())  # read before the kernel runs
    kernel_file = relay.kernel_connection(connection_file, sockdir)
    os.chown(kernel_file, policy["uid"], policy.get("gid", policy["uid"]), follow_symlinks=False)
    meter = relay.Relay(info, str(sockdir / "k"), Path(policy["relay"]), relay.Budget.of(limits))

    def serve() -> None:
        cut = meter.run()
        print(
            f"encdec sandbox: the kernel sent the grader more than its limit ({cut.why}: {cut.size} bytes, "
            f"{cut.frames} frames); it was stopped",
            file=sys.stderr,
            flush=True,
        )
        os._exit(RELAY_CUT)

    return str(kernel_file), lambda: threading.Thread(target=serve, daemon=True).start()


RELAY_CUT = 75  # the launcher's exit status when the relay cut a message


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] != "-f":
        print("usage: python -I -m autograder.sandbox.launch -f CONNECTION_FILE [kernel args]", file=sys.stderr)
        return 2
    _die_with_parent()
    signal.signal(signal.SIGINT, lambda *_: None)
    connection_file, extra = argv[1], argv[2:]
    try:
        policy = read_policy(connection_file)
        if not policy.get("overlay"):
            raise SandboxUnavailable("the policy names no grading edition to mount over the package")
        if not policy.get("scratch"):
            raise SandboxUnavailable(
                "the policy names no scratch working folder (the kernel never works in nbgrader's folders)"
            )
        os.chown(connection_file, policy["uid"], policy.get("gid", policy["uid"]), follow_symlinks=False)
        # The kernel's stdout/stderr go to a file of its own (capped by its file-size limit),
        # never to the grader's terminal or log, which other kernels share.
        log = Path(policy["sockdir"]) / "kernel.log"
        log.touch(mode=0o600)
        kernel_file, relay_on = (
            prepare_relay(policy, connection_file) if policy.get("relay") else (connection_file, lambda: None)
        )
        run = via_zygote if policy.get("zygote") else via_bwrap
        code = run(policy, kernel_file, extra, log, relay_on)
    except (SandboxUnavailable, OSError, KeyError, ValueError) as err:
        print(f"encdec sandbox: cannot start the kernel: {err}", file=sys.stderr)
        return 70
    if code not in (0, 137, 143):  # say why a kernel failed (not when it was stopped)
        try:  # the kernel owns its socket folder: the log may be a link (to a secret, /dev/zero) by now
            tail = safefs.read_tail(log, 2000).decode(errors="replace").strip()
        except OSError as err:
            tail = f"(its kernel.log is unreadable: {err.strerror})"
        print(f"encdec sandbox: the kernel exited with status {code}" + (f":\n{tail}" if tail else ""), file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
