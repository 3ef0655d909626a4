"""The sandbox policy as data, and the parts it adds below the namespaces: seccomp, cgroups, uids.

- `Policy` drives both launch paths: the bwrap command line and the plain-data request the
  zygote applies (same namespaces, rlimits, /tmp, seccomp program).
- The seccomp program (libseccomp's) is built for every supported architecture, grading stops
  without libseccomp, and a process under it is refused the keyring and user namespaces (killed
  through the x32 table) but still starts threads, subprocesses and torch.
- A kernel's cgroup is made with its limits, charges memfds to the kernel (the point: they
  escape the address-space limit), is killed whole and removed; without one the grader says so.
- `UidSlot` hands consecutive kernels different uids.

The grading tests (tests/test_sandbox.py, tests/test_sandbox_hostile.py) prove the same on
real kernels, on both launch paths.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import resource
import shutil
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from autograder.sandbox import cgroups, kernel_site, sandbox, seccomp
from autograder.sandbox.policy import BWRAP_NAMESPACES, Limits, Policy
from autograder.sandbox.sandbox import UID_BASE, UID_SLOTS, UidSlot, bwrap_command, readonly_paths

ROOT = Path(__file__).resolve().parents[1]

MiB = 1024 * 1024
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox runs as root")


def zygote_module():
    """zygote.py, imported by path (it is a script that imports only the standard library)."""
    spec = importlib.util.spec_from_file_location("zygote", ROOT / "autograder" / "sandbox" / "zygote.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def kernel_policy(tmp_path: Path, limits: Limits) -> dict:
    work, sock = tmp_path / "work", tmp_path / "sock"
    work.mkdir()
    sock.mkdir()
    return {
        "uid": UID_BASE + 7,
        "workdir": str(work),
        "sockdir": str(sock),
        "readonly": [str(p) for p in readonly_paths()],
        "limits": dataclasses.asdict(limits),
    }


def test_policy_drives_the_bwrap_command(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "privileged", lambda: True)
    limits = Limits(memory_mb=1234, cpu_seconds=99, nproc=17, fsize_mb=5, nofile=33, tmp_mb=77)
    rules = Policy(limits)
    cmd = bwrap_command(kernel_policy(tmp_path, limits), ["python"], seccomp_fd=9)
    bwrap = next(i for i, arg in enumerate(cmd) if arg.endswith("bwrap"))
    assert cmd[1 : bwrap - 1] == [f"--{name}={value}" for name, value in rules.rlimits()]
    assert f"--as={1234 * MiB}" in cmd and "--nproc=17" in cmd and "--core=0" in cmd
    args = cmd[bwrap:]
    for ns in rules.namespaces:
        assert BWRAP_NAMESPACES[ns] in args
    assert args[args.index("--hostname") + 1] == rules.hostname
    assert args[args.index("--seccomp") + 1] == "9"
    tmpfs = args.index("--tmpfs")
    assert args[tmpfs + 1] == rules.tmp and args[tmpfs - 2 : tmpfs] == ["--size", str(77 * MiB)]
    pairs = list(zip(args, args[1:], args[2:]))
    for kind, *paths in rules.mounts(readonly_paths(), []):
        if kind in ("ro-bind", "symlink"):
            assert (f"--{kind}", *paths) in pairs, (kind, paths)
    for path in kernel_site.files((sandbox._tools()["setpriv"],)):  # the system, file by file, read-only
        assert ("--ro-bind", os.path.realpath(path), os.path.realpath(path)) in pairs, path
    assert not any(kind == "--ro-bind" and src in ("/usr", "/etc", "/lib", "/bin") for kind, src, _ in pairs)
    assert args[-1] == "python"


def test_a_launcher_builds_the_same_view_from_the_listing_the_grader_hands_it(tmp_path):
    """The view's listing goes to a fresh-bwrap launcher through the policy (JSON), listed once by the
    grader: the command it builds is the one it would build listing the machine itself."""
    policy = kernel_policy(tmp_path, Limits())
    handed = json.loads(json.dumps({**policy, "listing": sandbox.view_listing(readonly_paths())}))
    assert bwrap_command(handed, ["python"], seccomp_fd=9) == bwrap_command(policy, ["python"], seccomp_fd=9)


def test_unprivileged_command_sets_limits_inside_a_user_namespace(tmp_path, monkeypatch):
    """Without root: bwrap first, in a user namespace with no capabilities, then the same rlimits
    inside it (where RLIMIT_NPROC counts the kernel's own processes), and no uid change."""
    monkeypatch.setattr(sandbox, "privileged", lambda: False)
    limits = Limits(nproc=17)
    cmd = bwrap_command(kernel_policy(tmp_path, limits), ["python"], seccomp_fd=9)
    assert cmd[0].endswith("bwrap") and cmd[1:4] == ["--unshare-user", "--cap-drop", "ALL"]
    assert not any(arg.endswith("setpriv") for arg in cmd)
    inner = cmd.index("--", cmd.index("--chdir"))
    assert cmd[inner + 1].endswith("prlimit")
    assert cmd[inner + 2 : -2] == [f"--{name}={value}" for name, value in Policy(limits).rlimits()]
    assert cmd[-2:] == ["--", "python"]
    assert cmd[cmd.index("--seccomp") + 1] == "9"


def test_zygote_gives_each_kernel_fresh_mounts_on_its_way(tmp_path):
    """The folders a zygote kernel gets a fresh tmpfs over: /tmp, the deepest existing folder on
    the way to its working folder, and the socket base, without one inside another."""
    z = zygote_module()
    course = tmp_path / "course"
    course.mkdir()
    work = str(course / "autograded" / "alice" / "decoder_block")
    sockbase = str(course / "tmp" / "encdec-z-1")
    assert z._private_mounts(work, sockbase, "/nonexistent-tmp") == ["/nonexistent-tmp", str(course)]
    other = tmp_path / "sockets"
    other.mkdir()
    assert z._private_mounts(work, str(other), "/nonexistent-tmp") == ["/nonexistent-tmp", str(course), str(other)]
    # under /tmp, which every kernel gets fresh: nothing more
    assert z._private_mounts(work, sockbase, str(tmp_path)) == [str(tmp_path)]


def test_policy_request_is_what_the_zygote_applies(tmp_path):
    rules = Policy(Limits(memory_mb=1234, tmp_mb=77))
    request = json.loads(json.dumps(rules.request()))  # plain data: it travels as JSON
    zygote = zygote_module()
    assert set(request["namespaces"]) == set(rules.namespaces) <= set(zygote.NAMESPACES)
    assert request["rlimits"] == [list(r) for r in rules.rlimits()]
    for name, _ in request["rlimits"]:  # the zygote sets resource.RLIMIT_<NAME>
        assert hasattr(resource, f"RLIMIT_{name.upper()}"), name
    assert request["tmp"] == "/tmp" and request["tmp_mb"] == 77 and request["hostname"] == "sandbox"
    assert bytes.fromhex(request["seccomp"]) == rules.seccomp_program()


def test_readme_table_is_the_policy():
    readme = (ROOT / "autograder" / "sandbox" / "README.md").read_text()
    assert Policy().table() in readme, "autograder/sandbox/README.md: paste Policy().table() again"


@needs_root
def test_prlimit_accepts_every_rlimit():
    args = [f"--{name}={value}" for name, value in Policy().rlimits()]
    subprocess.run(["prlimit", *args, "--", "true"], check=True)


def test_seccomp_program_is_built_for_each_architecture():
    """libseccomp compiles the policy for both tables it is checked on; the program checks the
    architecture first, and an unknown call name is an error, never a rule left out."""
    rules = Policy()
    audit_arch = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}  # linux/audit.h
    for arch in seccomp.ARCHES:
        program = seccomp.assemble(rules.seccomp_eperm, rules.seccomp_enosys, rules.seccomp_clone_flags, arch)
        assert len(program) % 8 == 0 and 0 < len(program) // 8 < 100
        code, _, _, k = struct.unpack_from("=HBBI", program, 8)
        assert code == 0x15 and k == audit_arch[arch]  # BPF_JMP|BPF_JEQ|BPF_K on the architecture
    with pytest.raises(KeyError):
        seccomp.assemble(("no_such_call",), (), 0)


def test_seccomp_without_libseccomp_stops_grading(monkeypatch):
    """No libseccomp, no kernel: the grader says what to install and never runs one unconfined."""
    monkeypatch.setitem(sys.modules, "pyseccomp", None)  # as if it were not installed
    seccomp.assemble.cache_clear()
    with pytest.raises(sandbox.SandboxUnavailable, match="libseccomp"):
        Policy().seccomp_program()
    seccomp.assemble.cache_clear()


@pytest.mark.skipif(seccomp.machine() != "x86_64", reason="the x32 table is x86_64's")
def test_seccomp_kills_a_call_through_the_x32_table():
    """A call through the x32 table (getpid with bit 30 set) ends the process (SIGSYS), as a
    call through another architecture's table does."""
    child = (
        "import ctypes; from autograder.sandbox import seccomp; from autograder.sandbox.policy import Policy; "
        "seccomp.install(Policy().seccomp_program()); "
        "print(ctypes.CDLL(None).syscall(seccomp.syscall_number('getpid') | 0x40000000), flush=True)"
    )
    run = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60)
    assert run.returncode == -31 and run.stdout == "", (run.returncode, run.stdout, run.stderr)


SECCOMP_CHILD = textwrap.dedent("""
    import ctypes, errno, json, subprocess, sys, threading
    from autograder.sandbox import seccomp
    from autograder.sandbox.sandbox import Policy
    seccomp.install(Policy().seccomp_program())
    libc = ctypes.CDLL(None, use_errno=True)
    def call(name, *args):
        ctypes.set_errno(0)
        ret = libc.syscall(seccomp.syscall_number(name), *args)
        return "ok" if ret != -1 else errno.errorcode[ctypes.get_errno()]
    out = {{"keyctl": call("keyctl", 0, ctypes.c_int(-4), 0),
           "add_key": call("add_key", b"user", b"k", b"v", 1, ctypes.c_int(-4)),
           "unshare_newuser": call("unshare", seccomp.CLONE_NEWUSER),
           "unshare_files": call("unshare", 0x400),
           "io_uring_setup": call("io_uring_setup", 8, ctypes.create_string_buffer(120)),
           "clone3": call("clone3", None, 0)}}
    seen = []
    threads = [threading.Thread(target=seen.append, args=(i,)) for i in range(4)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    out["threads"] = len(seen)
    out["subprocess"] = subprocess.run(["true"]).returncode
    import torch
    torch.set_num_threads(2)
    out["torch"] = float(torch.ones(64, 64).matmul(torch.ones(64, 64)).sum())
    print(json.dumps(out))
""")


def test_seccomp_refuses_keyring_and_user_namespaces_but_not_threads():
    run = subprocess.run([sys.executable, "-c", SECCOMP_CHILD.format()], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.splitlines()[-1])
    assert got == {
        "keyctl": "EPERM",
        "add_key": "EPERM",
        "unshare_newuser": "EPERM",
        "unshare_files": "ok",
        "io_uring_setup": "EPERM",
        "clone3": "ENOSYS",
        "threads": 4,
        "subprocess": 0,
        "torch": 64.0**3,
    }


@needs_root
def test_bwrap_applies_the_seccomp_program(tmp_path):
    probe = (
        "import ctypes, errno, threading; l = ctypes.CDLL(None, use_errno=True); "
        "r = l.unshare(0x10000000); t = threading.Thread(target=print); t.start(); t.join(); "
        "print([s.split()[1] for s in open('/proc/self/status') if s.startswith('Seccomp:')][0], "
        "errno.errorcode[ctypes.get_errno()] if r else 'ok')"
    )
    fd = seccomp.program_fd(Policy().seccomp_program())
    try:
        cmd = bwrap_command(kernel_policy(tmp_path, Limits()), [sys.executable, "-c", probe], fd)
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=60, pass_fds=[fd])
    finally:
        os.close(fd)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split()[-2:] == ["2", "EPERM"]  # filter mode, unshare(CLONE_NEWUSER)


# --------------------------------------------------------------------------------------------
# cgroups


@pytest.fixture
def hierarchy():
    h, why = cgroups.find_hierarchy()
    if h is None or os.geteuid() != 0:
        pytest.skip(f"no usable cgroup here: {why or 'not root'}")
    return h


def run_in(cgroup: cgroups.Cgroup, code: str) -> subprocess.Popen:
    """A Python child that is in `cgroup` before its first instruction (as the launcher does it)."""
    return subprocess.Popen(
        [sys.executable, "-c", code],
        preexec_fn=cgroup.join,  # noqa: PLW1509 (the test's only thread forks it)
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_cgroup_limits_charge_memfds_kill_and_remove(hierarchy):
    cg = cgroups.create(hierarchy, 0, memory_bytes=256 * MiB, pids=16, cpus=0.5)
    try:
        if cg.version == 1:
            by_name = {d.parent.parent.name: d for d in cg.dirs}
            assert int((by_name["memory"] / "memory.limit_in_bytes").read_text()) == 256 * MiB
            assert (by_name["pids"] / "pids.max").read_text().strip() == "16"
            assert (by_name["cpu"] / "cpu.cfs_quota_us").read_text().strip() == "50000"
        else:
            (d,) = cg.dirs
            assert int((d / "memory.max").read_text()) == 256 * MiB
            assert (d / "cpu.max").read_text().split() == ["50000", "100000"]
        # memfds are written, not mapped: no address space, but charged to the cgroup's memory
        hoard = run_in(
            cg,
            "import os\nfds = []\nfor i in range(8):\n    fd = os.memfd_create('h')\n"
            "    [os.write(fd, b'x' * 2**20) for _ in range(64)]\n    fds.append(fd)\n"
            "    print((i + 1) * 64, flush=True)",
        )
        out, _ = hoard.communicate(timeout=60)
        assert hoard.returncode == -9 and int(out.split()[-1]) < 256, out  # killed below 256 MiB
        # the pids limit counts every process and thread of the cgroup
        forks = run_in(
            cg,
            "import os, time\nn = 0\ntry:\n    while n < 100:\n        if os.fork() == 0:\n"
            "            time.sleep(60)\n            os._exit(0)\n        n += 1\n"
            "except OSError:\n    pass\nprint(n, flush=True)\ntime.sleep(60)",
        )
        assert int(forks.stdout.readline()) < 16
        assert len(cg.pids()) >= 15
        assert cg.kill() and cg.pids() == set()  # the sleeping children too
        assert forks.wait(timeout=10) == -9
    finally:
        assert cg.close()
    assert not any(d.exists() for d in cg.dirs)


def test_cgroup_cpu_quota(hierarchy):
    cg = cgroups.create(hierarchy, 0, memory_bytes=512 * MiB, pids=16, cpus=0.25)
    try:
        spin = (
            "import os, time\nfor _ in range(2):\n    if os.fork() == 0:\n        break\n"
            "end = time.monotonic() + 1.5\nwhile time.monotonic() < end:\n    pass"
        )
        start = time.monotonic()
        run_in(cg, spin).wait(timeout=30)
        time.sleep(0.2)
        wall = time.monotonic() - start
        used = cg.cpu_seconds()
        if used is not None:  # 3 spinning processes, a quarter of a CPU between them
            assert used < 0.25 * wall + 0.3, (used, wall)
    finally:
        cg.close()


def test_cgroup_v2_files(tmp_path):
    """The v2 layout, on a fake hierarchy: controllers handed down, limits in v2's files."""
    root = tmp_path / "unified"
    (root / cgroups.PARENT).mkdir(parents=True)
    (root / "cgroup.subtree_control").write_text("memory pids cpu\n")
    (root / cgroups.PARENT / "cgroup.subtree_control").write_text("")
    h = cgroups.Hierarchy(2, dict.fromkeys(cgroups.CONTROLLERS, root))
    cg = cgroups.create(h, 3, memory_bytes=100 * MiB, pids=20, cpus=1.0)
    (d,) = cg.dirs
    assert d.parent == root / cgroups.PARENT and d.name.startswith(f"3-{os.getpid()}-")
    assert (root / cgroups.PARENT / "cgroup.subtree_control").read_text() == "+memory +pids +cpu"
    assert (d / "memory.max").read_text() == str(100 * MiB)
    assert (d / "pids.max").read_text() == "20" and (d / "cpu.max").read_text() == "100000 100000"
    assert cgroups.Cgroup.from_json(json.loads(json.dumps(cg.to_json()))) == cg


def test_no_cgroup_warns_once_and_falls_back(monkeypatch, capsys):
    monkeypatch.setattr(cgroups, "_probed", None)
    monkeypatch.setattr(cgroups, "find_hierarchy", lambda: (None, "no cgroup v1 memory"))
    assert cgroups.probe(MiB, 1, 1.0) is None
    assert cgroups.probe(MiB, 1, 1.0) is None
    err = capsys.readouterr().err.splitlines()
    assert err == [cgroups.FALLBACK.format(why="no cgroup v1 memory")]
    assert "falling back to per-process limits" in err[0]


# --------------------------------------------------------------------------------------------
# uids


def test_uid_slots_rotate(tmp_path):
    seen = []
    for _ in range(3):  # one kernel after the other: never the same uid twice in a row
        slot = UidSlot(lock_dir=tmp_path)
        seen.append(slot.uid)
        slot.release()
    assert len(set(seen)) == 3 and all(UID_BASE <= u < UID_BASE + UID_SLOTS for u in seen)
    held = UidSlot(lock_dir=tmp_path)  # a held slot is skipped; the counter wraps around
    (tmp_path / "next").write_text(str(held.slot))
    other = UidSlot(lock_dir=tmp_path)
    assert other.uid == held.uid + 1 or (held.slot == UID_SLOTS - 1 and other.slot == 0)
    (tmp_path / "next").write_text(str(UID_SLOTS - 1))
    other.release()
    held.release()
    last, first = UidSlot(lock_dir=tmp_path), UidSlot(lock_dir=tmp_path)
    assert (last.slot, first.slot) == (UID_SLOTS - 1, 0)
    last.release()
    first.release()


def test_every_limit_is_a_setting_of_the_kernel_manager_declared_once():
    """Each field of Limits is a `c.SandboxKernelManager.<field>` setting with the field's default
    and help (none copied by hand, none missing: `nofile` once was), and the settings reach the kernel."""
    import dataclasses

    from traitlets.config import Config

    from autograder.sandbox.kernel import SandboxKernelManager

    traits = SandboxKernelManager.class_traits(config=True)
    for f in dataclasses.fields(Limits):
        assert f.name in traits and traits[f.name].default_value == f.default, f.name
        assert traits[f.name].help == f.metadata["help"]
    changed = {f.name: f.default * 2 for f in dataclasses.fields(Limits)}
    manager = SandboxKernelManager(config=Config({"SandboxKernelManager": changed}))
    assert manager.limits() == Limits(**changed)


def test_socket_folders_go_where_their_addresses_fit(tmp_path, monkeypatch):
    """A socket's address holds at most 107 bytes: under a deep temporary folder (a course under a
    long path, a test's folder under an xdist worker's) the fork server once failed to bind its
    control socket ("AF_UNIX path too long"). Socket folders then go to a short folder."""
    import socket
    import tempfile

    from autograder.sandbox.kernel import SOCKET_PATH_MAX, SOCKET_TAIL, socket_base

    monkeypatch.setattr(tempfile, "tempdir", "/tmp")
    deep = tmp_path / ("d" * 40) / ("e" * 40)
    deep.mkdir(parents=True)
    assert socket_base(str(deep)) == "/tmp"
    assert socket_base("/srv/c") == "/srv/c" and socket_base("") == "/tmp"
    # the longest address the kernel makes under the longest base that is taken binds
    base = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        longest = base / ("x" * (SOCKET_PATH_MAX - SOCKET_TAIL - len(str(base)) - 1))
        longest.mkdir()
        assert socket_base(str(longest)) == str(longest) and socket_base(str(longest) + "x") == "/tmp"
        folder = Path(tempfile.mkdtemp(prefix="encdec-z-9999999-", dir=longest)) / "tmpabcdefgh"
        folder.mkdir()
        address = folder / "k-65535"
        assert len(str(address)) <= SOCKET_PATH_MAX
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.bind(str(address))
    finally:
        shutil.rmtree(base)


def test_kernels_and_the_grader_share_one_steady_allocator():
    """A graded kernel starts with glibc's allocator held at fixed thresholds (GLIBC_TUNABLES), and
    the grader sets the same ones where it times the lesson (judge/budget.py): a fresh process shows
    glibc took them (mallinfo2's free heap stays after a 16 MB temporary is freed, as the settings
    keep it; by default glibc hands a block that large back with munmap)."""
    import platform

    from autograder.judge import budget
    from autograder.sandbox.policy import MALLOC, kernel_environment, malloc_tunables

    env = kernel_environment(dataclasses.asdict(Limits()), sys.prefix)
    assert env["GLIBC_TUNABLES"] == malloc_tunables()
    assert dict(kv.removeprefix("glibc.malloc.").split("=") for kv in env["GLIBC_TUNABLES"].split(":")) == {
        k: str(v) for k, v in MALLOC.items()
    }
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("not glibc: the settings are glibc's")
    assert budget.steady_allocator()
    probe = textwrap.dedent(
        """
        import ctypes
        class Info(ctypes.Structure):
            _fields_ = [(n, ctypes.c_size_t) for n in
                        "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
        libc = ctypes.CDLL(None)
        libc.mallinfo2.restype = Info
        libc.malloc.restype = ctypes.c_void_p
        libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
        libc.free.argtypes = [ctypes.c_void_p]
        mapped = libc.mallinfo2().hblkhd
        block = libc.malloc(16 * 2**20)
        libc.memset(block, 1, 16 * 2**20)
        mapped = libc.mallinfo2().hblkhd - mapped >= 16 * 2**20
        libc.free(block)
        print(mapped, libc.mallinfo2().fordblks >= 16 * 2**20)
        """
    )
    steady = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, "GLIBC_TUNABLES": env["GLIBC_TUNABLES"]},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    default = subprocess.run(
        [sys.executable, "-c", probe],
        env={k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert steady == ["False", "True"], steady  # from the heap, and kept there once freed
    assert default == ["True", "False"], default  # glibc's default: mapped for itself, unmapped when freed


def test_a_lessons_timing_serves_its_sizes_for_a_minute_then_is_made_again(monkeypatch):
    """budget.lesson_cpu: one timing per sizes per grader process within ``FRESH`` seconds (a kv_cache
    notebook's timings cost about a quarter of its grading), a new one after; without a key, always."""
    from autograder.judge import budget

    made, now = [], [1000.0]
    monkeypatch.setattr(budget, "_TIMED", {})
    monkeypatch.setattr(budget, "_time_lesson", lambda check, inputs: made.append(now[0]) or 0.05 + len(made))
    monkeypatch.setattr(budget.time, "monotonic", lambda: now[0])
    first = budget.lesson_cpu(None, {}, key="sizes A")
    now[0] += budget.FRESH - 1
    assert budget.lesson_cpu(None, {}, key="sizes A") == first and len(made) == 1
    assert budget.lesson_cpu(None, {}, key="sizes B") != first and len(made) == 2  # other sizes: timed
    now[0] += 2
    assert budget.lesson_cpu(None, {}, key="sizes A") != first and len(made) == 3  # stale: timed again
    budget.lesson_cpu(None, {})
    budget.lesson_cpu(None, {})
    assert len(made) == 5
