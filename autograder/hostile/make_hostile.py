"""Make the hostile fixture submissions of `decoder_block` from the instructor's notebook.

    python autograder/hostile/make_hostile.py   # rewrites autograder/hostile/{submitted/,expected.json}

Each fixture is one student's submission: the solution as a student would hand it in (solution
markers and hidden tests removed), with one hostile change. `expected.json` says what grading
must make of it: which graded cells pass, the score, and what must not have happened.
`tests/test_sandbox_hostile.py` grades them all through the real path (the course's nbgrader
configuration, the sandbox and `autograder.driver`) and checks every expectation.
"""
from __future__ import annotations

import copy
import hashlib
import json
import sys
from pathlib import Path

import nbformat

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
candidates = [course / "solutions" / "decoder_block" / "decoder_block.ipynb",
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
for d in [course, repo, Path("/root"), here.parent.parent]:
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
        passed=ALL, file_equals={"escape.json": []}, why="every write outside its folder fails")
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
