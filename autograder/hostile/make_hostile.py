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
from autograder.hostile.payloads import (  # noqa: F401 (tests read some of them from here)
    WRONG_FORWARD, ESCAPE, STEAL, NETWORK, FORK_BOMB, PATCH_ASSERTS,
    PATCH_CHECKS, STORED, BIG_OUTPUT, SIGINT_LOOP, MEMORY_BOMB, MEMFD_HOARD,
    CHILDREN_MEMORY, CPU_HOG, SYSCALLS, KEYRING_WRITE, KEYRING_READ, USERNS_ESCAPE,
    DEEP_TREE, log_link, TIMESTAMP_FREEZE, CHMOD_TRAP, SHARED_ROOT, FILL_FOLDER,
    LISTEN_PORTS, REPORT, FROZEN_TIMESTAMP,
)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ASSIGNMENT = "decoder_block"
SOURCE = ROOT / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"

MASK_SOFTMAX = ["mask_test", "mask_hidden", "softmax_test", "softmax_hidden"]
BLOCK_VISIBLE = ["block_shapes", "block_output"]
BLOCK_HIDDEN = ["block_output_hidden", "block_causal_hidden", "block_question_hidden"]
ALL = MASK_SOFTMAX + BLOCK_VISIBLE + BLOCK_HIDDEN
# Ports the network fixture tries; the test listens on one of them, outside the sandbox.


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
