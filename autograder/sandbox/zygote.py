"""A fork server for sandboxed kernels: `import torch` once per grader, not once per notebook.

Starting a kernel and importing torch costs about as much as grading a notebook. The zygote is
a process that has imported ipykernel, torch and numpy and then only forks; it never runs
student code. It does not import `encdec`: a forked kernel would inherit the real package in
`sys.modules`, answers included. It runs inside `bwrap` as root (so it may build namespaces),
with its own pid and network namespace, the same read-only system view as a kernel, and three
staging mounts: its scratch area (where the grader makes each kernel's working folder, a copy
of nbgrader's; never nbgrader's own folders), its socket folder and, read-only, the grading
editions of every assignment (autograder/edition.py). `sandbox.zygote_command` starts it. For each
kernel it forks a supervisor that, still as root:

0. moves itself into the kernel's cgroup, through the `cgroup.procs` files the launcher opened
   and sent along with the request (the zygote sees no /sys/fs/cgroup), so that everything
   forked from now on is counted there (cgroups.py);
1. unshares what the request's `sandbox` (the grader's `Policy`, as plain data) names: a new
   mount, network, IPC, UTS, cgroup and pid namespace (each kernel has its own empty loopback;
   everything it starts dies with it);
2. mounts a fresh, size-limited `/tmp`, binds its assignment's grading edition read-only over
   the `encdec` package, the kernel's own scratch working folder (at the path of nbgrader's
   working folder) and socket folder from the staging mounts, then detaches the staging mounts, so no other student's
   folder and no other assignment's edition (which holds other exercises' answers) is reachable;
3. forks pid 1 of the new pid namespace (a reaper that mounts `/proc`), which forks the kernel:
   it sets the resource limits, drops to the kernel's own uid (no capabilities, no_new_privs),
   installs the seccomp filter (seccomp.py), closes every inherited descriptor, resets its
   environment and starts ipykernel in-process, where the imports already are;
4. stays connected to the kernelspec's launcher: when the launcher goes away (jupyter_client
   killed it), it kills pid 1 and with it the namespace; when the kernel ends, it tells the
   launcher the exit status.

This file is run as a script inside the sandbox and imports only the standard library.
"""

import ctypes
import importlib.util
import json
import os
import resource
import select
import signal
import socket
import stat
import sys
import threading

PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 24, 22, 2
STAGE_WORK, STAGE_SOCK, STAGE_EDITIONS = "/staging/work", "/staging/sock", "/staging/editions"


def _sibling(name):
    """A module of this folder, loaded by path (this file runs as a script, in the sandbox too)."""
    spec = importlib.util.spec_from_file_location(
        f"encdec_sandbox_{name}", os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


mounts = _sibling("mounts")  # standard library only
VIEW = []  # the places of the kernel's view (sandbox.zygote_command), set at start
NAMESPACES = {
    "pid": mounts.CLONE_NEWPID,
    "net": mounts.CLONE_NEWNET,
    "ipc": mounts.CLONE_NEWIPC,
    "uts": mounts.CLONE_NEWUTS,
    "cgroup": mounts.CLONE_NEWCGROUP,
}  # the names of sandbox.Policy.namespaces
_libc, _check = mounts.libc, mounts.check


def _makedirs_traversable(path):
    """Create ``path`` and its missing parents with mode 0755 (the kernel's uid must pass)."""
    current = "/"
    for part in path.strip("/").split("/"):
        current = os.path.join(current, part)
        if not os.path.isdir(current):
            os.mkdir(current)
            os.chmod(current, 0o755)


def _inside(path, top):
    return path == top or path.startswith(top.rstrip("/") + "/")


def _private_mounts(work, sockbase, tmp):
    """The folders a kernel gets a fresh tmpfs over (see `_namespaces`), outermost first."""
    fresh = [tmp]
    if not _inside(work, tmp):
        top = work
        while not os.path.isdir(top):
            top = os.path.dirname(top)
        if top == "/":  # nothing of the path exists: its first folder, whose name all kernels share
            top = "/" + work.strip("/").split("/")[0]
            os.makedirs(top, mode=0o755, exist_ok=True)
        fresh.append(top)
    if not any(_inside(sockbase, f) for f in fresh):
        fresh.append(sockbase)
    return [f for f in fresh if not any(f != g and _inside(f, g) for g in fresh)]


def _join_cgroup(req, fds):
    """In the supervisor: into the kernel's cgroup ("0": the writer), before anything is forked."""
    try:
        if len(fds) != req.get("cgroup_fds", 0):
            raise ValueError(f"expected {req.get('cgroup_fds', 0)} cgroup descriptors, got {len(fds)}")
        for fd in fds:
            os.write(fd, b"0")
    finally:
        for fd in fds:  # they move whoever writes to them: never into the kernel
            os.close(fd)


def _namespaces(req):
    """In the supervisor: the kernel's own namespaces and mounts (see the module docstring)."""
    policy, sandbox = req["policy"], req["sandbox"]
    work, sockdir, tmp = policy["workdir"], policy["sockdir"], sandbox["tmp"]
    flags = mounts.CLONE_NEWNS
    for name in sandbox["namespaces"]:
        flags |= NAMESPACES[name]
    _check(_libc.unshare(flags), "unshare")
    mounts.mount(None, "/", None, mounts.MS_REC | mounts.MS_PRIVATE)
    hostname = sandbox["hostname"].encode()
    _libc.sethostname(hostname, len(hostname))
    # The zygote's root is one tmpfs for all its kernels: a folder made there for one kernel's
    # working folder would show later kernels its path (other students' names), and the socket
    # base holds every kernel's socket folder. So each kernel gets fresh tmpfs mounts of its own:
    # /tmp, the deepest folder on the way to its working folder that exists (or the course's
    # top folder, made once, the same name for every kernel), and the socket base. What of the
    # view lies under them (the environment and the package in the course's folder, a checkout
    # under /tmp) is held open first and put back on top: each place (VIEW) a folder or file
    # bound with all under it, or a link made again.
    fresh = _private_mounts(work, policy.get("sockbase") or os.path.dirname(sockdir), tmp)
    held = []
    for p in sorted({*policy.get("readonly", []), *VIEW}):
        if any(_inside(p, top) for top in fresh) and not any(_inside(p, q) for q, _, _ in held):
            link = os.readlink(p) if os.path.islink(p) else None
            held.append((p, link, None if link is not None else os.open(p, os.O_PATH | os.O_NOFOLLOW)))
    for top in fresh:
        size = f"size={sandbox['tmp_mb']}m,mode=1777" if top == tmp else "size=1m,mode=0755"
        mounts.mount("tmpfs", top, "tmpfs", mounts.MS_NOSUID | mounts.MS_NODEV, size)
    for path, link, fd in held:
        _makedirs_traversable(os.path.dirname(path))
        if link is not None:
            os.symlink(link, path)
            continue
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            _makedirs_traversable(path)
        else:
            open(path, "a").close()
        mounts.bind(f"/proc/self/fd/{fd}", path, readonly=True)
        os.close(fd)
    edition_rel = os.path.normpath(req["edition_rel"])
    if edition_rel.startswith(("/", "..")):
        raise ValueError(f"grading edition outside the staged editions: {edition_rel}")
    mounts.bind(os.path.join(STAGE_EDITIONS, edition_rel), policy["overlay"][1], readonly=True)  # over the package
    work_rel = os.path.normpath(req["work_rel"])
    if work_rel.startswith(("/", "..")) or work_rel == ".":
        raise ValueError(f"working folder outside the staged scratch area: {work_rel}")
    _makedirs_traversable(work)
    # its scratch copy (a size- and inode-limited tmpfs the grader mounted: mounts.py), at nbgrader's path
    mounts.bind(os.path.join(STAGE_WORK, work_rel), work, readonly=False)
    _makedirs_traversable(sockdir)
    mounts.bind(os.path.join(STAGE_SOCK, req["sock_rel"]), sockdir, readonly=False)
    for stage in (STAGE_WORK, STAGE_SOCK, STAGE_EDITIONS):
        mounts.umount(stage)


def _pid1(req):
    try:
        mounts.mount("proc", "/proc", "proc", mounts.MS_NOSUID | mounts.MS_NODEV | mounts.MS_NOEXEC)
        kernel = os.fork()
        if kernel == 0:
            _kernel(req)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        while True:  # reap orphans; end (and take the namespace along) when the kernel ends
            pid, status = os.wait()
            if pid == kernel:
                os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
    except BaseException as err:
        print(f"sandbox pid 1: {err}", file=sys.stderr, flush=True)
        os._exit(70)


def _seccomp(program):
    """Install the seccomp filter (classic BPF compiled by libseccomp in the grader: seccomp.py) for good."""
    buf = ctypes.create_string_buffer(program, len(program))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(program) // 8, ctypes.addressof(buf))
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp")


def _kernel(req):
    policy, sandbox = req["policy"], req["sandbox"]
    uid = int(policy["uid"])
    try:
        os.dup2(os.open("/dev/null", os.O_RDONLY), 0)
        out = os.open(req["log"], os.O_WRONLY | os.O_APPEND)  # the kernel's own log (see launch.py)
        os.dup2(out, 1)
        os.dup2(out, 2)
        for name, value in sandbox["rlimits"]:  # as `prlimit --<name>` on the bwrap path
            resource.setrlimit(getattr(resource, f"RLIMIT_{name.upper()}"), (value, value))
        for cap in range(64):  # empty the bounding set too (as setpriv --bounding-set=-all)
            _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)  # root -> plain uid: every capability is dropped
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        _seccomp(bytes.fromhex(sandbox["seccomp"]))
        os.chdir(policy["workdir"])
        os.closerange(3, 1 << 16)
        os.environ.clear()
        os.environ.update(req["env"])
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        sys.argv = ["ipykernel_launcher", "-f", req["connection_file"], *req["extra"]]
        from ipykernel import kernelapp

        kernelapp.launch_new_instance()
    except SystemExit as err:
        os._exit(err.code if isinstance(err.code, int) else 1)
    except BaseException as err:
        print(f"sandboxed kernel: {err!r}", file=sys.stderr, flush=True)
        os._exit(1)
    os._exit(0)


def _supervise(conn, req, cgroup_fds):
    _join_cgroup(req, cgroup_fds)
    _namespaces(req)
    p1 = os.fork()
    if p1 == 0:
        conn.close()
        _pid1(req)
    conn.sendall(b'{"started": true}\n')
    pidfd = os.pidfd_open(p1)
    while True:
        ready, _, _ = select.select([conn, pidfd], [], [])
        if pidfd in ready:
            _, status = os.waitpid(p1, 0)
            conn.sendall(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
            return
        if not conn.recv(1):  # the launcher is gone: so is the kernel
            os.kill(p1, signal.SIGKILL)
            os.waitpid(p1, 0)
            return


def serve(control):
    # torch is the point of the zygote; never encdec (see the module docstring)
    import ipykernel.kernelapp  # noqa: F401 (imported before the fork: each kernel inherits it)
    import numpy  # noqa: F401 (imported before the fork: each kernel inherits it)
    import torch  # noqa: F401 (imported before the fork: each kernel inherits it)

    if threading.active_count() != 1:
        raise RuntimeError("the zygote must not fork with threads running")
    if any(name.split(".")[0] == "encdec" for name in sys.modules):
        raise RuntimeError("the zygote must not import encdec: its kernels would inherit the real package")
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # supervisors are reaped automatically
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(control)
    os.chmod(control, 0o600)
    srv.listen(64)
    print("zygote ready", flush=True)
    os.dup2(2, 1)  # the grader stops reading our stdout now
    while True:
        conn, _ = srv.accept()
        data, fds = b"", []
        while not data.endswith(b"\n"):
            chunk, got, _, _ = socket.recv_fds(conn, 65536, 8)  # the kernel's cgroup.procs, if any
            fds += got
            if not chunk:
                break
            data += chunk
        if os.fork() == 0:
            srv.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            try:
                _supervise(conn, json.loads(data), fds)
            except BaseException as err:
                print(f"zygote: {err!r}", file=sys.stderr, flush=True)
                try:
                    conn.sendall(b'{"exit": 70}\n')
                except OSError:
                    pass
            os._exit(0)
        conn.close()
        for fd in fds:
            os.close(fd)


if __name__ == "__main__":
    VIEW.extend(json.loads(sys.argv[2]))  # the places of the view (sandbox.zygote_command): what _namespaces puts back
    serve(sys.argv[1])
