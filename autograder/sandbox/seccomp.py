"""The seccomp filter of a sandboxed kernel: the system calls it must not make, refused.

A classic BPF program (`struct sock_filter[]`, see seccomp(2)) assembled here with `struct`, no
dependency, for this machine's architecture (x86_64 or aarch64). It

- kills a process that calls in through another architecture's table (a 32-bit `int 0x80`
  would otherwise reach the same calls under other numbers), and refuses the x32 table;
- refuses with EPERM: the keyring (`add_key`, `request_key`, `keyctl`: a uid's keyring outlives
  its kernel), io_uring, mounting, `setns`, `ptrace` and `process_vm_*`, modules and `kexec`,
  `bpf`, `perf_event_open`, `userfaultfd`; `unshare` and `clone` with CLONE_NEWUSER (a user
  namespace would hand the kernel every capability inside it);
- refuses `clone3` with ENOSYS: its flags sit in memory a filter cannot read, and glibc then
  falls back to `clone`, whose flags it can (threads start as before).

Both launch paths install the same program: `bwrap --seccomp FD` (the launcher hands it over a
pipe, see `program_fd`) and the zygote's kernel process (`prctl(PR_SET_SECCOMP)` after
no_new_privs, the bytes in its request). The deny-list itself is part of the sandbox's `Policy`.
"""
from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct

# Classic BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h).
BPF_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
BPF_JEQ_K, BPF_JGE_K, BPF_JSET_K = 0x15, 0x35, 0x45  # BPF_JMP | op | BPF_K
BPF_RET_K = 0x06
RET_KILL_PROCESS, RET_ERRNO, RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
OFF_NR, OFF_ARCH, OFF_ARG0 = 0, 4, 16  # struct seccomp_data; args are u64, low half first (LE)
X32_SYSCALL_BIT = 0x40000000
CLONE_NEWUSER = 0x10000000
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2

# name -> number, per architecture (arch/x86/entry/syscalls/syscall_64.tbl; asm-generic/unistd.h)
_COMMON = {"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428,
           "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
           "clone3": 435, "mount_setattr": 442}
SYSCALLS = {
    "x86_64": dict(_COMMON, add_key=248, request_key=249, keyctl=250, unshare=272, clone=56, mount=165,
                   umount2=166, pivot_root=155, ptrace=101, process_vm_readv=310, process_vm_writev=311,
                   kexec_load=246, kexec_file_load=320, init_module=175, finit_module=313,
                   delete_module=176, bpf=321, perf_event_open=298, userfaultfd=323, setns=308),
    "aarch64": dict(_COMMON, add_key=217, request_key=218, keyctl=219, unshare=97, clone=220, mount=40,
                    umount2=39, pivot_root=41, ptrace=117, process_vm_readv=270, process_vm_writev=271,
                    kexec_load=104, kexec_file_load=294, init_module=105, finit_module=273,
                    delete_module=106, bpf=280, perf_event_open=241, userfaultfd=282, setns=268),
}
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}


def machine() -> str:
    arch = platform.machine()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(arch.lower(), arch)


def _stmt(code: int, k: int) -> tuple:
    return (code, 0, 0, k)


def assemble(eperm: tuple[str, ...], enosys: tuple[str, ...], clone_flags: int,
             arch: str | None = None) -> bytes:
    """The filter as bytes (8 per instruction): `eperm` and `enosys` refused with that errno,
    `clone` and `unshare` refused with EPERM when their flags hold any of `clone_flags`."""
    arch = arch or machine()
    if arch not in SYSCALLS:
        raise OSError(errno.ENOSYS, f"no seccomp syscall table for {arch}")
    table = SYSCALLS[arch]
    flagged = [n for n in ("clone", "unshare") if clone_flags and n not in eperm]
    # Instructions with symbolic jump targets ("allow", "eperm", "enosys", "kill", "flags"),
    # resolved to forward offsets below: classic BPF only jumps forward.
    prog: list[tuple] = [(BPF_LD_W_ABS, 0, 0, OFF_ARCH),
                         (BPF_JEQ_K, None, "kill", AUDIT_ARCH[arch]),
                         (BPF_LD_W_ABS, 0, 0, OFF_NR)]
    if arch == "x86_64":
        prog.append((BPF_JGE_K, "enosys", None, X32_SYSCALL_BIT))
    prog += [(BPF_JEQ_K, "eperm", None, table[name]) for name in eperm]
    prog += [(BPF_JEQ_K, "enosys", None, table[name]) for name in enosys]
    prog += [(BPF_JEQ_K, "flags", None, table[name]) for name in flagged]
    labels = {"allow": len(prog)}
    prog.append(_stmt(BPF_RET_K, RET_ALLOW))
    if flagged:
        labels["flags"] = len(prog)
        prog += [(BPF_LD_W_ABS, 0, 0, OFF_ARG0), (BPF_JSET_K, "eperm", None, clone_flags),
                 _stmt(BPF_RET_K, RET_ALLOW)]
    for label, ret in [("eperm", RET_ERRNO | errno.EPERM), ("enosys", RET_ERRNO | errno.ENOSYS),
                       ("kill", RET_KILL_PROCESS)]:
        labels[label] = len(prog)
        prog.append(_stmt(BPF_RET_K, ret))
    out = b""
    for at, (code, jt, jf, k) in enumerate(prog):
        # None: fall through to the next instruction; a label: the offset to it
        jt, jf = (0 if j is None else labels[j] - at - 1 if isinstance(j, str) else j for j in (jt, jf))
        if not (0 <= jt < 256 and 0 <= jf < 256):
            raise ValueError("seccomp program too long for classic BPF jumps")
        out += struct.pack("=HBBI", code, jt, jf, k)
    return out


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

    The zygote repeats these lines (it imports only the standard library).
    """
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buf))
    for args in [(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0),
                 (PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0)]:
        if libc.prctl(*args) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"seccomp: {os.strerror(err)}")
