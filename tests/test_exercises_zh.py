"""The exercises in Chinese (issue 14): ``exercises/zh/`` is generated from the English sources
and ``solutions/<a>/zh.yml`` (``python -m autograder.release --lang zh``, ``make exercises-zh``),
speaks Chinese in its instructions and feedback, and grades exactly as the English release."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
import torch

from autograder import assignments as course
from autograder import grade_fixtures, release
from autograder.fixtures import table
from autograder.state import GradingState
from encdec.grading import checks, language
from encdec.grading.misconceptions import MISCONCEPTIONS
from encdec.grading.misconceptions_zh import MISCONCEPTIONS_ZH

pytestmark = pytest.mark.grading
ROOT = Path(__file__).resolve().parents[1]
ZH = ROOT / "exercises" / "zh"
NAMES = course.names()
CJK = re.compile(r"[\u4e00-\u9fff]")
MANIFEST = table.grading()
# fixture -> what the Chinese feedback must say (whitespace ignored): a pass, a named mistake in
# each assignment, a crash, partial credit
GRADED = {
    "db_pass_all": None,
    "db_bug_mask_after_softmax": MISCONCEPTIONS_ZH["mask_after_softmax"],
    "broken_raises": "没有运行到最后",
    "ts_bug_shift_labels_not_sliced": "部分通过（由批改程序检查）",
    "kv_bug_encoder_every_step": MISCONCEPTIONS_ZH["encoder_every_step"],
    "wu_bug_top_p_crossing_token": MISCONCEPTIONS_ZH["top_p_crossing_token"],  # the warm-up's stretch part
}
# ENCDEC_ZH_ALL=1 (`make zh-check`, about 10 minutes): every fixture of the table, not only those
ALL = os.environ.get("ENCDEC_ZH_ALL") == "1"


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _nb(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _squash(text: str) -> str:
    return "".join(text.split())


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory):
    out = tmp_path_factory.mktemp("zh-release")
    release.release("zh", out)
    return out


def test_zh_release_regenerates_from_its_sources(regenerated):
    for a in NAMES:
        assert _files(regenerated / a) == _files(ZH / a), f"exercises/zh/{a} is stale: run `make exercises-zh`"


@pytest.mark.parametrize("assignment", NAMES)
def test_zh_release_has_the_english_code_and_chinese_markdown(assignment):
    en, zh = _nb(ROOT / "exercises" / assignment / f"{assignment}.ipynb"), _nb(ZH / assignment / f"{assignment}.ipynb")
    assert [c["id"] for c in en["cells"]] == [c["id"] for c in zh["cells"]]
    for e, z in zip(en["cells"], zh["cells"]):
        assert e["cell_type"] == z["cell_type"]
        if e["cell_type"] == "markdown":
            assert CJK.search("".join(z["source"])), f"markdown cell {z['id']} is not in Chinese"
        else:  # code, solution stubs and test cells: the same source, grade ids, points, checksums
            assert (e["source"], e["metadata"]) == (z["source"], z["metadata"])
    assert zh["metadata"]["encdec"] == {**en["metadata"]["encdec"], "language": "zh"}
    assert {k: v for k, v in zh["metadata"].items() if k != "encdec"} == {
        k: v for k, v in en["metadata"].items() if k != "encdec"
    }
    # the release's visible checks: the English ones, speaking Chinese
    from encdec.grading import wire

    for ref in sorted((ROOT / "exercises" / assignment / "reference").glob("*.npz")):
        meta_en, arrays_en = wire.load(ref)
        meta_zh, arrays_zh = wire.load(ZH / assignment / "reference" / ref.name)
        assert meta_zh == {**meta_en, "language": "zh"}
        assert arrays_zh.keys() == arrays_en.keys()


def test_a_markdown_cell_without_its_translation_stops_the_release(tmp_path):
    a = NAMES[0]
    shutil.copytree(ROOT / "solutions" / a, tmp_path / a, ignore=shutil.ignore_patterns("reference"))
    table = (tmp_path / a / "zh.yml").read_text(encoding="utf-8")
    first = next(iter(release.translations(a, "zh", tmp_path)))
    (tmp_path / a / "zh.yml").write_text(table.replace(f'"{first}":', '"not-a-cell":'), encoding="utf-8")
    with pytest.raises(ValueError, match=first):
        release.translated_source(a, "zh", tmp_path)


def test_every_message_and_misconception_has_a_chinese_text():
    assert MISCONCEPTIONS_ZH.keys() == MISCONCEPTIONS.keys()
    assert all(CJK.search(t) for t in MISCONCEPTIONS_ZH.values())
    assert language.MESSAGES["zh"].keys() == language.MESSAGES["en"].keys()
    for key, en in language.MESSAGES["en"].items():  # the same fields in both
        assert set(re.findall(r"{(\w+)", en)) == set(re.findall(r"{(\w+)", language.MESSAGES["zh"][key])), key


def test_every_check_title_is_in_chinese_or_code():
    from autograder import judge

    for check in judge.checks().values():
        with language.speaking("zh"):
            title = language.term(check.title)
        assert CJK.search(title) or re.fullmatch(r"[\w.]+", title), f"{check.id}: add its title to language.TERMS"


def test_own_run_of_the_chinese_release_diagnoses_in_chinese(tmp_path):
    """A student of the Chinese release runs a visible check on a known mistake (the mask after softmax)."""
    shutil.copytree(ZH / "decoder_block" / "reference", tmp_path / "reference")

    def masked_softmax(scores, mask):
        return torch.softmax(scores, dim=-1).masked_fill(mask, 0.0)

    with pytest.raises(AssertionError) as err:
        checks.run("decoder_block.masked_softmax", masked_softmax, tmp_path)
    text = str(err.value)
    assert "诊断" in text and _squash(MISCONCEPTIONS_ZH["mask_after_softmax"]) in _squash(text)
    assert "Diagnosis" not in text and language.current() == "en"  # nothing leaks into later runs

    def stub(scores, mask):
        raise NotImplementedError()

    with pytest.raises(AssertionError, match="尚未实现"):
        checks.run("decoder_block.masked_softmax", stub, tmp_path)


def test_own_run_lines_of_the_chinese_release_have_no_english_sentence(tmp_path, capsys):
    """The lines the kernel writes without a stored file of the check's own: a hidden check run
    outside grading, a visible check whose reference file is missing, a graded run. They speak the
    release's language (its other reference files say it); the English release keeps its words."""
    from test_feedback_zh import english_runs

    from autograder import judge
    from autograder.preprocessors import deliver

    def softmax(scores, mask):
        return torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)

    said = {}
    for lang, refs in (("en", ROOT / "exercises" / "decoder_block"), ("zh", ZH / "decoder_block")):
        wd = tmp_path / lang
        shutil.copytree(refs / "reference", wd / "reference")
        (wd / "reference" / "decoder_block.masked_softmax.npz").unlink()  # the student lost one file
        checks.run("decoder_block.softmax_hidden", softmax, wd)
        with pytest.raises(FileNotFoundError) as err:
            checks.run("decoder_block.masked_softmax", softmax, wd)
        deliver(
            wd,
            "decoder_block.masked_softmax",
            judge.wire_bytes("decoder_block.masked_softmax", judge.graded_inputs("decoder_block.masked_softmax", 1)),
        )
        checks.run("decoder_block.masked_softmax", softmax, wd)
        said[lang] = capsys.readouterr().out + str(err.value)
        assert language.current() == "en"
    for lang in said:
        with language.speaking(lang):
            lines = [
                language.text("hidden_own_run", check_id="decoder_block.softmax_hidden"),
                language.text("no_reference", check_id="decoder_block.masked_softmax"),
                language.text("graded_run_done", check_id="decoder_block.masked_softmax"),
            ]
        assert all(line in said[lang] for line in lines), (lang, said[lang])
    assert not CJK.search(said["en"]) and "hidden check decoder_block.softmax_hidden:" in said["en"]
    assert CJK.search(said["zh"]) and not english_runs(said["zh"]), said["zh"]


def _saved(check_id: str, impl, workdir: Path) -> tuple[bytes | None, dict]:
    """A graded run's kernel side (grading_support.graded without the verdict): inputs, outputs."""
    from autograder import judge
    from autograder.preprocessors import deliver, withdraw

    inputs = judge.graded_inputs(check_id, 12345)
    deliver(workdir, check_id, judge.wire_bytes(check_id, inputs))
    try:
        checks.run(check_id, impl, workdir)
    except AssertionError:
        pass
    return withdraw(workdir, check_id), inputs


@pytest.mark.parametrize(
    "check_id,impl,said",
    ids=["named", "partial", "stub", "passed"],
    argvalues=[
        (
            "decoder_block.masked_softmax",
            lambda s, m: torch.softmax(s, dim=-1).masked_fill(m, 0.0),
            MISCONCEPTIONS_ZH["mask_after_softmax"],
        ),
        ("target_slicing.shift", lambda a: (a[:, :-1], a), MISCONCEPTIONS_ZH["labels_not_sliced"]),  # partial credit
        ("target_slicing.shift", lambda a: (_ for _ in ()).throw(NotImplementedError()), "尚未实现"),
        ("target_slicing.shift", lambda a: (a[:, :-1], a[:, 1:]), "与参考结果一致"),
    ],
)
def test_the_grader_decides_in_english_and_words_it_in_chinese(check_id, impl, said, tmp_path):
    from autograder import judge
    from autograder.preprocessors import verdict_outputs as _verdict_outputs

    saved, inputs = _saved(check_id, impl, tmp_path)
    en, zh = judge.verify(check_id, saved, inputs), judge.verify(check_id, saved, inputs, "zh")
    assert (en.ok, en.parts, en.label, en.credit) == (zh.ok, zh.parts, zh.label, zh.credit)
    assert _squash(said) in _squash(zh.message) and not CJK.search(en.message)
    import nbformat

    cell = nbformat.v4.new_code_cell(f'checks.run("{check_id}", f)')
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "x", "points": 2}
    with language.speaking("zh"):
        shown = json.dumps(_verdict_outputs(cell, [zh]), ensure_ascii=False)
    assert ("通过" in shown) if en.credit > 0 else ("AssertionError" in shown)
    assert language.current() == "en"


# graded in the session's stock batch (conftest.py): each of them handed in from both releases
STOCK_BATCH = STOCK_BATCH_ZH = sorted(MANIFEST) if ALL else list(GRADED)


def test_chinese_submissions_grade_exactly_as_the_english_ones(stock_batch):
    """Stock `nbgrader autograde` with the course's own assignments (English source, gradebook),
    in the session's stock batch: each fixture, handed in from the English and from the Chinese
    release, gets the same score, the English feedback stays English and the Chinese one names the
    same mistake in Chinese (and no diagnosis in English). `make test`: the fixtures of GRADED;
    ENCDEC_ZH_ALL=1: the whole table."""
    from nbgrader.api import Gradebook, MissingEntry

    from autograder.integrity import flagged_submissions

    flagged = {
        f["student"]: sorted(map(str, f["reasons"]))
        for db in {stock_batch.state(n).db_url for n in STOCK_BATCH_ZH}
        for f in flagged_submissions(db)
    }
    problems = []  # every fixture compared, then every difference said at once
    for name in STOCK_BATCH_ZH:
        state = stock_batch.state(name)  # both releases' submissions of a fixture are in one gradebook
        with Gradebook(state.db_url) as gb:
            try:
                _graded_alike(gb, state, name, flagged)
            except (AssertionError, MissingEntry) as err:
                problems.append(f"{name}: {type(err).__name__}: {err}")
    assert not problems, "\n".join(problems)


def _graded_alike(gb, state: GradingState, name: str, flagged: dict) -> None:
    """One fixture from both releases: the same scores, flag and labels; feedback in each language."""
    from nbgrader.api import MissingEntry

    a = MANIFEST[name]["assignment"]
    graded_en, graded_zh = (state.autograded / s / a / f"{a}.ipynb" for s in (name, f"{name}_zh"))
    try:
        en, zh = gb.find_submission(a, name), gb.find_submission(a, f"{name}_zh")
    except MissingEntry:  # a file nbgrader cannot read is graded in neither language
        missing = []
        for student in (name, f"{name}_zh"):
            try:
                gb.find_submission(a, student)
            except MissingEntry:
                missing.append(student)
        assert len(missing) == 2 and MANIFEST[name]["expected_score"] == 0, f"not in the gradebook: {missing}"
        return
    assert en.score == zh.score == MANIFEST[name]["expected_score"], (en.score, zh.score)
    assert _grades(en) == _grades(zh)
    assert flagged.get(name) == flagged.get(f"{name}_zh")  # held for review alike
    assert graded_en.exists() == graded_zh.exists()
    text_en, text_zh = grade_fixtures._graded_text(graded_en), grade_fixtures._graded_text(graded_zh)
    assert not CJK.search(text_en), text_en
    said = GRADED.get(name)
    if said is not None:
        assert _squash(said) in _squash(text_zh), text_zh
    assert _english_diagnoses(text_zh) == [], text_zh
    for key, english in MISCONCEPTIONS.items():  # each mistake named in English is named in Chinese
        if _squash(english) in _squash(text_en):
            assert _squash(MISCONCEPTIONS_ZH[key]) in _squash(text_zh), (key, text_zh)
    if MANIFEST[name]["expected_score"] == MANIFEST[name]["max_score"]:
        assert "通过（由批改程序检查）" in text_zh, text_zh
    assert _labels(graded_en) == _labels(graded_zh)  # the class report counts both alike


def _english_diagnoses(text: str) -> list[str]:
    """The English diagnosis sentences (misconceptions, "Diagnosis:"/"Observed:" heads) in ``text``."""
    found = [key for key, english in MISCONCEPTIONS.items() if _squash(english) in _squash(text)]
    return found + [head for head in ("Diagnosis:", "Observed:") if head in text]


def _grades(submission) -> list[tuple[str, float]]:
    """Every graded item of a submission and its score (nbgrader's gradebook)."""
    return sorted((g.name, g.score) for nb in submission.notebooks for g in nb.grades)


def _labels(path: Path) -> list[list[str]]:
    """The verdict labels of an autograded notebook's graded cells (autograder.preprocessors.VERDICT_KEY);
    none when nbgrader wrote no graded notebook."""
    if not path.exists():
        return []
    return [[v["label"] for v in c["metadata"].get("encdec_verdict", [])] for c in _nb(path)["cells"]]
