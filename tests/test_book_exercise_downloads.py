"""The chapters' exercise downloads (book/exercise_downloads.py): a zip per exercise and release
language with everything the notebook needs (its reference files, the folder's nbgrader config, a
README that says how to install the package) and nothing of the solutions; unpacked, the
notebook's visible checks find their inputs."""

from __future__ import annotations

import re
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book"))

import exercise_downloads  # noqa: E402 (after the sys.path line that lets it be found)

from autograder import assignments  # noqa: E402 (after the sys.path line that lets it be found)
from autograder.fixtures.make import solution_sources  # noqa: E402 (after the sys.path line that lets it be found)


@pytest.fixture(scope="module")
def zips(tmp_path_factory):
    out = tmp_path_factory.mktemp("downloads")
    return out, exercise_downloads.build(out)


def test_one_zip_per_exercise_and_language(zips):
    out, written = zips
    names = assignments.names()
    assert sorted(p.relative_to(out).as_posix() for p in written) == sorted(
        [f"{a}.zip" for a in names] + [f"zh/{a}.zip" for a in names]
    )


@pytest.mark.parametrize("lang", ["", "zh"])
@pytest.mark.parametrize("assignment", assignments.names())
def test_a_zip_holds_the_release_folder_and_no_solution(zips, assignment, lang):
    out, _ = zips
    release = ROOT / "exercises" / lang / assignment
    with zipfile.ZipFile(out / lang / f"{assignment}.zip") as z:
        names = set(z.namelist())
        text = {n: z.read(n).decode("utf-8", "replace") for n in names if not n.endswith(".npz")}
    refs = {f"{assignment}/reference/{p.name}" for p in (release / "reference").glob("*.npz")}
    assert refs and refs <= names
    assert {f"{assignment}/{assignment}.ipynb", f"{assignment}/nbgrader_config.py", f"{assignment}/README.md"} <= names
    readme = text[f"{assignment}/README.md"]
    assert "pip install" in readme and "reference/" in readme
    assert bool(re.search(r"[\u4e00-\u9fff]", readme)) == (lang == "zh")
    everything = "\n".join(text.values())
    assert "BEGIN SOLUTION" not in everything and "BEGIN HIDDEN TESTS" not in everything
    assert not re.search(r'run\(\\?"\w+\.\w+_hidden', everything)  # no hidden check's call
    for source in solution_sources(assignment).values():  # no line of an instructor's solution
        body = [
            ln.strip()
            for ln in source.splitlines()
            if ln.strip() and not ln.lstrip().startswith(("def ", "class ", '"""', "#", "@"))
        ]
        assert not any(line in everything for line in body if len(line) > 25), assignment


def test_unpacked_the_visible_checks_find_their_inputs(zips, tmp_path):
    """The stub's first visible check, run from the unpacked folder: "not implemented yet", never
    "no inputs for this check"."""
    from nbclient import NotebookClient

    out, _ = zips
    with zipfile.ZipFile(out / "target_slicing.zip") as z:
        z.extractall(tmp_path)
    folder = tmp_path / "target_slicing"
    nb = nbformat.read(folder / "target_slicing.ipynb", as_version=4)
    first_test = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade"))
    nb.cells = nb.cells[: first_test + 1]
    NotebookClient(nb, timeout=120, allow_errors=True, resources={"metadata": {"path": str(folder)}}).execute()
    said = " ".join(o.get("evalue", "") + o.get("text", "") for o in nb.cells[first_test].outputs)
    assert "not implemented yet" in said and "no inputs" not in said


@pytest.mark.parametrize(
    "page,assignment,prefix",
    [
        ("ch11_cross_attention", "decoder_block", ""),
        ("ch12_what_you_trained", "target_slicing", ""),
        ("ch13_generation", "kv_cache", ""),
        ("zh/ch11_cross_attention", "decoder_block", "zh/"),
        ("zh/ch12_what_you_trained", "target_slicing", "zh/"),
        ("zh/ch13_generation", "kv_cache", "zh/"),
        *(
            (page, name, prefix)
            for page, prefix in (("index", ""), ("zh/index", "zh/"))
            for name in ("warmup", "decoder_block", "target_slicing", "kv_cache")
        ),
    ],
)
def test_chapters_link_the_zip_not_a_lone_notebook(page, assignment, prefix):
    text = (ROOT / "book" / f"{page}.md").read_text(encoding="utf-8")
    assert f"build/exercise_downloads/{prefix}{assignment}.zip>`" in text
    assert f"{assignment}.ipynb>`" not in text
