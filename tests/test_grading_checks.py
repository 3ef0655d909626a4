"""The checks on their own (no nbgrader): the kernel side only calls the student's code, the
grader side judges. Reference code passes every check, known bugs are named, stubs say "not
implemented", and ``verify`` judges only what it can trust."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from grading_support import (
    ROOT,
    SEED,
    OverwritingCache,
    block_with,
    cached_decoder,
    graded,
    lesson_forward,
    own_run,
    uncached,
)

from autograder import judge as J
from autograder.judge.core import randomize_
from autograder.preprocessors import deliver, withdraw
from encdec import attention as A
from encdec import model as M
from encdec.beam import beam_search
from encdec.generate import greedy_decode
from encdec.grading import wire
from encdec.grading.misconceptions import MISCONCEPTIONS
from encdec.padding import padding_mask
from encdec.sampling import sampling_probs


class ShiftedPositions(M.Transformer):
    def forward(self, ques_b, ques_pos, ans_b, ans_pos):
        enc = self.encoder(self.emb_layer(ques_b) + ques_pos)
        x = self.emb_layer(ans_b[:, :-1]) + ans_pos[:, 1:]
        return self.proj_to_vocab(self.decoder(x, enc, M.get_subsequent_mask(ans_b[:, :-1])))


class UnslicedPositions(M.Transformer):
    def forward(self, ques_b, ques_pos, ans_b, ans_pos):
        enc = self.encoder(self.emb_layer(ques_b) + ques_pos)
        x = self.emb_layer(ans_b)[:, :-1] + ans_pos
        return self.proj_to_vocab(self.decoder(x, enc, M.get_subsequent_mask(ans_b[:, :-1])))


class NoShift(M.Transformer):
    def forward(self, ques_b, ques_pos, ans_b, ans_pos):
        enc = self.encoder(self.emb_layer(ques_b) + ques_pos)
        x = self.emb_layer(ans_b) + ans_pos
        return self.proj_to_vocab(self.decoder(x, enc, M.get_subsequent_mask(ans_b)))


REFERENCE = {
    "decoder_block.mask": A.get_subsequent_mask,
    "decoder_block.masked_softmax": A.masked_softmax,
    "decoder_block.shapes": M.DecoderBlock,
    "decoder_block.output": M.DecoderBlock,
    "decoder_block.causal": M.DecoderBlock,
    "decoder_block.question": M.DecoderBlock,
    "target_slicing.shift": M.shift_targets,
    "target_slicing.forward_shapes": M.Transformer,
    "target_slicing.forward": M.Transformer,
    "target_slicing.causal": M.Transformer,
    "target_slicing.question": M.Transformer,
    "target_slicing.loss": lambda logits, ans: M.sequence_loss(logits, ans[:, 1:]),
    "kv_cache.update": A.KVCache,
    "kv_cache.tokens": greedy_decode,
    "kv_cache.encoder_once": greedy_decode,
    "kv_cache.one_token_per_step": greedy_decode,
    "kv_cache.structure": greedy_decode,
    # the warm-up: through the package's targets where it has them (the mask, the masked softmax)
    "warmup.causal_mask": lambda T: A.get_subsequent_mask(torch.zeros(1, T, dtype=torch.long))[0],
    "warmup.causal_softmax": lambda s: A.masked_softmax(
        s, A.get_subsequent_mask(torch.zeros(1, s.shape[-1], dtype=torch.long))[0]
    ),
    "warmup.combined_mask": lambda L, T: (
        warmup_padding(L, T, T) | A.get_subsequent_mask(torch.zeros(1, T, dtype=torch.long))[0]
    ),
    "warmup.shapes": lambda N, Lq, Lk, M, H: {
        "Q": (N, H, Lq, M // H),
        "K": (N, H, Lk, M // H),
        "V": (N, H, Lk, M // H),
        "scores": (N, H, Lq, Lk),
        "out": (N, Lq, M),
    },
    "warmup.padding_mask": lambda L, Tq, Tk: warmup_padding(L, Tq, Tk),  # noqa: PLW0108 (defined below)
    "warmup.sampling": sampling_probs,
    "warmup.sdpa_mask": lambda mask: ~mask,  # SDPA's attn_mask: True = may attend
    "kv_cache.prefill": lambda model, ques, prefix, n: greedy_decode(model, ques, n, prefix=prefix),
    "kv_cache.beam": beam_search,
}
# visible checks whose exercise is not in any graded kernel's package (no target to call by name):
# the shapes are numbers, SDPA's mask is the course's inverted, and encdec.padding, encdec.sampling and
# encdec.beam are left out of every edition
NO_PACKAGE_TARGET = {"warmup.shapes", "warmup.padding_mask", "warmup.sampling", "warmup.sdpa_mask", "kv_cache.beam"}


def warmup_padding(L, Tq, Tk):
    """(B, 1, Tq, Tk): True where key j >= L[b] (encdec.padding's mask, from lengths)."""
    real = torch.arange(Tk)[None, :] < L[:, None]  # (B, Tk)
    return padding_mask(real)[:, None, :1].expand(len(L), 1, Tq, Tk)


def reference_impl(check_id):
    return REFERENCE[check_id.removesuffix("_hidden")]


@pytest.fixture()
def workdir(tmp_path):
    return tmp_path


@pytest.mark.parametrize("check_id", sorted(J.checks()))
def test_reference_passes_every_check(check_id, workdir):
    verdict, err = graded(check_id, reference_impl(check_id), workdir)
    assert err is None and verdict.ok, verdict.message
    assert verdict.label == "passed"  # what the class report counts (autograder.judge.labels)


@pytest.mark.parametrize(
    "check_id", sorted(c for c in J.checks() if not J.checks()[c].hidden and c not in NO_PACKAGE_TARGET)
)
def test_own_run_says_by_name_when_the_solution_calls_the_package(check_id, workdir):
    """The reference implementations *are* the package's targets: the student's own run says so."""
    with pytest.raises(AssertionError) as err:
        own_run(check_id, reference_impl(check_id), workdir)
    message = " ".join(str(err.value).split())
    assert "your solution called encdec." in message and "the package's own implementation" in message


BUGS = [
    # (check, implementation, diagnosis substring)
    (
        "decoder_block.mask",
        lambda seq: torch.tril(torch.ones(seq.shape[1], seq.shape[1], dtype=torch.bool)).expand(seq.shape[0], -1, -1),
        "mask inverted",
    ),
    (
        "decoder_block.masked_softmax",
        lambda s, m: torch.softmax(s, -1).masked_fill(m, 0.0),
        "mask applied after softmax",
    ),
    ("decoder_block.output", block_with(lambda s, x, e, m: lesson_forward(s, x, e, m, self_mask=None)), "no mask"),
    (
        "decoder_block.output",
        block_with(lambda s, x, e, m: lesson_forward(s, x, e, m, q="dec")),
        "read the decoder input",
    ),
    (
        "decoder_block.output",
        block_with(lambda s, x, e, m: lesson_forward(s, x, e, m, res2=False)),
        "residual is missing",
    ),
    ("decoder_block.output", block_with(lambda s, x, e, m: lesson_forward(s, x, e, m, mlp=False)), "MLP was skipped"),
    ("decoder_block.output", block_with(lambda s, x, e, m: lesson_forward(s, x, e, ~m)), "mask inverted"),
    ("target_slicing.shift", lambda a: (a[:, 1:], a[:, :-1]), "shift reversed"),
    ("target_slicing.shift", lambda a: (a, a), "no shift"),
    ("target_slicing.shift", lambda a: (a[:, :-1], a), "labels not sliced"),
    ("target_slicing.forward", ShiftedPositions, "sliced from the wrong end"),
    ("target_slicing.forward", UnslicedPositions, "added with different lengths"),  # observed: fits two slicing slips
    (
        "target_slicing.loss",
        lambda lg, a: torch.nn.functional.cross_entropy(lg.reshape(-1, lg.shape[-1]), a[:, :-1].reshape(-1)),
        "labels not shifted",
    ),
    ("kv_cache.update", OverwritingCache, "only the newest"),
    ("kv_cache.tokens", cached_decoder(position=lambda t: 0), "not position 0"),
    ("kv_cache.tokens", cached_decoder(cache=OverwritingCache), "only the newest token"),
    ("kv_cache.encoder_once", cached_decoder(encoder_every_step=True), "encoder re-ran every decoding step"),
]


@pytest.mark.parametrize("check_id,impl,diagnosis", BUGS, ids=[f"{b[0]}-{b[2]}" for b in BUGS])
def test_known_bug_fails_with_its_diagnosis(check_id, impl, diagnosis, workdir):
    with pytest.raises(AssertionError) as err:
        own_run(check_id, impl, workdir)
    verdict, _ = graded(check_id, impl, workdir)
    assert not verdict.ok
    if diagnosis is not None:  # messages are wrapped: compare with single spaces
        assert diagnosis in " ".join(str(err.value).split())
        assert diagnosis in " ".join(verdict.message.split())
    # the message says what was expected and what came out
    assert "expected" in verdict.message or "raised" in verdict.message


def test_at_least_eight_misconceptions_are_named_by_the_bug_table():
    named = {d for _, _, d in BUGS if d}
    assert len(named) >= 8


def test_cross_attention_query_from_encoder_is_named(workdir):
    body = block_with(
        lambda s, x, e, m: s.layer_norm_2(s.layer_norm_1(x + s.attention_self(x, x, x, m)) + s.attention_cross(e, x, x))
    )
    verdict, _ = graded("decoder_block.output", body, workdir)
    assert "Q taken from the encoder" in " ".join(verdict.message.split())


def test_stub_reports_not_implemented(workdir):
    def stub(*args):
        raise NotImplementedError()

    with pytest.raises(AssertionError, match="not implemented yet"):
        own_run("target_slicing.shift", stub, workdir)
    verdict, err = graded("target_slicing.shift", stub, workdir)
    assert "not implemented" in verdict.message and err is not None


def test_a_folded_given_part_says_whose_exercise_it_is(workdir):
    """In an assessed term a given part can be another exercise's answer, folded out: the student's
    own run passes on what its NotImplementedError says (autograder/assessed.py's stub)."""

    def given_part_folded(*args):
        raise NotImplementedError("DecoderBlock.forward is yours to write in the decoder_block exercise")

    with pytest.raises(AssertionError, match="yours to write in the decoder_block exercise"):
        own_run("target_slicing.shift", given_part_folded, workdir)


def test_verify_without_saved_outputs_scores_zero():
    verdict = J.verify("decoder_block.output", None, J.graded_inputs("decoder_block.output", SEED))
    assert not verdict.ok and "did not run" in verdict.message


def test_verify_refuses_pickled_outputs(workdir):
    np.savez(workdir / "x.npz", dec_in=np.array([object()], dtype=object))
    verdict = J.verify(
        "target_slicing.shift", (workdir / "x.npz").read_bytes(), J.graded_inputs("target_slicing.shift", SEED)
    )
    assert not verdict.ok and "safely" in verdict.message


def test_withdraw_refuses_links_and_verify_refuses_zip_bombs(workdir):
    secret = workdir / "secret.npz"
    np.savez(secret, dec_in=np.zeros(3))
    (workdir / wire.OUTPUTS_DIR).mkdir()
    (workdir / wire.OUTPUTS_DIR / "target_slicing.shift.npz").symlink_to(secret)
    assert withdraw(workdir, "target_slicing.shift") is None  # a link is not read: the check scores 0
    np.savez_compressed(workdir / "bomb.npz", loss=np.zeros(wire.MAX_BYTES // 8 + 1))
    verdict = J.verify(
        "target_slicing.loss", (workdir / "bomb.npz").read_bytes(), J.graded_inputs("target_slicing.loss", SEED)
    )
    assert not verdict.ok and "unpacks to" in verdict.message


def test_deliver_never_writes_through_a_planted_link(workdir, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (workdir / wire.INPUTS_DIR).symlink_to(elsewhere)
    with pytest.raises(OSError):
        deliver(workdir, "decoder_block.mask", b"x")
    assert list(elsewhere.iterdir()) == []


def test_graded_inputs_differ_by_student_and_check_and_repeat_for_a_regrade():
    secret = b"0123456789abcdef0123456789abcdef"
    a = J.check_seed(secret, "alice", "decoder_block", "decoder_block.output_hidden")
    assert a == J.check_seed(secret, "alice", "decoder_block", "decoder_block.output_hidden")
    assert a != J.check_seed(secret, "bob", "decoder_block", "decoder_block.output_hidden")
    assert a != J.check_seed(secret, "alice", "decoder_block", "decoder_block.causal_hidden")
    assert a != J.check_seed(b"another course secret, longer", "alice", "decoder_block", "decoder_block.output_hidden")


def test_graded_visible_checks_use_fresh_inputs_so_replaying_the_stored_reference_fails(workdir):
    meta, stored = wire.load(ROOT / "solutions" / "decoder_block" / "reference" / "decoder_block.output.npz")
    expected = stored["expected/out"]

    class Replay(M.DecoderBlock):
        def forward(self, dec_inp, enc_inp, mask=None):
            return torch.from_numpy(expected) if expected.shape == tuple(dec_inp.shape) else torch.zeros_like(dec_inp)

    own_run("decoder_block.output", Replay, workdir)  # the student's own run is fooled ...
    verdict, _ = graded("decoder_block.output", Replay, workdir)
    assert not verdict.ok  # ... the graded run is not: same sizes, fresh values


def test_the_kernel_side_never_imports_the_grader_or_reference_code():
    import ast

    for path in sorted((ROOT / "encdec" / "grading").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for name in names:
                assert not name.startswith(("autograder", "encdec.generate", "encdec.train")), (
                    f"{path.name} imports {name}"
                )
                assert name not in ("generate", "train", "variants"), f"{path.name} imports {name}"


def test_layer_norms_have_distinct_nontrivial_parameters():
    block = randomize_(M.DecoderBlock(2, 16, 32, 0.1), 1)
    norms = [block.layer_norm_1, block.layer_norm_2, block.layer_norm_3]
    for ln in norms:
        assert not torch.allclose(ln.weight, torch.ones_like(ln.weight))
        assert not torch.allclose(ln.bias, torch.zeros_like(ln.bias))
    assert not torch.allclose(norms[0].weight, norms[1].weight)
    assert not block.training


def test_hidden_inputs_use_different_question_and_answer_lengths():
    for seed in range(5):
        inputs = J.checks()["decoder_block.output_hidden"].build(seed)
        assert inputs["dims"]["Kq"] != inputs["dims"]["Ka"]


def test_active_dropout_is_observed_not_named(workdir):
    def body(s, x, e, m):
        out_2 = s.layer_norm_1(x + torch.nn.functional.dropout(s.attention_self(x, x, x, m), 0.1))
        out_4 = s.layer_norm_2(out_2 + s.attention_cross(out_2, e, e))
        return s.layer_norm_3(out_4 + s.feed_forward(out_4))

    for check_id in ("decoder_block.output_hidden", "decoder_block.causal_hidden", "decoder_block.question_hidden"):
        verdict, _ = graded(check_id, block_with(body), workdir)
        message = " ".join(verdict.message.split())
        assert not verdict.ok and "Observed: the modules are in eval mode" in message and "Diagnosis:" not in message


def test_a_leak_that_no_mask_variant_explains_is_observed_not_named(workdir):
    body = block_with(lambda s, x, e, m: lesson_forward(s, x, e, m.transpose(1, 2)))  # keys attend to later queries
    verdict, _ = graded("decoder_block.causal_hidden", body, workdir)
    message = " ".join(verdict.message.split())
    assert not verdict.ok and "Observed: the future leaked into the past" in message and "Diagnosis:" not in message
    verdict, _ = graded(
        "decoder_block.causal_hidden",
        block_with(lambda s, x, e, m: lesson_forward(s, x, e, m, self_mask=None)),
        workdir,
    )
    assert "Diagnosis: no mask" in " ".join(verdict.message.split())


STRUCTURE = {"kv_cache.encoder_once": "encoder_every_step", "kv_cache.one_token_per_step": "no_cache"}


@pytest.mark.parametrize("check_id", STRUCTURE)
def test_own_run_of_a_structure_item_judges_the_tokens_as_the_graded_run_does(check_id, workdir, capsys):
    """A structure item is decided by cost in the graded run (judge/budget.py); the student's own run
    reads the kernel's counters instead, says "passed" for the lesson's decoding and names the wrong
    structure, as the graded run does."""
    own_run(check_id, cached_decoder(), workdir)
    assert "passed" in capsys.readouterr().out
    wrong = cached_decoder(encoder_every_step=True) if STRUCTURE[check_id] == "encoder_every_step" else uncached
    with pytest.raises(AssertionError) as err:
        own_run(check_id, wrong, workdir)
    verdict, _ = graded(check_id, wrong, workdir)
    assert verdict.label == STRUCTURE[check_id]
    assert " ".join(MISCONCEPTIONS[STRUCTURE[check_id]].split())[:40] in " ".join(str(err.value).split())


def test_own_shape_check_names_no_shift_as_the_graded_one_does(workdir):
    """Logits of shape (N, Ka, V): both runs of the shape check name "no shift"."""
    with pytest.raises(AssertionError) as err:
        own_run("target_slicing.forward_shapes", NoShift, workdir)
    verdict, _ = graded("target_slicing.forward_shapes", NoShift, workdir)
    assert not verdict.ok and verdict.label == "no_shift"
    assert "Diagnosis: no shift" in " ".join(str(err.value).split())


def test_a_check_whose_function_has_no_cell_names_it():
    """Which object a test cell hands to its check, and whether any cell still defines it, is read
    from the notebook's text; a check that saved nothing then names it (both languages)."""
    import nbformat

    from autograder.fixtures.make import graded_notebook
    from encdec.grading.cells import undefined_in

    nb = nbformat.read(graded_notebook("tamper_deleted_solution_and_test"), as_version=4)
    hidden = nbformat.v4.new_code_cell(
        '### BEGIN HIDDEN TESTS\ncheckss = 1\nchecks.run("decoder_block.mask_hidden", '
        "get_subsequent_mask)\n### END HIDDEN TESTS"
    )
    block = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "block_output")
    assert undefined_in(nb, hidden) == "get_subsequent_mask"
    assert undefined_in(nb, block) is None  # DecoderBlock's cell is there
    inputs = J.graded_inputs("decoder_block.mask_hidden", SEED)
    verdict = J.verify("decoder_block.mask_hidden", None, inputs, undefined="get_subsequent_mask")
    assert not verdict.ok and verdict.label == "did_not_run"
    assert "get_subsequent_mask is not defined in the notebook" in " ".join(verdict.message.split())
    assert "get_subsequent_mask" in verdict.words.render("zh") and "没有定义" in verdict.words.render("zh")
    # a check that ran keeps its own verdict
    assert J.verify("decoder_block.mask_hidden", None, inputs).label == "did_not_run"
