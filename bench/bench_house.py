"""The grader's size, as a newcomer meets it: its lines, its largest files, and the project modules
each step of grading imports.

    python bench/bench_house.py

prints
1. the Python lines of ``autograder/`` without its fixtures (every line, and the code alone: no
   blank line, comment or docstring) and the project's files over 400 lines;
2. the project modules (``autograder``, ``encdec``) that loading ``nbgrader_config.py`` imports;
3. the project modules the grader's process imports for ``nbgrader autograde`` and then
   ``nbgrader generate_feedback`` of one decoder_block submission (the fixture that passes every
   check), in a scratch copy of the course, read from ``python -X importtime``.

The targets are the house's (issue 53): under 10,000 lines, no file over 400, fewer modules on the
grading path than 64.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
PROJECT = ("autograder", "encdec")
FIXTURE, ASSIGNMENT = "db_pass_all", "decoder_block"


def lines() -> tuple[int, int, list[tuple[int, str]]]:
    """(every line, code lines) of autograder/ without fixtures, and the project's files over 400 lines."""
    every = code = 0
    for path in sorted((ROOT / "autograder").rglob("*.py")):
        if "fixtures" in path.relative_to(ROOT).parts:
            continue
        text = path.read_text()
        rows = text.splitlines()
        docs = sum(
            node.body[0].end_lineno - node.body[0].lineno + 1
            for node in ast.walk(ast.parse(text))
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
            and isinstance(node.body[0].value.value, str)
        )
        every += len(rows)
        code += sum(1 for r in rows if r.strip() and not r.strip().startswith("#")) - docs
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    long = []
    for name in tracked.split():
        if name.endswith((".py", ".js")) and not name.startswith(("tests/", "autograder/fixtures/")):
            n = len((ROOT / name).read_text(errors="replace").splitlines()) if (ROOT / name).is_file() else 0
            if n > 400:
                long.append((n, name))
    return every, code, sorted(long, reverse=True)


def imported(stderr: str) -> set[str]:
    """The project modules a ``-X importtime`` report names."""
    found = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            name = line.rsplit("|", 1)[1].strip()
            if name.split(".", 1)[0] in PROJECT:
                found.add(name)
    return found


def config_modules() -> set[str]:
    code = "from traitlets.config.loader import PyFileConfigLoader; PyFileConfigLoader('nbgrader_config.py', path='.').load_config()"
    run = subprocess.run([PY, "-X", "importtime", "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return imported(run.stderr)


def grading_modules() -> dict[str, set[str]]:
    """Step -> the project modules its process imports, in a scratch copy of the course."""
    from autograder.fixtures.make import built
    from autograder.state import grading_state

    base = Path(tempfile.mkdtemp(prefix="bench-house-"))
    try:
        base.chmod(0o700)
        course = base / "course"
        course.mkdir()
        shutil.copy(ROOT / "nbgrader_config.py", course)
        shutil.copytree(ROOT / "solutions", course / "solutions")
        shutil.copytree(ROOT / "autograder", course / "autograder", ignore=shutil.ignore_patterns("__pycache__"))
        nbgrader = [PY, "-m", "nbgrader"]
        subprocess.run(
            [*nbgrader, "generate_assignment", ASSIGNMENT, "--force"], cwd=course, capture_output=True, check=True
        )
        folder = grading_state(course).submitted / "alice" / ASSIGNMENT
        folder.mkdir(parents=True)
        shutil.copy(next(built().glob(f"**/{FIXTURE}/{ASSIGNMENT}.ipynb")), folder / f"{ASSIGNMENT}.ipynb")
        steps = {}
        for step in ("autograde", "generate_feedback"):
            run = subprocess.run(
                [PY, "-X", "importtime", "-m", "nbgrader", step, ASSIGNMENT], cwd=course, capture_output=True, text=True
            )
            if run.returncode != 0:
                raise SystemExit(f"nbgrader {step} failed:\n{run.stderr[-3000:]}")
            steps[step] = imported(run.stderr)
        return steps
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main() -> None:
    every, code, long = lines()
    print(f"autograder/ without fixtures: {every} lines ({code} of code); target under 10,000")
    print(f"project files over 400 lines: {len(long)}" + "".join(f"\n  {n} {name}" for n, name in long))
    print(f"loading nbgrader_config.py imports {len(config_modules())} project modules")
    steps = grading_modules()
    for step, modules in steps.items():
        print(f"nbgrader {step}: {len(modules)} project modules")
    print(
        f"the grading path, autograde then feedback: {len(set().union(*steps.values()))} project modules; target under 64"
    )


if __name__ == "__main__":
    main()
