"""The pages import the package instead of redefining it, show its code only through
``literalinclude`` targets that exist, fold the exercises' reference solutions, and never train.

Fast: reads the markdown sources, builds nothing (helpers in book_pages.py).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from book_pages import (
    ALL_PAGES,
    BOOK,
    EXERCISE_TARGETS,
    FENCE,
    NOTEBOOK_PAGES,
    PACKAGE,
    blocks,
    code_cells,
    find_pyobject,
    nested_blocks,
    package_names,
    read,
)


@pytest.mark.parametrize("page", NOTEBOOK_PAGES)
def test_code_cells_parse_and_never_redefine_the_package(page):
    classes, functions = package_names()
    assert {"DecoderBlock", "Transformer", "KVCache"} <= classes and "get_subsequent_mask" in functions
    for cell in code_cells(read(page)):
        tree = ast.parse(cell)  # every cell is valid Python
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                assert node.name not in classes, f"{page} redefines class {node.name}"
            if isinstance(node, ast.FunctionDef):
                assert node.name not in functions, f"{page} redefines function {node.name}"


@pytest.mark.parametrize("page", ALL_PAGES)
def test_literalincludes_point_at_package_objects(page):
    includes = [(info, body) for info, body, _ in nested_blocks(read(page)) if info.startswith("{literalinclude}")]
    for info, body in includes:
        target = (BOOK / info.split(None, 1)[1].strip()).resolve()
        assert target.is_file(), f"{page}: {target} does not exist"
        assert PACKAGE in target.parents, f"{page}: includes {target}, outside the package"
        options = dict(re.findall(r"^:(\w+):\s*(.*)$", body, flags=re.M))
        assert "pyobject" in options, f"{page}: literalinclude of {target.name} without :pyobject:"
        assert find_pyobject(target, options["pyobject"]), f"{page}: {options['pyobject']} not in {target.name}"


def test_chapters_show_the_lesson_code_through_literalinclude():
    expected = {
        "ch11_cross_attention": {("model.py", "DecoderBlock.forward"), ("attention.py", "get_subsequent_mask")},
        "ch12_what_you_trained": {("model.py", "Transformer.forward"), ("model.py", "shift_targets")},
        "ch13_generation": {
            ("generate.py", "greedy_decode"),
            ("attention.py", "KVCache"),
            ("broken.py", "attention_mask_after_softmax"),
        },
        "historical_notes": {("model.py", "position_encoding_sinusoid")},
    }
    for page, wanted in expected.items():
        found = set()
        for info, body, _ in nested_blocks(read(page)):
            if info.startswith("{literalinclude}"):
                pyobject = re.search(r"^:pyobject:\s*(\S+)", body, flags=re.M)
                found.add((Path(info.split(None, 1)[1]).name, pyobject.group(1) if pyobject else None))
        assert wanted <= found, f"{page}: missing {wanted - found}"


def test_training_never_runs_at_build_time():
    for page in NOTEBOOK_PAGES:
        code = "\n".join(code_cells(read(page)))
        assert not re.search(r"(?<![.\w])train\(", code), f"{page} calls encdec.train.train"
        assert "torch.optim" not in code and "python -m encdec.train" not in code, f"{page} trains"


def test_cross_references_resolve():
    for page in ALL_PAGES:
        for named, bare in re.findall(r"\{doc\}`(?:[^`<]*<([^>`]+)>|([^`<]+))`", read(page)):
            target = (named or bare).strip()  # {doc}`text <target>` or {doc}`target`
            assert (BOOK / f"{target}.md").is_file(), f"{page}: {{doc}}`{target}` points nowhere"


@pytest.mark.parametrize("page", list(EXERCISE_TARGETS))
def test_exercise_targets_are_folded_reference_solutions(page):
    assignment, targets = EXERCISE_TARGETS[page]
    top = blocks(read(page))
    unfolded = {
        re.search(r"^:pyobject:\s*(\S+)", body, flags=re.M).group(1)
        for info, body, _ in top
        if info.startswith("{literalinclude}")
    }
    assert not targets & unfolded, f"{page} prints the answer unfolded: {targets & unfolded}"
    folded = [i for i, (info, _, _) in enumerate(top) if info.startswith("{dropdown}") and "Reference solution" in info]
    assert len(folded) == 1, f"{page}: expected one reference-solution dropdown"
    i = folded[0]
    shown = {
        re.search(r"^:pyobject:\s*(\S+)", body, flags=re.M).group(1)
        for info, body, _ in nested_blocks(top[i][1])
        if info.startswith("{literalinclude}")
    }
    assert shown == targets, f"{page}: the reference solution shows {shown}, expected {targets}"
    info, body, _ = top[i - 1]  # the block right before the dropdown
    assert info.startswith("{admonition} Exercise"), f"{page}: no exercise box before the reference solution"
    # the exercise's zip (the notebook, its reference/ and how to install the package), made by the build
    link = re.search(r"\{download\}`[^`<]*<(\.\./build/exercise_downloads/[^>]+\.zip)>`", body)
    assert link and link.group(1) == f"../build/exercise_downloads/{assignment}.zip", (
        f"{page}: box does not link the exercise"
    )


@pytest.mark.parametrize("page", ALL_PAGES)
def test_no_backtick_in_a_backtick_fence_title(page):
    """CommonMark ends such a fence's info string early: the directive renders as plain text, silently."""
    for line in read(page).splitlines():
        m = FENCE.match(line)
        if m and m.group(1).startswith("`"):
            assert "`" not in m.group(2), f"{page}: {line!r}"


def test_every_exercise_has_a_download_link_on_the_welcome_page():
    """The welcome page offers each exercise as its chapter does: the zip of its folder (a lone notebook's
    visible checks find no reference inputs)."""
    released = sorted(p.name for p in (BOOK.parent / "exercises").iterdir() if (p / f"{p.name}.ipynb").is_file())
    links = re.findall(r"\{download\}`(\w+)\.zip <\.\./build/exercise_downloads/(\w+)\.zip>`", read("index"))
    assert released and sorted(name for _, name in links) == released, links
    assert all(shown == name for shown, name in links)
    assert ".ipynb>`" not in read("index")
