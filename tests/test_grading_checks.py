"""The checks on their own (no nbgrader): the kernel side only calls the student's code, the
grader side judges. Reference code passes every check, known bugs are named, stubs say "not
implemented", and ``verify`` judges only what it can trust."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from autograder import judge as J
from autograder.judge.core import randomize_
from autograder.trusted import deliver, withdraw
from encdec import attention as A
from encdec import model as M
from encdec.data import BOS_ID, EOS_ID
from encdec.generate import greedy_decode, new_caches
from encdec.grading import checks as C
from encdec.grading import wire

ROOT = Path(__file__).resolve().parents[1]
SEED = 12345


def graded(check_id, impl, workdir, seed=SEED):
    """A graded run of one check, as the grader does it: inputs in, the student's code, verdict."""
    inputs = J.graded_inputs(check_id, seed)
    deliver(workdir, check_id, J.wire_bytes(check_id, inputs))
    kernel_error = None
    try:
        C.run(check_id, impl, workdir)
    except AssertionError as err:  # a graded run raises only when the student's code raised
        kernel_error = err
    verdict = J.verify(check_id, withdraw(workdir, check_id), inputs)
    return verdict, kernel_error


def own_run(check_id, impl, workdir):
    """The student's own run of a visible check, against the stored reference file."""
    assignment = check_id.split(".")[0]
    ref = workdir / wire.REFERENCE_DIR
    if not ref.exists():
        shutil.copytree(ROOT / "solutions" / assignment / "reference", ref)
    C.run(check_id, impl, workdir)


def _pick_next(logits, done):
    nxt = logits.argmax(-1)
    nxt = torch.where(done, torch.full_like(nxt, EOS_ID), nxt)
    return nxt, done | (nxt == EOS_ID)


def make_decoder(pos_bug=False, encoder_every_step=False, cache_class=None):
    @torch.no_grad()
    def decode(model, ques_b, n):
        N = ques_b.shape[0]
        tokens = torch.full((N, 1), BOS_ID, dtype=torch.long)
        ans_pos = model.positions(1 + n)
        memory = model.encode(ques_b)
        cls = cache_class or AppendingCache
        caches = [(cls(), cls(static=True)) for _ in model.decoder.layers]
        done = torch.zeros(N, dtype=torch.bool)
        for t in range(n):
            if encoder_every_step:
                memory = model.encode(ques_b)
            x = model.emb_layer(tokens[:, -1:]) + (ans_pos[:, :1] if pos_bug else ans_pos[:, t : t + 1])
            h = model.decoder(x, memory, None, caches=caches)
            nxt, done = _pick_next(model.proj_to_vocab(h[:, -1]), done)
            tokens = torch.cat([tokens, nxt[:, None]], dim=1)
        return tokens

    return decode


class AppendingCache(A.KVCache):
    """A cache of the test's own (the package's update is an exercise target)."""

    def update(self, k_new, v_new):
        self.k = k_new if self.k is None else torch.cat([self.k, k_new], dim=2)
        self.v = v_new if self.v is None else torch.cat([self.v, v_new], dim=2)
        return self.k, self.v


class OverwritingCache(A.KVCache):
    def update(self, k_new, v_new):
        self.k, self.v = k_new, v_new
        return self.k, self.v


def block_with(body):
    class Block(M.DecoderBlock):
        def forward(self, dec_inp, enc_inp, mask=None):
            return body(self, dec_inp, enc_inp, mask)

    return Block


def _post(s, x, enc, mask, self_mask="mask", q="out_2", res2=True, mlp=True):
    out_1 = s.attention_self(x, x, x, mask if self_mask == "mask" else None)
    out_2 = s.layer_norm_1(x + out_1)
    out_3 = s.attention_cross(out_2 if q == "out_2" else x, enc, enc)
    out_4 = s.layer_norm_2(out_2 + out_3 if res2 else out_3)
    out_5 = s.feed_forward(out_4) if mlp else torch.zeros_like(out_4)
    return s.layer_norm_3(out_4 + out_5)


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
}


def reference_impl(check_id):
    return REFERENCE[check_id.removesuffix("_hidden")]


@pytest.fixture()
def workdir(tmp_path):
    return tmp_path


@pytest.mark.parametrize("check_id", sorted(J.CHECKS))
def test_reference_passes_every_check(check_id, workdir):
    verdict, err = graded(check_id, reference_impl(check_id), workdir)
    assert err is None and verdict.ok, verdict.message
    assert verdict.label == "passed"  # what the class report counts (autograder.judge.labels)


@pytest.mark.parametrize("check_id", sorted(c for c in J.CHECKS if not J.CHECKS[c].hidden))
def test_own_run_says_by_name_when_the_solution_calls_the_package(check_id, workdir):
    """The reference implementations *are* the package's targets: the student's own run says so."""
    with pytest.raises(AssertionError) as err:
        own_run(check_id, reference_impl(check_id), workdir)
    message = " ".join(str(err.value).split())
    assert "your solution called encdec." in message and "the package's own implementation" in message


BUGS = [
    # (check, implementation, diagnosis substring)
    ("decoder_block.mask", lambda seq: torch.tril(torch.ones(seq.shape[1], seq.shape[1], dtype=torch.bool)).expand(seq.shape[0], -1, -1), "mask inverted"),
    ("decoder_block.masked_softmax", lambda s, m: torch.softmax(s, -1).masked_fill(m, 0.0), "mask applied after softmax"),
    ("decoder_block.output", block_with(lambda s, x, e, m: _post(s, x, e, m, self_mask=None)), "no mask"),
    ("decoder_block.output", block_with(lambda s, x, e, m: _post(s, x, e, m, q="dec")), "read the decoder input"),
    ("decoder_block.output", block_with(lambda s, x, e, m: _post(s, x, e, m, res2=False)), "residual is missing"),
    ("decoder_block.output", block_with(lambda s, x, e, m: _post(s, x, e, m, mlp=False)), "MLP was skipped"),
    ("decoder_block.output", block_with(lambda s, x, e, m: _post(s, x, e, ~m)), "mask inverted"),
    ("target_slicing.shift", lambda a: (a[:, 1:], a[:, :-1]), "shift reversed"),
    ("target_slicing.shift", lambda a: (a, a), "no shift"),
    ("target_slicing.shift", lambda a: (a[:, :-1], a), "labels not sliced"),
    ("target_slicing.forward", ShiftedPositions, "sliced from the wrong end"),
    ("target_slicing.forward", UnslicedPositions, "added with different lengths"),  # observed: fits two slicing slips
    ("target_slicing.loss", lambda lg, a: torch.nn.functional.cross_entropy(lg.reshape(-1, lg.shape[-1]), a[:, :-1].reshape(-1)), "labels not shifted"),
    ("kv_cache.update", OverwritingCache, "only the newest"),
    ("kv_cache.tokens", make_decoder(pos_bug=True), "not position 0"),
    ("kv_cache.tokens", make_decoder(cache_class=OverwritingCache), "only the newest token"),
    ("kv_cache.encoder_once", make_decoder(encoder_every_step=True), "encoder re-ran every decoding step"),
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
    body = block_with(lambda s, x, e, m: s.layer_norm_2(s.layer_norm_1(x + s.attention_self(x, x, x, m)) + s.attention_cross(e, x, x)))
    verdict, _ = graded("decoder_block.output", body, workdir)
    assert "Q taken from the encoder" in " ".join(verdict.message.split())


def test_stub_reports_not_implemented(workdir):
    def stub(*args):
        raise NotImplementedError()

    with pytest.raises(AssertionError, match="not implemented yet"):
        own_run("target_slicing.shift", stub, workdir)
    verdict, err = graded("target_slicing.shift", stub, workdir)
    assert "not implemented" in verdict.message and err is not None


def test_verify_without_saved_outputs_scores_zero():
    verdict = J.verify("decoder_block.output", None, J.graded_inputs("decoder_block.output", SEED))
    assert not verdict.ok and "did not run" in verdict.message


def test_verify_refuses_pickled_outputs(workdir):
    np.savez(workdir / "x.npz", dec_in=np.array([object()], dtype=object))
    verdict = J.verify("target_slicing.shift", (workdir / "x.npz").read_bytes(), J.graded_inputs("target_slicing.shift", SEED))
    assert not verdict.ok and "safely" in verdict.message


def test_withdraw_refuses_links_and_verify_refuses_zip_bombs(workdir):
    secret = workdir / "secret.npz"
    np.savez(secret, dec_in=np.zeros(3))
    (workdir / wire.OUTPUTS_DIR).mkdir()
    (workdir / wire.OUTPUTS_DIR / "target_slicing.shift.npz").symlink_to(secret)
    assert withdraw(workdir, "target_slicing.shift") is None  # a link is not read: the check scores 0
    np.savez_compressed(workdir / "bomb.npz", loss=np.zeros(wire.MAX_BYTES // 8 + 1))
    verdict = J.verify("target_slicing.loss", (workdir / "bomb.npz").read_bytes(), J.graded_inputs("target_slicing.loss", SEED))
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
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for name in names:
                assert not name.startswith(("autograder", "encdec.generate", "encdec.train")), f"{path.name} imports {name}"
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
        inputs = J.CHECKS["decoder_block.output_hidden"].build(seed)
        assert inputs["dims"]["Kq"] != inputs["dims"]["Ka"]


def test_cached_reference_decoder_matches_greedy_decode():
    inputs = J.CHECKS["kv_cache.tokens"].build(J.CHECKS["kv_cache.tokens"].seed)
    ours = make_decoder()(inputs["model"], inputs["ques"], inputs["n"])
    assert torch.equal(ours, greedy_decode(inputs["model"], inputs["ques"], inputs["n"], use_cache=True))
    assert len(new_caches(inputs["model"])) == inputs["model"].config.num_dec_layers


# --- decoding: the rule pick_next states is exercised on every seed ----------------------------

def plain_argmax_decoder(model, ques_b, n):
    """A right cached decoder that chooses with a plain argmax: a finished row goes on decoding."""
    N = ques_b.shape[0]
    tokens = torch.full((N, 1), BOS_ID, dtype=torch.long)  # (N, 1)
    ans_pos = model.positions(1 + n)  # (1, 1 + n, M)
    memory = model.encode(ques_b)  # (N, Kq, M)
    caches = [(AppendingCache(), AppendingCache(static=True)) for _ in model.decoder.layers]
    for t in range(n):
        h = model.decoder(model.emb_layer(tokens[:, -1:]) + ans_pos[:, t : t + 1], memory, None, caches=caches)  # (N, 1, M)
        tokens = torch.cat([tokens, model.proj_to_vocab(h[:, -1]).argmax(-1)[:, None]], dim=1)  # (N, t + 2)
    return tokens


STUDENTS = [f"student{i:02d}" for i in range(20)]


def test_decoding_inputs_have_rows_that_finish_early_and_rows_that_never_finish():
    secret = b"a course secret for this test only"
    for check_id in ("kv_cache.tokens", "kv_cache.tokens_hidden", "kv_cache.structure_hidden"):
        for student in STUDENTS:
            inputs = J.graded_inputs(check_id, J.check_seed(secret, student, "kv_cache", check_id))
            tokens = greedy_decode(inputs["model"], inputs["ques"], inputs["n"], use_cache=False)  # (N, 1 + n)
            eos = tokens[:, 1:] == EOS_ID  # (N, n)
            assert (~eos.any(dim=1)).any(), f"{check_id}/{student}: every row finishes"
            assert eos[:, :-1].any(), f"{check_id}/{student}: no row finishes before the last step"


@pytest.mark.parametrize("check_id", ["kv_cache.tokens", "kv_cache.tokens_hidden"])
def test_a_decoder_that_ignores_finished_rows_fails_for_every_student(check_id, workdir):
    secret = b"a course secret for this test only"
    for student in STUDENTS:
        verdict, _ = graded(check_id, plain_argmax_decoder, workdir, seed=J.check_seed(secret, student, "kv_cache", check_id))
        assert not verdict.ok, f"{student}: a plain argmax passed {check_id}"
        assert "Diagnosis: a row that had already produced EOS went on decoding" in " ".join(verdict.message.split())
    with pytest.raises(AssertionError, match="already produced EOS"):  # the student's own run says it too
        own_run("kv_cache.tokens", plain_argmax_decoder, workdir)


def test_positions_one_ahead_are_named_the_same_on_every_seed(workdir):
    def ahead(model, ques_b, n):  # the token fed at step t placed at position t + 1
        N = ques_b.shape[0]
        tokens = torch.full((N, 1), BOS_ID, dtype=torch.long)
        ans_pos = model.positions(1 + n)
        memory, caches = model.encode(ques_b), new_caches(model)
        done = torch.zeros(N, dtype=torch.bool)
        for t in range(n):
            h = model.decoder(model.emb_layer(tokens[:, -1:]) + ans_pos[:, t + 1 : t + 2], memory, None, caches=caches)
            nxt, done = _pick_next(model.proj_to_vocab(h[:, -1]), done)
            tokens = torch.cat([tokens, nxt[:, None]], dim=1)
        return tokens

    for seed in range(8):
        verdict, _ = graded("kv_cache.tokens_hidden", ahead, workdir, seed=seed)
        message = " ".join(verdict.message.split())
        assert not verdict.ok and "position encodings one ahead" in message, message
        assert message.count("Diagnosis:") == 1


class WrongAxisCache(A.KVCache):
    """One torch.cat on the wrong axis: the keys grow along Dh."""

    def update(self, k_new, v_new):
        self.k = k_new if self.k is None else torch.cat([self.k, k_new], dim=3)  # (N, H, 1, Dh) -> (N, H, 1, 2 Dh)
        self.v = v_new if self.v is None else torch.cat([self.v, v_new], dim=2)  # (N, H, T, Dh)
        return self.k, self.v


def test_a_crash_in_the_cache_costs_only_the_items_that_need_the_cache(workdir):
    decode = make_decoder(cache_class=WrongAxisCache)
    for check_id in ("kv_cache.encoder_once", "kv_cache.one_token_per_step", "kv_cache.structure_hidden"):
        verdict, err = graded(check_id, decode, workdir)
        assert err is not None  # the kernel reported the crash ...
        assert verdict.ok and "before KVCache.update failed" in verdict.message, verdict.message  # ... judged anyway
    for check_id in ("kv_cache.tokens", "kv_cache.tokens_hidden"):
        verdict, _ = graded(check_id, decode, workdir)
        message = " ".join(verdict.message.split())
        assert not verdict.ok and "The failure came from KVCache.update: the keys it returned" in message, message
    with pytest.raises(AssertionError, match="The failure came from KVCache.update"):  # the own run says it too
        own_run("kv_cache.tokens", decode, workdir)


def test_a_crash_in_the_decoder_itself_still_costs_the_structure_items(workdir):
    def broken(model, ques_b, n):
        model.encode(ques_b)
        raise IndexError("the decoder's own mistake")

    for check_id in ("kv_cache.encoder_once", "kv_cache.structure_hidden"):
        verdict, _ = graded(check_id, broken, workdir)
        assert not verdict.ok and "raised IndexError" in verdict.message and "came from KVCache" not in verdict.message


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
    body = block_with(lambda s, x, e, m: _post(s, x, e, m.transpose(1, 2)))  # keys attend to later queries
    verdict, _ = graded("decoder_block.causal_hidden", body, workdir)
    message = " ".join(verdict.message.split())
    assert not verdict.ok and "Observed: the future leaked into the past" in message and "Diagnosis:" not in message
    verdict, _ = graded("decoder_block.causal_hidden", block_with(lambda s, x, e, m: _post(s, x, e, m, self_mask=None)), workdir)
    assert "Diagnosis: no mask" in " ".join(verdict.message.split())
