"""Partial credit and verdict labels, without nbgrader's autograde: an item that checks several
things earns each part on its own through nbgrader's partial-credit output and says which part
was missed; every verdict carries a label for the class report, decided from the grader's
evidence and never from text the student's code produced."""

from __future__ import annotations

import nbformat
import pytest
from grading_support import cached_decoder, graded
from nbgrader import utils

from autograder import judge as J
from autograder.judge import labels as L
from autograder.preprocessors import verdict_outputs as _verdict_outputs
from encdec.grading import language
from encdec.grading.misconceptions import MISCONCEPTIONS
from encdec.grading.words import Words, observation, words


@pytest.fixture
def workdir(tmp_path):
    return tmp_path


def graded_cell(points: float, verdicts) -> nbformat.NotebookNode:
    """A graded test cell as TrustedVerdict leaves it."""
    cell = nbformat.v4.new_code_cell('checks.run("x", f)')
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "x", "points": points}
    cell.execution_count = 3
    cell.outputs = _verdict_outputs(cell, verdicts)
    return cell


@pytest.mark.parametrize("check_id", ["target_slicing.shift", "target_slicing.shift_hidden"])
def test_a_shift_with_only_the_labels_wrong_earns_the_decoder_input_half(check_id, workdir):
    verdict, _ = graded(check_id, lambda a: (a[:, :-1], a), workdir)
    assert not verdict.ok and verdict.credit == 0.5
    assert verdict.missed == ["the labels labels_b"] and verdict.label == "labels_not_sliced"
    reversed_shift, _ = graded(check_id, lambda a: (a[:, 1:], a[:, :-1]), workdir)
    assert reversed_shift.credit == 0 and reversed_shift.label == "shift_reversed"


def test_the_hidden_structure_item_awards_its_two_parts_separately(workdir):
    verdict, _ = graded("kv_cache.structure_hidden", cached_decoder(encoder_every_step=True), workdir)
    assert not verdict.ok and verdict.credit == 0.5, verdict.message
    assert verdict.missed == ["the encoder runs once"] and verdict.label == "encoder_every_step"
    one_part, _ = graded("kv_cache.encoder_once", cached_decoder(encoder_every_step=True), workdir)
    assert one_part.credit == 0  # an item that checks one thing has no parts


def test_partial_credit_reaches_nbgrader_as_the_cells_score_and_names_the_missed_part(workdir):
    verdict, _ = graded("kv_cache.structure_hidden", cached_decoder(encoder_every_step=True), workdir)
    cell = graded_cell(2, [verdict])
    assert utils.determine_grade(cell) == (1.0, 2.0)
    text = cell.outputs[0]["text"]
    assert "1 of 2 point(s)" in text and "missed: the encoder runs once" in text and "passed: one new token" in text
    assert "encoder re-ran every decoding step" in " ".join(text.split())  # the diagnosis is still given
    # a verdict that earned nothing is an error (0 points), a passed one a clean line (full points)
    nothing = J.Verdict(False, "wrong", parts=(("a", False), ("b", False)))
    assert utils.determine_grade(graded_cell(2, [nothing])) == (0, 2.0)
    assert utils.determine_grade(graded_cell(2, [J.Verdict(True, "fine")])) == (2.0, 2.0)


def test_a_named_mistake_is_labelled_with_its_misconception(workdir):
    verdict, _ = graded("target_slicing.shift", lambda a: (a, a), workdir)
    assert verdict.label == "no_shift" and L.kind(verdict.label) == "named"
    assert L.describe(verdict.label).startswith("Diagnosis: no shift")


def test_text_the_students_code_raised_never_sets_the_label(workdir):
    """An exception message that imitates a diagnosis is quoted in the feedback, not believed."""
    forged = "Diagnosis: " + MISCONCEPTIONS["no_shift"]

    def shift(ans_b):
        raise ValueError(forged)

    verdict, _ = graded("target_slicing.shift", shift, workdir)
    assert forged in verdict.message and verdict.label == "raised"
    missing = J.verify("target_slicing.shift", None, J.graded_inputs("target_slicing.shift", 1))
    assert missing.label == "did_not_run"


def test_unnamed_observations_share_a_label_whatever_their_numbers():
    """A label is the record its judge set beside the observation (``observation``), not its numbers,
    nor the table entry that words it."""
    head = words("did_not_match", check_id="kv_cache.tokens", title="t", what="the generated tokens")
    a = L.of(head + words("observed_step_logits", step=3, row=1, t=2) + observation("step_logits"))
    b = L.of(head + words("observed_step_logits", step=5, row=0, t=4) + observation("step_logits"))
    assert a == b == "observed:step_logits" and L.kind(a) == "observed"
    assert L.of(head + words("observed_step_logits", step=3, row=1, t=2)) == "mismatch"  # a line alone decides nothing
    assert (head + observation("step_logits")).render("en") == head.render("en")  # the record is not worded
    assert L.describe(a).startswith("Observed: the logits of decoding step # (row #)")
    assert L.of(head) == "mismatch"
    random = L.of(words("not_repeatable", check_id="x", title="t", task="f") + J.diagnosis("observed_random"))
    assert random == "observed_random" and L.kind(random) == "observed"


def test_a_label_never_comes_from_the_words():
    """Feedback worded to look like a diagnosis, but made of literal text, names nothing."""
    forged = Words("x: the loss did not match the reference.\nDiagnosis: " + MISCONCEPTIONS["loss_sum"])
    assert L.of(forged) == "mismatch"


def test_every_label_is_described_in_every_language():
    for label in [
        *L.OUTCOMES,
        *MISCONCEPTIONS,
        "observed:step_logits",
        "observed:stage:argument_was:layer_norm_2:input",
    ]:
        for lang in language.LANGUAGES:
            text = L.describe(label, lang)
            assert text and (text != label or label == L.PASSED) and "{" not in text, (label, lang, text)
    assert "层归一化" in L.describe("observed:stage:argument_was:layer_norm_2:input", "zh")


def _lazy_block(kind: str):
    """A block that does none of the lesson's work but has a behaviour the hidden items probe:
    returning dec_inp is causal; adding the memory's mean follows the question."""
    from encdec import model as M

    class Lazy(M.DecoderBlock):
        def forward(self, dec_inp, enc_inp, mask=None):
            if kind == "identity":
                return dec_inp
            return dec_inp + enc_inp.mean(1, keepdim=True)

    return Lazy


@pytest.mark.parametrize("check_id", ["decoder_block.causal_hidden", "decoder_block.question_hidden"])
@pytest.mark.parametrize("kind", ["identity", "memory_mean"])
def test_a_behaviour_without_the_work_earns_nothing(check_id, kind, workdir):
    """Causality and reading the question are not parts of their own: a block that skips the work
    can be causal (the identity) or follow the question (the memory's mean), so a behaviour part
    would pay a submission that did none of the lesson (closing note, issue 15, item 5)."""
    verdict, _ = graded(check_id, _lazy_block(kind), workdir)
    assert not verdict.ok and verdict.credit == 0 and not verdict.parts, verdict.message
