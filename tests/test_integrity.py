"""Integrity flags (`autograder/integrity/`): honest code in any style is never flagged, every
rule family catches its attacks (aliases included), and `FlagIntegrity` marks a flagged notebook for
manual review in a real nbgrader gradebook without changing a score; the report lists it."""

from __future__ import annotations

import copy
import csv
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook
from nbgrader.preprocessors import ClearSolutions, ComputeChecksums, GetGrades, SaveAutoGrades, SaveCells

from autograder import assignments, integrity
from autograder.fixtures.make import BUILT
from autograder.integrity import review, scan_notebook, scan_source
from autograder.preprocessors import FlagIntegrity

ROOT = Path(__file__).resolve().parents[1]

# nbgrader's own add_submission warns that it builds rows before adding them to the session
pytestmark = pytest.mark.filterwarnings("ignore:Object of type .* not in session")
ASSIGNMENTS = assignments.names()
SOLUTION_MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")
FIXTURES = BUILT / "fixtures"  # made from autograder/fixtures/table.py when the session starts (conftest.py)
HOSTILE = BUILT / "hostile" / "submitted"


def read(path: Path):
    return nbformat.read(path, as_version=4)


def solution_cells():
    for a in ASSIGNMENTS:
        for cell in read(ROOT / "solutions" / a / f"{a}.ipynb").cells:
            if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
                source = "\n".join(line for line in cell.source.splitlines() if line.strip() not in SOLUTION_MARKERS)
                yield pytest.param(source, id=f"{a}/{cell.metadata.nbgrader.grade_id}")


HONEST_FIXTURES = sorted(p for p in FIXTURES.glob("*/*.ipynb") if p.parent.name.startswith(("db_", "ts_", "kv_")))

# (snippet, what the reason must say): every rule family, aliases and renamings included.
ATTACKS = [
    # stack frames
    ("import sys\ncaller = sys._getframe(1)", "stack frames (sys._getframe)"),
    ("from sys import _getframe as g\nns = g(2).f_locals", "stack frames (sys._getframe"),
    ("import inspect as i\ni.stack()", "stack frames (inspect.stack)"),
    ("from inspect import currentframe\nf = currentframe()", "stack frames (inspect.currentframe)"),
    ("def forward(self, x):\n    return x.f_back", "stack frames (x.f_back)"),
    ("try:\n    1 / 0\nexcept Exception as e:\n    g = e.__traceback__.tb_frame.f_globals", "stack frames"),
    ("getattr(sys, '_getframe')(1)", "stack frames (sys._getframe)"),
    ("s = __import__('sys')\nframe = s._getframe()", "stack frames (sys._getframe)"),
    # torch hooks
    ("m._forward_pre_hooks.clear()", "hook machinery (m._forward_pre_hooks)"),
    ("model.decoder.layers[0]._forward_hooks.clear()", "hook machinery (_forward_hooks)"),
    (
        "import torch.nn.modules.module as mm\nmm._global_forward_hooks.clear()",
        "hook machinery (torch.nn.modules.module",
    ),
    ("from torch.nn.modules.module import register_module_forward_hook", "hook machinery"),
    ("torch.nn.Module.__call__ = lambda self, *a: None", "hook machinery (torch.nn.Module.__call__)"),
    ("from torch import nn\nnn.Module._call_impl = f", "hook machinery (torch.nn.Module._call_impl)"),
    # the check library
    ("from encdec.grading.checks import verify", "grader's code (encdec.grading.checks.verify)"),
    ("import encdec.grading.checks as c", "grader's code (encdec.grading.checks)"),
    ("from encdec.grading import checks as c", "grader's code (encdec.grading.checks)"),
    ("checks.CHECKS.clear()", "grader's code (encdec.grading.checks.CHECKS"),
    ("checks.run = lambda *a, **k: None", "grader's code (encdec.grading.checks.run)"),
    ("run = checks.run", "grader's code (encdec.grading.checks.run)"),
    ("from autograder import preprocessors", "grader's code (autograder.preprocessors)"),
    # the grading files
    ("np.load('reference/decoder_block.output.npz')", "grader's files ('reference/decoder_block.output.npz')"),
    ("p = Path('.grading') / 'seed.json'", "grader's files ('.grading', 'seed.json')"),
    ("x = f'{root}/autograded/{name}'", "grader's files"),
    # interpreter trickery
    ("import gc\ngc.get_objects()", "interpreter (gc.get_objects)"),
    ("import sys\nsys.modules['encdec.grading.checks']", "interpreter (sys.modules)"),
    ("import importlib\nimportlib.reload(torch)", "interpreter (importlib.reload)"),
    ("from importlib import import_module as im\nim('os')", "interpreter (importlib.import_module)"),
    ("__builtins__['print'] = print", "interpreter (__builtins__)"),
    ("import threading\nthreading.settrace(tracer)", "interpreter (threading.settrace)"),
    ("import ctypes\nctypes.pythonapi", "interpreter (ctypes"),
    ("fn.__code__ = other.__code__", "interpreter (fn.__code__"),
    ("exec('import sys')", "interpreter (exec)"),
    ("numpy.allclose = lambda *a, **k: True", "patches library functions (numpy.allclose)"),
    ("import numpy as n\nn.testing.assert_allclose = lambda *a, **k: None", "patches library functions (numpy.testing"),
    ("import builtins\nbuiltins.print = f", "patches library functions (builtins.print)"),
    ("setattr(torch, 'allclose', lambda *a: True)", "patches library functions (torch.allclose)"),
    ("with open(name) as f:\n    f.read()", "reads or writes files (open)"),
    ("open('.grading/x.npz')", "grader's files ('.grading/x.npz')"),
    ("Path('x.txt').write_text('hi')", "reads or writes files (write_text)"),
    # torch's own building blocks
    ("torch.nn.TransformerDecoderLayer(16, 2)", "ready-made layers (torch.nn.TransformerDecoderLayer)"),
    ("from torch import nn\nlayer = nn.Transformer(16, 2)", "ready-made layers (torch.nn.Transformer)"),
    ("from torch.nn import MultiheadAttention as MHA\nMHA(16, 2)", "ready-made layers (torch.nn.MultiheadAttention)"),
    ("import torch.nn.functional as G\nG.multi_head_attention_forward(q, k, v)", "multi_head_attention_forward"),
    ("nn.TransformerEncoderLayer(16, 2)", "ready-made layers (torch.nn.TransformerEncoderLayer)"),
    # running a module around its hooks
    # names reached through strings, code handed over in strings
    ("d = getattr(m, '_forward_' + 'pre_hooks')", "hook machinery ('_forward_pre_hooks')"),
    ("import timeit\ntimeit.timeit('sys._getframe(1)', number=1)", "stack frames (sys._getframe)"),
    ("Layer = getattr(torch.nn, 'TransformerDecoder' + 'Layer')", "'TransformerDecoderLayer'"),
    # what the scan cannot read is listed for review: it fails closed
    ("%%writefile helper.py\nimport sys", "could not be checked (%writefile)"),
    ("def f(:\n    sys._getframe()", "could not be checked (the cell does not parse as Python)"),
    ("%time " * 300 + "x = 1", "could not be checked"),
    # hidden in magics
    ("%time caller = sys._getframe(1)", "stack frames (sys._getframe)"),
    ("%%capture\nimport gc\ngc.get_objects()", "interpreter (gc.get_objects)"),
]

# Honest code that looks like the attacks in some way: never flagged.
HONEST = [
    # what the sandbox constructs (environment, uid, host, folders): nothing to probe, so not flagged
    'import os\nos.environ["KMP_DUPLICATE_LIB_OK"] = "TRUE"  # the common macOS fix',
    "import os\nos.environ['HOME']",
    "from os import getenv\ngetenv('USER')",
    "import os\nos.getuid() == 0",
    "import socket\nsocket.gethostname()",
    "import platform as pf\npf.node()",
    "import os\nos.listdir('..')",
    "from pathlib import Path\nhere = Path.cwd()",
    "import glob\nglob.glob('*')",
    "%env HOME",
    "s = Path('/proc/self/status')",
    "files = !ls ..",
    # a hook on the student's own model, as a self-test
    "h = model.register_forward_hook(lambda m, a, y: print(y.shape))\nh.remove()",
    "self.register_forward_pre_hook(lambda m, a: None)",
    "for layer in model.decoder.layers:\n    h = layer.forward(h, memory, mask)",  # .forward on a given module
    "out_2 = self.layer_norm_1.forward(x + self.attention_self.forward(x, x, x, mask))",
    "def f(x):\n    open = x > 0  # a name of mine\n    return open",
    "assert ok, 'the tokens submitted differ from the reference'",
    "import inspect\nn_args = len(inspect.signature(f).parameters)",
    "import functools\n@functools.lru_cache(maxsize=None)\ndef pos(K):\n    return K",
    "class Stepper:\n    def __init__(self, model):\n        self.model = model",
    "scores = x.masked_fill(mask, float('-inf'))",
    "mask = torch.triu(torch.ones(K, K, dtype=torch.bool), diagonal=1)",
    "frame = x[:, -1]\nframe.shape",
    "out = self.layer_norm_1(x + self.dropout(self.attention_self(x, x, x, mask)))",
    "loss = nn.functional.cross_entropy(logits.reshape(-1, V), labels.reshape(-1))",
    "loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten())",
    "from encdec.generate import new_caches\ncaches = new_caches(model)",
    "class DecoderBlock(ref.DecoderBlock):\n    def __init__(self, *a, **k):\n        super().__init__(*a, **k)",
    "from encdec.grading import checks",
    'checks.run("decoder_block.mask", get_subsequent_mask)',
    "out, w = ref_attention.scaled_dot_product_attention(q, k, v, mask)",
    # no spelling of torch's attention operator is read: a by-hand part runs without it (by_hand.py)
    "F.scaled_dot_product_attention(q, k, v)",
    "mask = ref.get_subsequent_mask(ans_b[:, :-1])",
    "checks = [a == b for a, b in pairs]\nall(checks)",
    "def f(checks):\n    return checks.append(1)",
    "model.eval()\nhooks = []",
    'def f(x):\n    """Reads the submitted answer from the .grading reference/ npz: no, it does not."""\n    return x',
    "torch.backends.cudnn.deterministic = True",
    "self.k = torch.cat([self.k, k_new], dim=2)",
    "np.testing.assert_allclose(a, b)",
    "%matplotlib inline\nimport torch",
    "N, K = seq.shape\nenv = torch.zeros(N)\nstack = torch.stack([env, env])",
    "from torch import nn\nlayer = nn.Linear(4, 4)\nlayer.weight.data.fill_(1)",
    "class B(ref.DecoderBlock):\n    def forward(self, x, e, m=None):\n        return super().forward(x, e, m)",
    "def forward(self, x):\n    return self.linear(x)",
]


@pytest.mark.parametrize("source", list(solution_cells()))
def test_solution_cells_are_not_flagged(source):
    assert scan_source(source) == []


@pytest.mark.parametrize("path", HONEST_FIXTURES, ids=lambda p: p.parent.name)
def test_honest_fixtures_are_not_flagged(path):
    assert scan_notebook(read(path)) == []


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_solution_and_release_notebooks_are_not_flagged(assignment):
    assert scan_notebook(read(ROOT / "solutions" / assignment / f"{assignment}.ipynb")) == []
    assert scan_notebook(read(ROOT / "exercises" / assignment / f"{assignment}.ipynb")) == []


@pytest.mark.parametrize("source, expected", ATTACKS, ids=[a[0].splitlines()[-1][:40] for a in ATTACKS])
def test_attack_is_flagged(source, expected):
    reasons = scan_source(source)
    assert any(expected in r.replace("`", "") for r in reasons), reasons  # (what was used is a code span)
    assert len(reasons) == len(set(reasons))
    assert all("\n" not in r for r in reasons)


@pytest.mark.parametrize("source", HONEST)
def test_honest_lookalike_is_not_flagged(source):
    assert scan_source(source) == []


def test_every_rule_family_has_an_attack():
    families = {key for _, key in integrity.RULES}
    cells = [nbformat.v4.new_code_cell(source) for source, _ in ATTACKS]
    caught = {f.key for cell in cells for f in scan_notebook(nbformat.v4.new_notebook(cells=[cell]))}
    assert families <= caught, families - caught
    assert len(ATTACKS) >= 25


def test_reasons_are_deduplicated_and_name_what_was_used():
    assert scan_source("import sys\nsys._getframe(1)\nsys._getframe(2).f_back") == [
        "reads interpreter stack frames (`sys._getframe`, `f_back`)"
    ]


def test_the_scan_fails_closed_and_never_scores():
    """What it cannot read is listed for review ("could not be checked"), and no verdict reads it:
    the grader's code that decides a score never imports the scan."""
    assert scan_source("def f(:\n    sys._getframe()") == ["could not be checked (`the cell does not parse as Python`)"]
    for module in ("judge/__init__.py", "judge/core.py", "judge/kv_cache.py", "preprocessors/trusted_verdict.py"):
        text = (ROOT / "autograder" / module).read_text()
        assert "autograder.integrity" not in text and "import integrity" not in text, module


def test_scan_notebook_skips_test_cells_labels_cells_and_carries_imports():
    nb = read(ROOT / "solutions" / "decoder_block" / "decoder_block.ipynb")
    test = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "mask_test")
    test.source += "\nimport sys; sys._getframe()"  # the grader restores test cells: never scanned
    nb.cells.insert(2, nbformat.v4.new_code_cell("import torch.nn.functional as G"))
    block = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "block_solution")
    block.source += "\n_ = G.multi_head_attention_forward"
    nb.cells.insert(3, nbformat.v4.new_code_cell("import gc\ngc.get_objects()"))
    flags = scan_notebook(nb)
    assert [(f.cell, f.reason.split(" (")[0]) for f in flags] == [
        ("cell 3", "tampers with the interpreter"),
        ("block_solution", "uses torch's ready-made layers"),
    ]


def test_hostile_submissions_that_reach_the_grader_are_flagged():
    flagged = {
        p.parents[1].name
        for p in HOSTILE.glob("*/*/*.ipynb")
        if p.parents[1].name != "invalid_json" and scan_notebook(read(p))
    }
    assert {"patched_asserts", "patched_checks", "stored_outputs", "read_hidden", "write_outside"} <= flagged
    assert "pass_all" not in flagged


# --------------------------------------------------------------------------------------------
# FlagIntegrity in a real nbgrader gradebook

ASSIGNMENT = NOTEBOOK = "decoder_block"
FAILED_TEST = "block_output_hidden"  # scores 0 for both students, so the scores are not all full


def ids(db_url: str, student: str | None = None) -> dict:
    out = {"assignment": ASSIGNMENT, "notebook": NOTEBOOK, "db_url": db_url}
    if student:
        out["student"] = student
    return {"nbgrader": out}


def executed(nb):
    """The notebook as if it had run: every test cell passed except FAILED_TEST."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            failed = cell.metadata.get("nbgrader", {}).get("grade_id") == FAILED_TEST
            cell.outputs = [
                nbformat.v4.new_output("error", ename="AssertionError", evalue="no", traceback=[])
                if failed
                else nbformat.v4.new_output("stream", name="stdout", text="passed\n")
            ]
    return nb


def cheating(nb):
    nb = copy.deepcopy(nb)
    block = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "block_solution")
    block.source += "\n\nimport sys\n_peek = sys._getframe(1).f_locals  # what the check holds"
    nb.cells.insert(2, nbformat.v4.new_code_cell("import gc\n_everything = gc.get_objects()"))
    return nb


def snapshot(db_url: str, student: str) -> dict:
    with Gradebook(db_url) as gb:
        sub = gb.find_submission_notebook(NOTEBOOK, ASSIGNMENT, student)
        return {
            "grades": {g.name: (g.auto_score, g.needs_manual_grade) for g in sub.grades},
            "comments": {c.name: c.auto_comment for c in sub.comments},
            "score": sub.score,
            "needs_manual_grade": bool(sub.needs_manual_grade),
            "flags": [(r["cell"], r["key"], r["found"]) for r in review.rows(gb, student, ASSIGNMENT)],
        }


def autograde(db_url: str, student: str, nb, log=None):
    """nbgrader's SaveAutoGrades, then FlagIntegrity: their order in Autograde.autograde_preprocessors."""
    nb = executed(nb)
    SaveAutoGrades().preprocess(nb, ids(db_url, student))
    before = snapshot(db_url, student)
    FlagIntegrity(log=log or logging.getLogger("test_integrity")).preprocess(nb, ids(db_url, student))
    return before, snapshot(db_url, student)


@pytest.fixture(scope="module")
def blank_gradebook(tmp_path_factory):
    """A gradebook that knows decoder_block as generate_assignment records it, and two submissions."""
    path = tmp_path_factory.mktemp("gradebook") / "gradebook.db"
    db_url = f"sqlite:///{path}"
    source = read(ROOT / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    with pytest.MonkeyPatch.context() as mp:
        # a new gradebook runs `alembic` from PATH: the venv's, as nbgrader_config.py arranges
        mp.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
        with Gradebook(db_url) as gb:
            gb.add_assignment(ASSIGNMENT)
            for student in ("honest", "cheat"):
                gb.add_student(student)
    for step in (ClearSolutions(), ComputeChecksums(), SaveCells()):
        source, _ = step.preprocess(source, ids(db_url))
    with Gradebook(db_url) as gb:
        for student in ("honest", "cheat"):
            gb.add_submission(ASSIGNMENT, student)
    return path


@pytest.fixture
def gradebook(blank_gradebook, tmp_path):
    """A fresh copy of the blank gradebook for each test."""
    path = tmp_path / "gradebook.db"
    shutil.copy(blank_gradebook, path)
    return f"sqlite:///{path}"


def test_flagged_notebook_needs_manual_grade_and_says_why_scores_unchanged(gradebook, caplog):
    submitted = read(FIXTURES / "db_pass_all" / f"{NOTEBOOK}.ipynb")
    with caplog.at_level(logging.WARNING, logger="test_integrity"):
        before, after = autograde(gradebook, "cheat", cheating(submitted))

    assert {name: score for name, (score, _) in after["grades"].items()} == {
        name: score for name, (score, _) in before["grades"].items()
    }
    assert after["score"] == before["score"] == 9.0  # FAILED_TEST is worth 2 of 11
    assert not before["needs_manual_grade"] and after["needs_manual_grade"]
    tests = [name for name in after["grades"] if not name.endswith("_solution")]
    assert tests and all(after["grades"][name][1] for name in tests)

    assert after["comments"] == before["comments"]  # nbgrader's own: no course note in a comment
    assert after["flags"] == [
        ("cell 2", "interpreter", "`gc.get_objects`"),
        ("block_solution", "frames", "`sys._getframe`, `f_locals`"),
    ]

    line = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(line) == 1 and line[0].startswith("integrity flag: cheat/decoder_block/decoder_block: ")
    assert "gc.get_objects" in line[0] and "sys._getframe" in line[0]


def test_honest_notebook_changes_nothing(gradebook):
    before, after = autograde(gradebook, "honest", read(FIXTURES / "db_style" / f"{NOTEBOOK}.ipynb"))
    assert before == after
    assert not after["needs_manual_grade"] and after["score"] == 9.0 and after["flags"] == []


def test_flagging_twice_does_not_repeat_the_reason(gradebook):
    nb = executed(cheating(read(FIXTURES / "db_pass_all" / f"{NOTEBOOK}.ipynb")))
    SaveAutoGrades().preprocess(nb, ids(gradebook, "cheat"))
    for _ in range(2):
        FlagIntegrity().preprocess(nb, ids(gradebook, "cheat"))
    assert len(snapshot(gradebook, "cheat")["flags"]) == 2


def test_report_lists_exactly_the_flagged_submission(gradebook, tmp_path):
    autograde(gradebook, "honest", read(FIXTURES / "db_pass_all" / f"{NOTEBOOK}.ipynb"))
    autograde(gradebook, "cheat", cheating(read(FIXTURES / "db_pass_all" / f"{NOTEBOOK}.ipynb")))

    rows = integrity.flagged_submissions(gradebook)
    assert [(r["assignment"], r["student"], r["notebook"], r["needs_manual_grade"]) for r in rows] == [
        ("decoder_block", "cheat", "decoder_block", True)
    ]
    assert rows[0]["reasons"] == (
        "cell 2: tampers with the interpreter (`gc.get_objects`); "
        "block_solution: reads interpreter stack frames (`sys._getframe`, `f_locals`)"
    )
    assert "篡改解释器" in integrity.flagged_submissions(gradebook, lang="zh")[0]["reasons"]  # worded at render

    out = tmp_path / "flags.csv"
    done = subprocess.run(
        [sys.executable, "-m", "autograder.integrity", "report", "--db-url", gradebook, "--csv", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("decoder_block\tcheat\tdecoder_block\t")
    assert "sys._getframe" in lines[0]
    table = list(csv.DictReader(out.open()))
    assert [(r["assignment"], r["student"], r["notebook"]) for r in table] == [
        ("decoder_block", "cheat", "decoder_block")
    ]


def test_review_and_regrade_clear_the_flag(gradebook):
    submitted = read(FIXTURES / "db_pass_all" / f"{NOTEBOOK}.ipynb")
    autograde(gradebook, "cheat", cheating(submitted))
    with Gradebook(gradebook) as gb:  # the instructor confirms every score, as the formgrader does
        for grade in gb.find_submission_notebook(NOTEBOOK, ASSIGNMENT, "cheat").grades:
            grade.manual_score, grade.needs_manual_grade = grade.auto_score, False
        gb.db.commit()
    assert [r["needs_manual_grade"] for r in integrity.flagged_submissions(gradebook)] == [False]

    autograde(gradebook, "cheat", submitted)  # an honest resubmission, graded again
    assert integrity.flagged_submissions(gradebook) == []


def test_feedback_does_not_show_the_flag(gradebook):
    """The flag is a record beside nbgrader's rows: the comments the feedback reads are nbgrader's."""
    autograde(gradebook, "cheat", cheating(read(FIXTURES / "db_pass_all" / f"{NOTEBOOK}.ipynb")))
    nb = read(FIXTURES / "db_pass_all" / f"{NOTEBOOK}.ipynb")
    nb, _ = GetGrades().preprocess(nb, ids(gradebook, "cheat"))
    comments = [c.metadata.nbgrader.get("comment") for c in nb.cells if "nbgrader" in c.metadata]
    assert not any(isinstance(c, str) and ("interpreter" in c or "gc.get_objects" in c) for c in comments)
    assert set(comments) <= {None, "No response."}


def test_the_feedback_shows_the_instructors_comment_or_nbgraders(gradebook):
    """Which comment the student reads is nbgrader's field: an instructor's comment is shown as
    written (the page escapes it), an answer left as released reads nbgrader's own; the flag of a
    cell whose id carries markup stays in its record."""
    from nbgrader.api import Gradebook

    nb = read(FIXTURES / "db_pass_all" / f"{NOTEBOOK}.ipynb")
    released = {
        c.metadata.nbgrader["grade_id"]: c.source
        for c in read(ROOT / "exercises" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").cells
        if "nbgrader" in c.metadata
    }
    for c in nb.cells:
        if c.metadata.get("nbgrader", {}).get("grade_id") == "mask_solution":
            c.source = released["mask_solution"]  # handed back as released
    nb.cells.insert(2, nbformat.v4.new_code_cell("import gc\n_ = gc.get_objects()  # <img src=x onerror=alert(1)>"))
    autograde(gradebook, "cheat", nb)
    with Gradebook(gradebook) as gb:
        for c in gb.find_submission_notebook(NOTEBOOK, ASSIGNMENT, "cheat").comments:
            c.manual_comment = "Look again at the mask <b>here</b>\n2nd line" if c.name == "block_solution" else None
        gb.db.commit()
    nb, _ = GetGrades().preprocess(nb, ids(gradebook, "cheat"))
    shown = {
        c.metadata.nbgrader["grade_id"]: c.metadata.nbgrader["comment"]
        for c in nb.cells
        if "comment" in c.metadata.get("nbgrader", {})
    }
    assert shown["block_solution"] == "Look again at the mask <b>here</b>\n2nd line"
    assert shown["mask_solution"] == "No response."  # the release's stub, handed back
    assert shown["softmax_solution"] is None
    assert snapshot(gradebook, "cheat")["flags"] == [("cell 2", "interpreter", "`gc.get_objects`")]


def test_a_failed_regrade_puts_the_flags_back_with_the_grades(gradebook):
    """The flags are rows of the submission a regrade can change: ``keep.py`` keeps and restores them."""
    from autograder import keep

    autograde(gradebook, "cheat", cheating(read(FIXTURES / "db_pass_all" / f"{NOTEBOOK}.ipynb")))
    kept, flagged = keep.gradebook_rows(gradebook, "default_course", "cheat", ASSIGNMENT), snapshot(gradebook, "cheat")
    autograde(gradebook, "cheat", read(FIXTURES / "db_pass_all" / f"{NOTEBOOK}.ipynb"))  # a regrade, then undone
    assert snapshot(gradebook, "cheat")["flags"] == []
    keep.put_rows_back(gradebook, "default_course", "cheat", ASSIGNMENT, kept)
    assert snapshot(gradebook, "cheat") == flagged and len(flagged["flags"]) == 2
