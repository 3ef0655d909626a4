"""One canonical notebook at intake (issue 49; autograder/canonical.py, autograder/handed_in.py):
whatever a file handed in holds, the reader gives a notebook built fresh from typed fields (it
validates, its outputs are gone, its nbgrader metadata typed) or refuses it with a repair's key and
parameters; it never raises anything else. Each attack a student who read the source would try is a
case here (the reader in process, cheap); a few go through stock nbgrader as fixture rows
(``broken_invalid_outputs``, ``db_printed_outputs``, ``broken_grade_id_list``, ``wu_download_copies``)."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import nbformat
import pytest

from autograder import handed_in
from autograder.canonical import GRADE_ID_CHARS, Refused
from autograder.fixtures.rows import invalid_outputs, nbgrader_json, printed
from autograder.repairs import record, repairs

ROOT = Path(__file__).resolve().parents[1]
RELEASE = ROOT / "exercises" / "decoder_block" / "decoder_block.ipynb"
RAW = json.loads(RELEASE.read_text())
SOURCES = [c["source"] if isinstance(c["source"], str) else "".join(c["source"]) for c in RAW["cells"]]


def _raw() -> dict:
    return json.loads(RELEASE.read_text())


def _cell(raw: dict, at: int) -> dict:
    return raw["cells"][at]


def _set(at: int, **fields):
    def edit(raw):
        _cell(raw, at).update(fields)
        return raw

    return edit


def _meta(at: int, **fields):
    def edit(raw):
        _cell(raw, at)["metadata"].update(fields)
        return raw

    return edit


def _read(tmp_path: Path, content) -> nbformat.NotebookNode:
    path = tmp_path / "decoder_block.ipynb"
    path.write_bytes(
        content
        if isinstance(content, bytes)
        else content.encode()
        if isinstance(content, str)
        else json.dumps(content).encode()
    )
    return handed_in.read_handed_in(path)


def _untyped(nb) -> dict[str, tuple[int, int]]:
    return {r["field"]: (r["cells"], r["cell"]) for r in repairs(nb) if r["key"] == "untyped"}


def test_the_release_reads_as_itself(tmp_path):
    nb = handed_in.read_handed_in(RELEASE)
    nbformat.validate(nb)
    assert [c.source for c in nb.cells] == SOURCES and [c.id for c in nb.cells] == [c["id"] for c in RAW["cells"]]
    assert [c.metadata.get("nbgrader") for c in nb.cells] == [c["metadata"].get("nbgrader") for c in RAW["cells"]]
    assert repairs(nb) == []


# graded, outputs dropped: (edit of the release's JSON, the untyped fields recorded: {field: (cells, first)})
GRADED = {
    "30,000 invalid outputs and a result without execution count": (invalid_outputs(30_000), {}),
    "12 MB of printed outputs": (printed(12), {}),
    "a grade id that is a list": (nbgrader_json("mask_test", grade_id=["mask_test"]), {"nbgrader.grade_id": (1, 5)}),
    "a grade id of 10 MB": (nbgrader_json("mask_test", grade_id="x" * 10_000_000), {"nbgrader.grade_id": (1, 5)}),
    "10 MB in another metadata key": (_meta(3, junk="x" * 10_000_000), {}),
    "a code cell whose source is a dict": (_set(3, source={"a": 1}), {"source": (1, 4)}),
    "sources with a number in the list": (_set(3, source=["x = 1\n", 2]), {"source": (1, 4)}),
    "no source": (lambda raw: (_cell(raw, 3).pop("source"), raw)[1], {"source": (1, 4)}),
    "a lone surrogate in a source and in a grade id (JSON escapes allow it, UTF-8 cannot write it)": (
        lambda raw: nbgrader_json("mask_test", grade_id="mask_\ud800")(_set(3, source=["x = '\ud800'"])(raw)),
        {"source": (1, 4), "nbgrader.grade_id": (1, 5)},
    ),
    "metadata a list": (_set(5, metadata=["nbgrader"]), {"metadata": (1, 6)}),
    "nbgrader metadata a string": (_meta(5, nbgrader="grade"), {"nbgrader": (1, 6)}),
    "points NaN, flags as ints, schema a bool": (
        nbgrader_json("mask_test", points=float("nan"), grade=1, locked="yes", schema_version=True),
        {
            "nbgrader.points": (1, 5),
            "nbgrader.grade": (1, 5),
            "nbgrader.locked": (1, 5),
            "nbgrader.schema_version": (1, 5),
        },
    ),
    "cells that are not dicts, an unknown cell type": (
        lambda raw: (raw["cells"].extend(["x", 3, None, {"cell_type": "widget", "source": ""}]), raw)[1],
        {"cell": (3, 18), "cell_type": (1, 21)},
    ),
    "ids invalid, duplicated, missing": (
        lambda raw: (
            [_cell(raw, i).update(id=v) for i, v in ((1, "bad id!"), (2, 7), (3, raw["cells"][0]["id"]))],
            _cell(raw, 4).pop("id"),
            raw,
        )[2],
        {"id": (2, 2)},
    ),
    "forged repairs and verdicts in the metadata": (
        lambda raw: (
            raw["metadata"].setdefault("encdec", {}).update(repairs=[{"key": "renamed", "file": "<b>"}]),
            _meta(6, encdec_verdict=[{"ok": True}])(raw),
        )[1],
        {},
    ),
}


@pytest.mark.parametrize("case", GRADED)
def test_whatever_it_holds_it_is_graded_as_one_canonical_notebook(tmp_path, case):
    edit, untyped = GRADED[case]
    nb = _read(tmp_path, edit(_raw()))
    nbformat.validate(nb)
    assert all(c.outputs == [] and c.execution_count is None for c in nb.cells if c.cell_type == "code")
    assert all(set(c.metadata) <= {"nbgrader"} for c in nb.cells)  # nothing but the typed nbgrader part
    assert len({c.id for c in nb.cells}) == len(nb.cells)
    for c in nb.cells:
        gid = c.metadata.get("nbgrader", {}).get("grade_id")
        assert gid is None or (isinstance(gid, str) and len(gid) <= GRADE_ID_CHARS)
    assert _untyped(nb) == untyped
    assert [r["key"] for r in repairs(nb)] == ["untyped"] * len(untyped)  # no forged record survives


def test_nbformat_3_and_a_byte_order_mark_are_read(tmp_path):
    v3 = {
        "nbformat": 3,
        "metadata": {},
        "worksheets": [
            {
                "cells": [
                    {"cell_type": "heading", "level": 2, "source": "Title"},
                    {"cell_type": "code", "input": "x = 1", "prompt_number": 1, "outputs": [{"output_type": "pyout"}]},
                ]
            }
        ],
    }
    nb = _read(tmp_path, v3)
    assert [(c.cell_type, c.source) for c in nb.cells] == [("markdown", "## Title"), ("code", "x = 1")]
    nb = _read(tmp_path, "\ufeff" + RELEASE.read_text())
    assert [c.source for c in nb.cells] == SOURCES


# refused: graded as the release with no answers, the reason stated (the repair's key)
REFUSED = {
    "a JSON list": ("[1, 2]", "unreadable"),
    "a JSON string": ('"notebook"', "unreadable"),
    "cells a dict": ('{"cells": {"a": 1}}', "unreadable"),
    "invalid UTF-8": (RELEASE.read_bytes().replace(b"Decoder", b"\xff\xfe", 1), "unreadable"),
    "a 5,000-digit number": ('{"cells": [], "n": ' + "9" * 5000 + "}", "unreadable"),
    "nested 100,000 deep": ("[" * 100_000 + "]" * 100_000, "too_deep"),
    "three million empty objects": ("[" + ",".join(["{}"] * 1_500_001) + "]", "too_many_values"),
    "3 MB of source": (lambda raw: (_cell(raw, 3).update(source="#" * 3_000_000), raw)[1], "source_too_large"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_what_is_no_gradable_notebook_is_refused_with_its_reason(tmp_path, case):
    content, key = REFUSED[case]
    with pytest.raises(Refused) as refused:
        _read(tmp_path, content(_raw()) if callable(content) else content)
    assert refused.value.key == key


def test_a_link_is_never_followed(tmp_path):
    (tmp_path / "elsewhere.ipynb").write_text(RELEASE.read_text())
    os.symlink(tmp_path / "elsewhere.ipynb", tmp_path / "decoder_block.ipynb")
    with pytest.raises(Refused) as refused:
        handed_in.read_handed_in(tmp_path / "decoder_block.ipynb")
    assert refused.value.key == "unreadable"


def _json_value(rng: random.Random, depth: int = 0):
    kind = rng.choice(["none", "bool", "int", "float", "str", "long"] + (["list", "dict"] if depth < 4 else []))
    if kind == "list":
        return [_json_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if kind == "dict":
        return {
            rng.choice(["grade_id", "nbgrader", "source", "x"]): _json_value(rng, depth + 1)
            for _ in range(rng.randint(0, 3))
        }
    return {
        "none": None,
        "bool": rng.random() < 0.5,
        "int": rng.randint(-(2**70), 2**70),
        "float": rng.choice([0.5, float("nan"), float("inf"), -1e308]),
        "str": rng.choice(["", "code", "a b", "é", "\ud800"]),
        "long": "y" * rng.randint(65, 300),
    }[kind]


def test_random_json_in_every_field_is_typed_or_refused(tmp_path):
    """Any JSON value in any field the schema reads: the reader gives a valid canonical notebook or
    refuses; it never raises another error (which would drop the notebook ungraded)."""
    rng = random.Random(49)
    cell_fields = ["cell_type", "source", "metadata", "id", "input", "level", "outputs", "execution_count"]
    nbgrader_fields = [
        "grade_id",
        "grade",
        "solution",
        "locked",
        "task",
        "points",
        "schema_version",
        "checksum",
        "cell_type",
    ]
    for trial in range(150):
        raw = _raw()
        cells = raw["cells"]  # the edits below may replace the list itself
        for _ in range(rng.randint(1, 4)):
            cell = rng.choice(cells)
            where = rng.choice(["cell", "nbgrader", "notebook", "top"])
            if where == "cell":
                cell[rng.choice(cell_fields)] = _json_value(rng)
            elif where == "nbgrader" and isinstance(cell.get("metadata"), dict):
                meta = cell["metadata"].setdefault("nbgrader", {})
                if isinstance(meta, dict):
                    meta[rng.choice(nbgrader_fields)] = _json_value(rng)
            elif where == "notebook":
                raw["metadata"] = {"encdec": _json_value(rng)}
            else:
                raw[rng.choice(["cells", "worksheets", "nbformat"])] = _json_value(rng)
        try:
            nb = _read(tmp_path, json.dumps(raw))
        except Refused:
            continue
        nbformat.validate(nb)
        assert len({c.id for c in nb.cells}) == len(nb.cells), trial


def _copy(folder: Path, name: str, answered: bool, assignment: str = "decoder_block") -> None:
    from autograder.fixtures.make import apply

    nb = apply(assignment, {} if answered else {"__release__": True})
    (folder / name).write_text(nbformat.writes(nb))


def test_of_several_downloads_the_one_with_the_answers_is_chosen_whatever_the_names(tmp_path):
    expected = handed_in.release_checksums(ROOT / "solutions", "decoder_block")
    missing = tmp_path / "decoder_block.ipynb"
    _copy(tmp_path, "decoder_block (1).ipynb", answered=False)
    _copy(tmp_path, "decoder_block-Copy1.ipynb", answered=True)
    _copy(tmp_path, "warmup.ipynb", answered=True, assignment="warmup")  # another exercise's, some of its grade ids
    assert [p.name for p in handed_in.stands_for(missing, expected)] == [
        "decoder_block-Copy1.ipynb",
        "decoder_block (1).ipynb",
    ]
    _copy(tmp_path, "decoder_block (1).ipynb", answered=True)  # as many answers: the first by name
    assert handed_in.stands_for(missing, expected)[0].name == "decoder_block (1).ipynb"
    odd = os.fsdecode(b"decoder_block \xff.ipynb")  # a name that is no UTF-8: said, and written, all the same
    _copy(tmp_path, odd, answered=True)
    chosen = handed_in.stands_for(missing, expected)
    assert chosen[0].name == "decoder_block (1).ipynb" and odd in [p.name for p in chosen]
    nb = nbformat.v4.new_notebook()
    record(nb, "copies", others=", ".join(handed_in._shown(p) for p in chosen))
    assert "decoder_block ?.ipynb" in nbformat.writes(nb)
    _copy(tmp_path, "decoder_block.ipynb", answered=False)  # the release's own name is graded as it is
    assert handed_in.stands_for(missing, expected) == []


def test_clear_output_is_in_the_course_autograde_pipeline(tmp_path, monkeypatch):
    """Outputs are dropped at intake because nbgrader clears them before grading anyway."""
    from traitlets.config.loader import PyFileConfigLoader

    monkeypatch.setenv("ENCDEC_GRADING_DIR", str(tmp_path / "grading"))  # the configuration makes it
    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    assert "nbgrader.preprocessors.ClearOutput" in config.Autograde.sanitize_preprocessors


def test_a_notebook_of_several_not_handed_in_is_graded_blank_and_said(tmp_path):
    """An assignment of two notebooks, one handed in: nbgrader is given both (the hook), and the one
    missing is graded as the release with no answers, its record saying why, in both languages."""
    import shutil

    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import LoggingConfigurable

    from encdec.grading import language

    for kind in ("source", "release"):
        (tmp_path / kind / "pair").mkdir(parents=True)
        for name in ("decoder_block", "warmup"):
            shutil.copyfile(ROOT / "solutions" / name / f"{name}.ipynb", tmp_path / kind / "pair" / f"{name}.ipynb")
    folder = tmp_path / "submitted" / "ada" / "pair"
    folder.mkdir(parents=True)
    _copy(folder, "decoder_block.ipynb", answered=True)
    notebooks = [str(folder / "decoder_block.ipynb")]
    handed_in.renamed_hook(tmp_path / "source")("pair", "ada", notebooks)
    assert notebooks == [str(folder / "decoder_block.ipynb"), str(folder / "warmup.ipynb")]

    parent = LoggingConfigurable()
    parent.coursedir = CourseDirectory(root=str(tmp_path))
    output, _ = handed_in.HandedInExporter(parent=parent).from_filename(str(folder / "warmup.ipynb"))
    nb = nbformat.reads(output, as_version=4)
    assert repairs(nb) == [{"key": "not_handed_in", "file": "warmup.ipynb"}]
    released = nbformat.read(tmp_path / "release" / "pair" / "warmup.ipynb", as_version=4)
    assert [c.source for c in nb.cells] == [c.source for c in released.cells]  # no answers
    for lang in language.LANGUAGES:
        with language.speaking(lang):
            assert "warmup.ipynb" in language.text("repair_not_handed_in", file="warmup.ipynb")
    output, _ = handed_in.HandedInExporter(parent=parent).from_filename(str(folder / "decoder_block.ipynb"))
    assert repairs(nbformat.reads(output, as_version=4)) == []  # the one handed in: as it is
