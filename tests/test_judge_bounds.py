"""Bounded judging: every array the kernel hands the grader is checked against the shape and size
the grader expects before anything is computed from it (the judge runs in the grader's own,
unconfined process). The rule is tested with arrays that fail the test if any value of theirs is
read or added; ``bench/bench_grader_memory.py`` measures the grader's memory on the worst records."""

from __future__ import annotations

import numpy as np
import pytest

from autograder import judge as J
from autograder.judge import core
from autograder.judge import stages as St
from encdec.grading import wire
from encdec.grading.stages import MAX_CALLS


class Untouchable(np.ndarray):
    """An array of the kernel whose values must not be read: any arithmetic or conversion fails."""

    def __array_ufunc__(self, *args, **kwargs):
        raise AssertionError("a value of an unchecked array was computed with")

    def astype(self, *args, **kwargs):
        raise AssertionError("an unchecked array was converted")


def untouchable(shape) -> Untouchable:
    """A huge array of ``shape`` that takes no memory (every entry is the same number)."""
    return np.broadcast_to(np.zeros(1, np.float32), shape).view(Untouchable)


def block_case(seed: int = 3):
    inputs = J.graded_inputs("decoder_block.output", seed)
    dec, enc, mask = (inputs[k].numpy() for k in ("dec", "enc", "mask"))
    return dec, enc, mask


def lesson_record(dec, enc, mask, **replace) -> dict:
    """A record whose first stages follow the lesson, with some arrays replaced."""
    out_1 = np.ones_like(dec)
    record = {
        "trace/out/00/attention_self/query": dec,
        "trace/out/00/attention_self/key": dec,
        "trace/out/00/attention_self/value": dec,
        "trace/out/00/attention_self/mask": mask,
        "trace/out/00/attention_self/output": out_1,
        "trace/out/01/layer_norm_1/input": dec + out_1,
        "trace/out/01/layer_norm_1/output": 2 * dec,
    }
    record.update(replace)
    return record


def test_a_broadcastable_pair_of_recorded_outputs_is_never_added():
    """(K, 1, M) and (1, K, M), recorded as the outputs of two parts the walk has not reached,
    would be summed to K x K x M numbers while the walk names what a wrong argument was."""
    dec, enc, mask = block_case()
    M = dec.shape[-1]
    assert St._sum(untouchable((50_000, 1, M)), untouchable((1, 50_000, M))) is None  # decided from the shapes

    def record(K):
        return lesson_record(
            dec,
            enc,
            mask,
            **{
                "trace/out/02/layer_norm_2/output": untouchable((K, 1, M)),
                "trace/out/03/feed_forward/output": untouchable((1, K, M)),
                "trace/out/04/attention_cross/query": 3 * dec,
            },
        )  # no tensor the lesson names

    # within the case's size: the walk names what the query was, without adding the pair
    K = enc.size // M
    line = St.block_stage(record(K), "out", dec, enc, mask)
    assert line is not None and "attention_cross" in str(line)
    # larger than any tensor of the case: refused before any value is read, no stage line
    assert St.locate(St.block_stage, record(50_000), "out", dec, enc, mask) is None
    with pytest.raises(St.RecordRefused):
        St.calls(record(50_000), "out", limit=enc.size)


def test_a_recorded_output_of_a_shape_no_given_part_returns_is_refused():
    dec, enc, mask = block_case()
    record = lesson_record(dec, enc, mask, **{"trace/out/01/layer_norm_1/output": untouchable((1, 1) + dec.shape[-1:])})
    with pytest.raises(St.RecordRefused):
        St.block_stage(record, "out", dec, enc, mask)


@pytest.mark.parametrize(
    "key,array",
    [
        (f"trace/out/{MAX_CALLS:02d}/layer_norm_1/input", np.zeros((2, 5, 16), np.float32)),  # a call never recorded
        ("trace/out/00/layer_norm_1/input", np.zeros((1, 1, 1, 1, 1), np.float32)),  # five axes
        ("trace/out/00/layer_norm_1/input", np.zeros(St.RECORD_ELEMENTS + 1, np.float32)),  # too many numbers
    ],
)
def test_a_malformed_record_is_refused_before_it_is_read(key, array):
    with pytest.raises(St.RecordRefused):
        St.calls({key: array.view(Untouchable)}, "out")


def test_decoding_step_records_are_checked_against_the_steps_decoded():
    tok = np.zeros((2, 4), np.int64)
    emb, pos = np.zeros((7, 16), np.float32), np.zeros((1, 4, 16), np.float32)
    got = {"fed/0": np.zeros((2, 1, 16), np.float32), "cache_held": np.zeros((4, 100_000), np.int64).view(Untouchable)}
    assert St.decode_stage(got, tok, emb, pos) is None


def test_compare_reads_no_value_of_an_output_whose_shape_is_not_the_expected():
    check = J.checks()["decoder_block.output"]
    exp = np.zeros((2, 5, 16), np.float32)
    got = untouchable((2, 5, 16, 10_000))
    verdict = core.compare(check, "the block output", got, exp, candidates=lambda: {"no_mask": exp})
    assert not verdict.ok and "(2, 5, 16, 10000)" in verdict.message


def test_two_runs_of_the_kernel_are_compared_only_at_the_expected_shape():
    check = J.checks()["decoder_block.output"]
    big = untouchable((core.MAX_ELEMENTS + 1,))
    assert core.not_repeatable(check, "DecoderBlock.forward", big, big) is None
    small = untouchable((3, 4))
    assert core.not_repeatable(check, "DecoderBlock.forward", small, small, expected=np.zeros((2, 5))) is None


def test_a_file_with_more_arrays_than_a_check_writes_is_refused_unread():
    many = {f"trace/out/{i:05d}/layer_norm_1/input": np.zeros(1, np.float32) for i in range(wire.MAX_ARRAYS + 1)}
    with pytest.raises(ValueError, match="arrays"):
        wire.loads(wire.to_bytes({"status": "ok"}, many))
    verdict = J.verify(
        "decoder_block.output", wire.to_bytes({"status": "ok"}, many), J.graded_inputs("decoder_block.output", 3)
    )
    assert not verdict.ok and verdict.label == "unreadable_outputs"


def test_the_mistake_is_still_named_when_the_record_is_refused(tmp_path):
    """The hostile row's block: a refused record loses the stage line, never the verdict."""
    import grading_support as support

    from autograder.fixtures.payloads import HUGE_BROADCAST
    from encdec import model as M

    body = "\n".join(HUGE_BROADCAST.splitlines())
    ns: dict = {}
    exec(
        "import torch\ndef forward(self, dec_inp, enc_inp, mask=None):\n"
        + "\n".join("    " + line for line in body.splitlines()),
        ns,
    )
    Block = type("Block", (M.DecoderBlock,), {"forward": ns["forward"]})
    verdict, _ = support.graded("decoder_block.output", Block, tmp_path)
    assert not verdict.ok and "did not match the reference" in verdict.message
