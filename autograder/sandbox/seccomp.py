"""The seccomp filter of a sandboxed kernel: the system calls it must not make, refused.

The deny-list of the sandbox's `Policy` compiled by libseccomp (Debian's `libseccomp2`, through
its ctypes bindings `pyseccomp`, pinned in requirements.txt) into a classic BPF program
(`struct sock_filter[]`, see seccomp(2)) for this machine's architecture. The program

- refuses with EPERM: the keyring (`add_key`, `request_key`, `keyctl`: a uid's keyring outlives
  its kernel), io_uring, mounting, `setns`, `ptrace` and `process_vm_*`, modules and `kexec`,
  `bpf`, `perf_event_open`, `userfaultfd`; `unshare` and `clone` with CLONE_NEWUSER (a user
  namespace would hand the kernel every capability inside it);
- refuses `clone3` with ENOSYS: its flags sit in memory a filter cannot read, and glibc then
  falls back to `clone`, whose flags it can (threads start as before);
- kills the process that calls in through any other table: another architecture's (a 32-bit
  `int 0x80` reaches the same calls under other numbers) and, on x86_64, the x32 table (the same
  calls with bit 30 set). The policy speaks of the native table only; nothing a notebook runs
  calls through another (glibc never does, and many kernels are built without x32), so such a
  call is an attempt to get around the filter and ends the kernel. Killed, not refused with an
  errno: one rule for every foreign table, nothing for hostile code to probe, and it is where
  libseccomp puts them (its "bad architecture" action; its default, SCMP_ACT_KILL, kills the
  thread only, so the process is asked for explicitly).

libseccomp is needed by the grader only: both launch paths install the bytes it exports,
`bwrap --seccomp FD` (the launcher hands them over a pipe, see `program_fd`) and the zygote's
kernel process (`prctl(PR_SET_SECCOMP)` after no_new_privs, the bytes in its request; the zygote
imports only the standard library). Where libseccomp is missing, `assemble` raises
`SandboxUnavailable`: grading stops, it never runs a kernel unconfined.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
import tempfile

from . import SandboxUnavailable

CLONE_NEWUSER = 0x10000000
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
# where the policy was checked: `clone` takes its flags as the first argument (not so on s390)
ARCHES = ("x86_64", "aarch64")


def machine() -> str:
    arch = platform.machine()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(arch.lower(), arch)


def _libseccomp():
    """The pyseccomp module, or `SandboxUnavailable` saying what to install."""
    try:
        import pyseccomp
    except (ImportError, OSError, RuntimeError) as err:  # no bindings, or no libseccomp.so.2
        raise SandboxUnavailable(
            f"seccomp: libseccomp cannot be loaded ({err}). Install Debian's libseccomp2 and the "
            "pinned bindings (pip install -r requirements.txt -c constraints.txt). Refusing to run "
            "student code unconfined."
        ) from None
    return pyseccomp


def syscall_number(name: str, arch: str | None = None) -> int:
    """The number of system call `name` in `arch`'s table (this machine's by default)."""
    sc = _libseccomp()
    number = sc.resolve_syscall(getattr(sc.Arch, (arch or machine()).upper()), name)
    if number < 0:  # libseccomp: unknown name, or a call this architecture does not have
        raise KeyError(f"seccomp: no system call {name!r} on {arch or machine()}")
    return number


@functools.lru_cache(maxsize=8)
def assemble(eperm: tuple[str, ...], enosys: tuple[str, ...], clone_flags: int, arch: str | None = None) -> bytes:
    """The filter as bytes (8 per instruction): `eperm` and `enosys` refused with that errno,
    `clone` and `unshare` refused with EPERM when their flags hold any of `clone_flags`."""
    arch = arch or machine()
    if arch not in ARCHES:
        raise OSError(errno.ENOSYS, f"seccomp: the policy is not checked on {arch}")
    sc = _libseccomp()
    rules = [(errno.EPERM, name) for name in eperm] + [(errno.ENOSYS, name) for name in enosys]
    for _, name in rules:
        syscall_number(name, arch)  # an unknown name is an error, never a rule left out
    f = sc.SyscallFilter(defaction=sc.ALLOW)
    f.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)
    if arch != machine():  # a program for another machine (exported, never loaded here)
        f.add_arch(getattr(sc.Arch, arch.upper()))
        f.remove_arch(sc.Arch.NATIVE)
    for err, name in rules:
        f.add_rule(sc.ERRNO(err), name)
    for name in ("clone", "unshare"):
        if clone_flags and name not in eperm:
            f.add_rule(sc.ERRNO(errno.EPERM), name, sc.Arg(0, sc.MASKED_EQ, clone_flags, clone_flags))
    with tempfile.TemporaryFile() as out:
        f.export_bpf(out)
        out.seek(0)
        return out.read()


def program_fd(program: bytes) -> int:
    """A file descriptor to read `program` from (for `bwrap --seccomp FD`), inheritable."""
    read, write = os.pipe()
    try:
        if len(program) > 65536:
            raise ValueError("seccomp program larger than a pipe's buffer")
        os.write(write, program)
    finally:
        os.close(write)
    os.set_inheritable(read, True)
    return read


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install(program: bytes) -> None:
    """Apply `program` to the calling thread and everything it starts from now on (irreversible).

    The zygote repeats these lines (it imports only the standard library); the tests and
    bench/bench_seccomp.py install the exported bytes this way, as the kernels get them.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buf))
    for args in [(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), (PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0)]:
        if libc.prctl(*args) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"seccomp: {os.strerror(err)}")
