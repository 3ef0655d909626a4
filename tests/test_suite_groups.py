"""The suite's own layout (conftest.py): every module that reads the session's stock batch runs in
the one worker that grades it. A session fixture is made once a worker, so a reader outside the
group made the other worker grade the whole batch a second time (390 s of a fresh-clone run)."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import GROUP_OF

TESTS = Path(__file__).resolve().parent


def _reads_stock_batch(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(a.arg == "stock_batch" for a in node.args.args)
        for node in ast.walk(tree)
    )


def test_every_reader_of_the_stock_batch_is_in_its_group():
    readers = {f"tests/{p.name}" for p in TESTS.glob("*.py") if p.name != "conftest.py" and _reads_stock_batch(p)}
    assert len(readers) >= 5, readers  # the scan finds them (test_grading_fixtures, test_ontime, ...)
    assert {m: GROUP_OF.get(m) for m in readers} == dict.fromkeys(readers, "grading-batches")
