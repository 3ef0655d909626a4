"""The kv_cache stretch part 4, beam search, graded in process (judge/kv_beam.py): the lesson's search
passes for every student; each classic mistake loses the item on every draw and is named, in both
languages; a search that returns nothing of the kind is named nothing."""

import pytest
import torch
from grading_support import graded

from autograder import judge as J
from autograder.judge import kv_beam as KB
from encdec.beam import beam_search

STUDENTS = ("ada", "bo")
SECRET = b"a course secret for this test only"


@pytest.fixture
def workdir(tmp_path):
    return tmp_path


def _seed(student):
    return J.check_seed(SECRET, student, "kv_cache", "kv_cache.beam_hidden")


def test_the_lessons_search_passes_for_every_student(workdir):
    for student in STUDENTS:
        verdict, _ = graded("kv_cache.beam_hidden", beam_search, workdir, seed=_seed(student))
        assert verdict.ok, verdict.message


@pytest.mark.parametrize("mistake", KB.MISTAKES)
def test_each_mistake_loses_the_item_and_is_named_on_every_draw(mistake, workdir):
    def search(model, ques, k, n, alpha):
        return KB.mistaken_search(model, ques, k, n, alpha, mistake)

    for student in STUDENTS:
        verdict, _ = graded("kv_cache.beam_hidden", search, workdir, seed=_seed(student))
        assert not verdict.ok and verdict.label == mistake, verdict.message
        assert verdict.words.render("zh") != verdict.words.render("en")


def test_a_search_with_its_scores_unsorted_is_named_nothing(workdir):
    """The right beams, worst first: no known mistake gives that on every case, so none is named."""

    def reversed_search(model, ques, k, n, alpha):
        tokens, scores = beam_search(model, ques, k, n, alpha)
        return tokens.flip(1), scores.flip(1)

    verdict, _ = graded("kv_cache.beam_hidden", reversed_search, workdir, seed=_seed("ada"))
    assert not verdict.ok and verdict.label not in KB.MISTAKES, verdict.message


def test_every_draw_finishes_some_beam_early():
    """The finished-beam mistake can show: on each draw some reference beam has EOS before its end."""
    from encdec.data import EOS_ID

    for student in STUDENTS:
        inputs = J.checks()["kv_cache.beam_hidden"].build(_seed(student))
        ref = KB.reference(inputs)
        assert any((torch.from_numpy(v)[..., 1:-1] == EOS_ID).any() for k, v in ref.items() if k.startswith("tokens"))
