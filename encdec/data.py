"""The toy arithmetic task of the original assignment: tokens, encoding, and the data set.

Taught in chapter 11 (the running example ``BOS NEGATIVE 30 subtract NEGATIVE 34 EOS``) and
chapter 12 (the shift of the answer ``BOS POSITIVE 0 4 EOS``).

A question is 9 tokens, ``BOS sign d d op sign d d EOS``; an answer is 5 tokens,
``BOS sign d d EOS``. Operands run from -49 to 49, so answers run from -98 to 98 and always
fit in a sign and two digits. Zero is written ``POSITIVE 00``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

VOCAB: tuple[str, ...] = (
    "0",
    "1",
    "2",
    "3",
    "4",
    "5",
    "6",
    "7",
    "8",
    "9",
    "POSITIVE",
    "NEGATIVE",
    "add",
    "subtract",
    "BOS",
    "EOS",
)
TOKEN_TO_ID: dict[str, int] = {token: i for i, token in enumerate(VOCAB)}
BOS_ID, EOS_ID = TOKEN_TO_ID["BOS"], TOKEN_TO_ID["EOS"]
SIGNS = ("POSITIVE", "NEGATIVE")
OPERATORS = ("add", "subtract")
QUESTION_LEN = 9  # Kq
ANSWER_LEN = 5  # Ka
OPERAND_MAX = 49
ANSWER_MAX = 2 * OPERAND_MAX

# 5,000 pairs, as the original's record says; this course splits them 4,500 / 500 (a fixed seed
# makes it reproducible).
NUM_PAIRS, NUM_TRAIN = 5000, 4500
DATA_SEED = 498


def encode(text: str) -> list[int]:
    """Token ids of a space-separated text; a number becomes one token per digit.

    >>> encode("BOS POSITIVE 04 EOS")
    [14, 10, 0, 4, 15]
    """
    ids: list[int] = []
    for word in text.split():
        if word in TOKEN_TO_ID:
            ids.append(TOKEN_TO_ID[word])
        elif word.isdecimal() and word.isascii():
            if len(word) > 2:
                raise ValueError(
                    f"number {word!r} is out of range: numbers are written as at most two "
                    f"digits (operands -{OPERAND_MAX}..{OPERAND_MAX}, answers "
                    f"-{ANSWER_MAX}..{ANSWER_MAX})"
                )
            ids.extend(TOKEN_TO_ID[digit] for digit in word)
        else:
            raise ValueError(
                f"unknown token {word!r}: expected one of {' '.join(VOCAB)} or a number of at most two digits"
            )
    return ids


def decode(ids) -> str:
    """Text of a sequence of token ids (a list, or a 1-D tensor), one word per token."""
    if isinstance(ids, torch.Tensor):
        if ids.dim() != 1:
            raise ValueError(f"decode takes one sequence: expected shape (K,), got {tuple(ids.shape)}")
        ids = ids.tolist()
    words = []
    for i in ids:
        if not isinstance(i, int) or not 0 <= i < len(VOCAB):
            raise ValueError(f"unknown token id {i!r}: expected an integer in 0..{len(VOCAB) - 1}")
        words.append(VOCAB[i])
    return " ".join(words)


def _signed(value: int) -> str:
    """``-4`` -> ``NEGATIVE 04``; zero is POSITIVE."""
    sign = "NEGATIVE" if value < 0 else "POSITIVE"
    return f"{sign} {abs(value):02d}"


def question_text(a: int, op: str, b: int) -> str:
    """The question ``BOS sign aa op sign bb EOS`` for ``a op b``."""
    for x in (a, b):
        if not -OPERAND_MAX <= x <= OPERAND_MAX:
            raise ValueError(f"operand {x} is out of range: expected -{OPERAND_MAX}..{OPERAND_MAX}")
    if op not in OPERATORS:
        raise ValueError(f"unknown operator {op!r}: expected 'add' or 'subtract'")
    return f"BOS {_signed(a)} {op} {_signed(b)} EOS"


def answer_text(value: int) -> str:
    """The answer ``BOS sign dd EOS`` for an integer result."""
    if not -ANSWER_MAX <= value <= ANSWER_MAX:
        raise ValueError(f"answer {value} is out of range: expected -{ANSWER_MAX}..{ANSWER_MAX}")
    return f"BOS {_signed(value)} EOS"


def _check_layout(text: str, ids: list[int], layout: list[tuple[str, ...]], what: str) -> None:
    """Raise ValueError naming the first token that breaks the expected layout."""
    if len(ids) != len(layout):
        raise ValueError(f"{what} {text!r} has {len(ids)} tokens: expected {len(layout)}")
    for position, (i, allowed) in enumerate(zip(ids, layout)):
        if VOCAB[i] not in allowed:
            raise ValueError(
                f"{what} {text!r}: token {VOCAB[i]!r} at position {position}, expected one of {', '.join(allowed)}"
            )


_DIGITS = tuple(VOCAB[:10])
_NUMBER = [SIGNS, _DIGITS, _DIGITS]
_QUESTION_LAYOUT = [("BOS",), *_NUMBER, OPERATORS, *_NUMBER, ("EOS",)]
_ANSWER_LAYOUT = [("BOS",), *_NUMBER, ("EOS",)]


def encode_question(text: str) -> list[int]:
    """Encode and validate a question: 9 tokens, operands within -49..49."""
    ids = encode(text)
    _check_layout(text, ids, _QUESTION_LAYOUT, "question")
    for start in (2, 6):
        value = 10 * ids[start] + ids[start + 1]
        if value > OPERAND_MAX:
            raise ValueError(
                f"question {text!r}: operand {VOCAB[ids[start]]}{VOCAB[ids[start + 1]]} is out "
                f"of range, expected -{OPERAND_MAX}..{OPERAND_MAX}"
            )
    return ids


def encode_answer(text: str) -> list[int]:
    """Encode and validate an answer: 5 tokens ``BOS sign d d EOS``."""
    ids = encode(text)
    _check_layout(text, ids, _ANSWER_LAYOUT, "answer")
    return ids


def answer_value(ids) -> int | None:
    """The integer an answer's tokens spell, or None when they do not spell one."""
    words = decode(ids).split() if not isinstance(ids, str) else ids.split()
    if len(words) < 5 or words[0] != "BOS" or words[4] != "EOS" or words[1] not in SIGNS:
        return None
    if not (words[2].isdigit() and words[3].isdigit()):
        return None
    value = int(words[2] + words[3])
    return -value if words[1] == "NEGATIVE" else value


@dataclass(frozen=True)
class ArithmeticData:
    """Questions and answers as id tensors, split 4,500 / 500 (this course's split of the 5,000 pairs)."""

    train_questions: torch.Tensor  # (4500, Kq) int64
    train_answers: torch.Tensor  # (4500, Ka) int64
    val_questions: torch.Tensor  # (500, Kq) int64
    val_answers: torch.Tensor  # (500, Ka) int64

    @property
    def unseen_mask(self) -> torch.Tensor:
        """(500,) bool: True where the validation question never appears in training."""
        seen = {tuple(q) for q in self.train_questions.tolist()}
        return torch.tensor([tuple(q) not in seen for q in self.val_questions.tolist()])

    def unseen(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The validation pairs whose question never appears in training."""
        keep = self.unseen_mask
        return self.val_questions[keep], self.val_answers[keep]


def generate_pairs(num_pairs: int = NUM_PAIRS, seed: int = DATA_SEED) -> list[tuple[str, str]]:
    """``num_pairs`` (question, answer) texts drawn uniformly, with replacement (the lesson cards
    record only "5,000 pairs": how the original drew them is inferred, chapter 12's historical notes).

    Drawing with replacement from 99 x 2 x 99 = 19,602 questions is why about one validation
    question in five also appears in training.
    """
    rng = random.Random(seed)
    pairs = []
    for _ in range(num_pairs):
        a = rng.randint(-OPERAND_MAX, OPERAND_MAX)
        op = rng.choice(OPERATORS)
        b = rng.randint(-OPERAND_MAX, OPERAND_MAX)
        result = a + b if op == "add" else a - b
        pairs.append((question_text(a, op, b), answer_text(result)))
    return pairs


def problem_space() -> tuple[torch.Tensor, torch.Tensor]:
    """Every question of the task with its answer: 99 x 2 x 99 = 19,602 pairs, in a fixed order.

    The whole space, where nobody chose the questions: the shipped checkpoints' claims are
    measured on it (``metrics.json``'s ``space_exact_match``).
    """
    questions, answers = [], []
    for a in range(-OPERAND_MAX, OPERAND_MAX + 1):
        for op in OPERATORS:
            for b in range(-OPERAND_MAX, OPERAND_MAX + 1):
                questions.append(encode_question(question_text(a, op, b)))
                answers.append(encode_answer(answer_text(a + b if op == "add" else a - b)))
    return torch.tensor(questions), torch.tensor(answers)  # (19602, Kq), (19602, Ka)


def load_arithmetic(seed: int = DATA_SEED) -> ArithmeticData:
    """The 5,000 pairs as tensors, split 4,500 train / 500 validation."""
    pairs = generate_pairs(NUM_PAIRS, seed)
    questions = torch.tensor([encode_question(q) for q, _ in pairs])  # (5000, Kq)
    answers = torch.tensor([encode_answer(a) for _, a in pairs])  # (5000, Ka)
    return ArithmeticData(
        train_questions=questions[:NUM_TRAIN],
        train_answers=answers[:NUM_TRAIN],
        val_questions=questions[NUM_TRAIN:],
        val_answers=answers[NUM_TRAIN:],
    )
