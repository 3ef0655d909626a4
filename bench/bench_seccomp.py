"""The hand-assembled seccomp program (autograder/sandbox/seccomp.py) against the same policy
compiled by libseccomp, the maintained library (through its ctypes bindings, `pyseccomp`).

For every system call the policy names, and for `clone`/`unshare` with and without
CLONE_NEWUSER, a child process installs one filter and makes the call; the printed table gives
the errno each filter returns, so equal guarantees show as equal columns. It also prints each
program's size. Needs `pip install pyseccomp` (libseccomp2 is on Debian by default); without it,
it says so and exits 0: the sandbox itself does not depend on it (see autograder/README.md).

    python bench/bench_seccomp.py
"""
from __future__ import annotations

import ctypes
import errno
import os
import sys

from autograder.sandbox import seccomp
from autograder.sandbox.policy import Policy

CLONE_THREAD_FLAGS = 0x3D0F00  # what glibc's pthread_create passes to clone: must stay allowed


def libseccomp_program(policy: Policy):
    """The same rules with libseccomp: allow by default, EPERM/ENOSYS lists, clone flags masked."""
    import pyseccomp as sc

    f = sc.SyscallFilter(defaction=sc.ALLOW)
    for name in policy.seccomp_eperm:
        f.add_rule(sc.ERRNO(errno.EPERM), name)
    for name in policy.seccomp_enosys:
        f.add_rule(sc.ERRNO(errno.ENOSYS), name)
    for name in ("clone", "unshare"):
        f.add_rule(sc.ERRNO(errno.EPERM), name,
                   sc.Arg(0, sc.MASKED_EQ, policy.seccomp_clone_flags, policy.seccomp_clone_flags))
    return f


def probe(install, number: int, arg0: int) -> str:
    """errno of syscall(number, arg0, 0, 0...) in a child under the filter `install` applies."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            install()
            libc = ctypes.CDLL(None, use_errno=True)
            if number == seccomp.SYSCALLS[seccomp.machine()]["clone"] and not arg0 & seccomp.CLONE_NEWUSER:
                ret = libc.syscall(number, arg0 | 17, 0, 0, 0, 0)  # SIGCHLD: a child that exits at once
                if ret == 0:
                    os._exit(0)
            else:
                ret = libc.syscall(number, arg0, 0, 0, 0, 0)
            os.write(w, (errno.errorcode.get(ctypes.get_errno(), "?") if ret == -1 else "allowed").encode())
        finally:
            os._exit(0)
    os.close(w)
    out = os.read(r, 100).decode() or "killed"
    os.waitpid(pid, 0)
    os.close(r)
    return out


def main() -> int:
    try:
        import pyseccomp  # noqa: F401
    except ImportError:
        print("pyseccomp is not installed: pip install pyseccomp to compare with libseccomp")
        return 0
    policy = Policy()
    ours = policy.seccomp_program()
    theirs = libseccomp_program(policy)
    table = seccomp.SYSCALLS[seccomp.machine()]
    cases = [(n, 0) for n in (*policy.seccomp_eperm, *policy.seccomp_enosys)]
    cases += [("unshare", seccomp.CLONE_NEWUSER), ("clone", seccomp.CLONE_NEWUSER), ("clone", 0)]
    same = 0
    print(f"{'call':<22}{'no filter':>12}{'hand-built':>14}{'libseccomp':>14}")
    for name, arg0 in cases:
        none = probe(lambda: None, table[name], arg0)
        a = probe(lambda: seccomp.install(ours), table[name], arg0)
        b = probe(theirs.load, table[name], arg0)
        same += a == b
        label = name + (" NEWUSER" if arg0 else "")
        print(f"{label:<22}{none:>12}{a:>14}{b:>14}{'' if a == b else '   DIFFERS'}")
    if seccomp.machine() == "x86_64":  # the x32 table: refused (ours) or the process killed (libseccomp)
        getpid = 39
        a = probe(lambda: seccomp.install(ours), getpid | seccomp.X32_SYSCALL_BIT, 0)
        b = probe(theirs.load, getpid | seccomp.X32_SYSCALL_BIT, 0)
        print(f"{'getpid, x32 table':<22}{'(none)':>12}{a:>14}{b:>14}   (both: the call never runs)")
    import tempfile

    with tempfile.TemporaryFile() as f:
        theirs.export_bpf(f)
        size = f.tell()
    print(f"same errno on {same} of {len(cases)} calls; program size: hand-built {len(ours)} bytes "
          f"({len(ours) // 8} instructions), libseccomp {size} bytes ({size // 8} instructions)")
    return 0 if same == len(cases) else 1


if __name__ == "__main__":
    sys.exit(main())
