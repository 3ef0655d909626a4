"""The shipped seccomp program (libseccomp's, autograder/sandbox/seccomp.py) against the policy's
intent (autograder/sandbox/policy.py), call by call.

For every system call the policy names, for `clone`/`unshare` with and without CLONE_NEWUSER,
and for a call through the x32 table (x86_64), a child process installs the exported bytes the
way the kernels get them (`seccomp.install`, as the zygote does; bwrap loads the same bytes) and
makes the call. The table gives what the call did without a filter, under the program, and what
the policy says it must do; the last line counts the agreements and gives the program's size
and the time to build it.

    python bench/bench_seccomp.py
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
import time

from autograder.sandbox import seccomp
from autograder.sandbox.policy import Policy

SIGCHLD = 17  # clone as a fork: a child that exits at once


def probe(program: bytes | None, number: int, arg0: int) -> str:
    """What syscall(number, arg0, 0...) does in a child under `program`: 'allowed', an errno's
    name, or 'killed' (the child ended before it could say)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            if program is not None:
                seccomp.install(program)
            libc = ctypes.CDLL(None, use_errno=True)
            ctypes.set_errno(0)
            is_clone = number == seccomp.syscall_number("clone")
            ret = libc.syscall(number, arg0 | (SIGCHLD if is_clone else 0), 0, 0, 0, 0)
            if ret == 0 and is_clone:
                os._exit(0)  # the new child
            os.write(w, (errno.errorcode.get(ctypes.get_errno(), "?") if ret == -1 else "allowed").encode())
        finally:
            os._exit(0)
    os.close(w)
    out = os.read(r, 100).decode() or "killed"
    os.waitpid(pid, 0)
    os.close(r)
    return out


def intent(policy: Policy) -> list[tuple[str, int, int, str]]:
    """(label, number, arg0, what the policy says must happen), from the policy's fields."""
    nr = seccomp.syscall_number
    cases = [(name, nr(name), 0, "EPERM") for name in policy.seccomp_eperm]
    cases += [(name, nr(name), 0, "ENOSYS") for name in policy.seccomp_enosys]
    flags = policy.seccomp_clone_flags
    cases += [(f"{name} NEWUSER", nr(name), flags, "EPERM") for name in ("unshare", "clone")]
    cases += [("clone (a plain fork)", nr("clone"), 0, "allowed")]
    if seccomp.machine() == "x86_64":  # another table: the process ends (seccomp.py says why)
        cases += [("getpid, x32 table", nr("getpid") | 0x40000000, 0, "killed")]
    return cases


def main() -> int:
    policy = Policy()
    start = time.perf_counter()
    program = policy.seccomp_program()  # the first build loads libseccomp too
    built_ms = (time.perf_counter() - start) * 1000
    seccomp.assemble.cache_clear()
    start = time.perf_counter()
    policy.seccomp_program()
    again_ms = (time.perf_counter() - start) * 1000
    cases = intent(policy)
    same = 0
    print(f"{'call':<22}{'no filter':>12}{'shipped':>10}{'policy':>10}")
    for label, number, arg0, expected in cases:
        none = probe(None, number, arg0)
        got = probe(program, number, arg0)
        same += got == expected
        print(f"{label:<22}{none:>12}{got:>10}{expected:>10}{'' if got == expected else '   DIFFERS'}")
    print(
        f"as the policy says on {same} of {len(cases)} calls; program: {len(program)} bytes "
        f"({len(program) // 8} instructions), built in {again_ms:.1f} ms ({built_ms:.1f} ms the first "
        "time in a process, loading libseccomp)"
    )
    return 0 if same == len(cases) else 1


if __name__ == "__main__":
    sys.exit(main())
