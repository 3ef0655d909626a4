"""The arithmetic data: vocabulary, encoding, the split, and the errors bad input gets."""

import pytest
import torch

from encdec import data


def test_vocab_is_the_original_sixteen_tokens_in_order():
    assert tuple("0123456789") + ("POSITIVE", "NEGATIVE", "add", "subtract", "BOS", "EOS") == data.VOCAB
    assert data.TOKEN_TO_ID["BOS"] == 14 and data.TOKEN_TO_ID["EOS"] == 15


def test_lesson_example_encodes_to_nine_and_five_ids():
    q = data.encode_question("BOS NEGATIVE 30 subtract NEGATIVE 34 EOS")
    a = data.encode_answer("BOS POSITIVE 04 EOS")
    assert q == [14, 11, 3, 0, 13, 11, 3, 4, 15]
    assert a == [14, 10, 0, 4, 15]
    assert data.decode(a) == "BOS POSITIVE 0 4 EOS"
    assert data.encode("BOS POSITIVE 0 4 EOS") == a  # digits may also be written apart
    assert data.answer_value(a) == 4


@pytest.mark.parametrize(
    "text, offending",
    [
        ("BOS POSITIVE 04 multiply EOS", "multiply"),
        ("BOS POSITIVE 123 EOS", "123"),
        ("BOS POSITIVE -4 EOS", "-4"),
    ],
)
def test_bad_tokens_raise_naming_the_token(text, offending):
    with pytest.raises(ValueError, match=offending):
        data.encode(text)


def test_wrong_lengths_and_out_of_range_operands_raise():
    with pytest.raises(ValueError, match="expected 9"):
        data.encode_question("BOS POSITIVE 04 EOS")
    with pytest.raises(ValueError, match="expected 5"):
        data.encode_answer("BOS NEGATIVE 30 subtract NEGATIVE 34 EOS")
    with pytest.raises(ValueError, match="77"):
        data.encode_question("BOS POSITIVE 77 add POSITIVE 01 EOS")
    with pytest.raises(ValueError, match="'add'.*position 1"):
        data.encode_answer("BOS add 0 4 EOS")
    with pytest.raises(ValueError, match="out of range"):
        data.question_text(50, "add", 1)
    with pytest.raises(ValueError, match="unknown token id"):
        data.decode([3, 16])


def test_dataset_is_deterministic_split_and_correct():
    d1, d2 = data.load_arithmetic(), data.load_arithmetic()
    assert d1.train_questions.shape == (4500, 9) and d1.val_answers.shape == (500, 5)
    assert torch.equal(d1.train_questions, d2.train_questions)
    for q, a in zip(d1.val_questions[:50], d1.val_answers[:50]):
        words = data.decode(q).split()
        x = int(words[2] + words[3]) * (-1 if words[1] == "NEGATIVE" else 1)
        y = int(words[6] + words[7]) * (-1 if words[5] == "NEGATIVE" else 1)
        expected = x + y if words[4] == "add" else x - y
        assert data.answer_value(a) == expected


def test_about_one_validation_question_in_five_was_seen_in_training():
    d = data.load_arithmetic()
    seen_fraction = 1 - d.unseen_mask.float().mean().item()
    assert 0.12 < seen_fraction < 0.28  # drawn with replacement from 19,602 questions
    unseen_q, _ = d.unseen()
    train = {tuple(q) for q in d.train_questions.tolist()}
    assert not any(tuple(q) in train for q in unseen_q.tolist())
