"""The grader's feedback in Chinese (issue 14): every sentence a judge writes comes from the
per-language table (``encdec.grading.language.MESSAGES``), so a submission of the Chinese release
reads no English sentence, only code names, shapes and numbers, while the English feedback stays
word for word what it was (``tests/feedback_en.json``, recorded from the English judges).

In-process: the kernel side runs the buggy solution (``grading_support``), the grader verifies in
both languages. Re-record the English texts after an intended change of wording with
``python tests/test_feedback_zh.py``.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from autograder import judge as J
from autograder.fixtures import in_process
from encdec import attention as A
from encdec import model as M
from encdec.grading import language

sys.path.insert(0, str(Path(__file__).resolve().parent))
import grading_support as support

pytestmark = pytest.mark.grading
ROOT = Path(__file__).resolve().parents[1]
RECORDED = Path(__file__).with_name("feedback_en.json")
SEED = 7
CJK = re.compile(r"[\u4e00-\u9fff]")


# --- the buggy solutions: each judge, each kind of line ------------------------------------------


def block(self_mask=True, cross_mask=False, ff_in="out_4", cross=True, dropout=False, prenorm=False, cross_q="out_2"):
    """A DecoderBlock with one wire of the lesson's moved."""

    class Block(M.DecoderBlock):
        def forward(self, dec_inp, enc_inp, mask=None):
            if prenorm:
                x = dec_inp + self.attention_self(*(self.layer_norm_1(dec_inp),) * 3, mask)
                x = x + self.attention_cross(self.layer_norm_2(x), enc_inp, enc_inp)
                return x + self.feed_forward(self.layer_norm_3(x))
            out_1 = self.attention_self(dec_inp, dec_inp, dec_inp, mask if self_mask else None)
            out_1 = F.dropout(out_1, 0.1) if dropout else out_1
            out_2 = self.layer_norm_1(dec_inp + out_1)
            q = out_2 if cross_q == "out_2" else enc_inp
            out_3 = (
                self.attention_cross(q, enc_inp, enc_inp, mask)
                if cross_mask
                else self.attention_cross(q, enc_inp, enc_inp)
            )
            out_4 = self.layer_norm_2(out_2 + out_3) if cross else self.layer_norm_2(out_2)
            out_5 = self.feed_forward(out_2 if ff_in == "out_2" else out_4)
            return self.layer_norm_3(out_4 + out_5)

    return Block


def model(memory="encoder", sliced=True, masked=True, question=True, dropout=False):
    """A Transformer whose forward is the lesson's with one mistake."""

    class Model(M.Transformer):
        def forward(self, ques_b, ques_pos, ans_b, ans_pos):
            q = self.emb_layer(ques_b if question else torch.zeros_like(ques_b)) + ques_pos
            enc_out = self.encoder(q) if memory == "encoder" else q
            ids, pos = (ans_b[:, :-1], ans_pos[:, :-1]) if sliced else (ans_b, ans_pos)
            out = self.decoder(self.emb_layer(ids) + pos, enc_out, M.get_subsequent_mask(ids) if masked else None)
            return self.proj_to_vocab(F.dropout(out, 0.1) if dropout else out)

    return Model


class WrongAxisCache(A.KVCache):
    """One torch.cat on the wrong axis: the keys grow along Dh."""

    def update(self, k_new, v_new):
        self.k = k_new if self.k is None else torch.cat([self.k, k_new], dim=3)  # (N, H, 1, 2 Dh)
        self.v = v_new if self.v is None else torch.cat([self.v, v_new], dim=2)  # (N, H, T, Dh)
        return self.k, self.v


@torch.no_grad()
def second_best(logits_last, done):
    """Not the greedy choice: the second-largest logit."""
    return logits_last.topk(2, dim=-1).indices[:, 1], done


CASES = {  # name -> (check id, the student's solution)
    "softmax_not_normalized": ("decoder_block.masked_softmax", lambda s, m: torch.exp(s).masked_fill(m, 0.0)),
    "block_no_mask": ("decoder_block.output", block(self_mask=False)),
    "block_no_mask_causal": ("decoder_block.causal_hidden", block(self_mask=False)),
    "block_prenorm": ("decoder_block.output", block(prenorm=True)),
    "block_mlp_reads_out_2": ("decoder_block.output", block(ff_in="out_2")),
    "block_mask_on_cross": ("decoder_block.output", block(cross_mask=True)),
    "block_skips_cross": ("decoder_block.question_hidden", block(cross=False)),
    "block_random": ("decoder_block.output", block(dropout=True)),
    "block_shape": ("decoder_block.shapes", block(cross_q="enc")),
    "model_memory_from_embeddings": ("target_slicing.forward", model(memory="embeddings")),
    "model_not_sliced": ("target_slicing.forward", model(sliced=False)),
    "model_not_sliced_shape": ("target_slicing.forward_shapes", model(sliced=False)),
    "model_no_mask_causal": ("target_slicing.causal_hidden", model(masked=False)),
    "model_ignores_question": ("target_slicing.question_hidden", model(question=False)),
    "model_random": ("target_slicing.forward", model(dropout=True)),
    "decode_encoder_every_step": ("kv_cache.encoder_once", support.cached_decoder(encoder_every_step=True)),
    "decode_encoder_every_step_hidden": ("kv_cache.structure_hidden", support.cached_decoder(encoder_every_step=True)),
    "decode_no_cache": ("kv_cache.one_token_per_step", support.uncached),
    "decode_plain_argmax": ("kv_cache.tokens", support.cached_decoder(choose=support.plain_argmax)),
    "decode_position_skips_one": ("kv_cache.tokens", support.cached_decoder(position=lambda t: t if t < 2 else t + 1)),
    "decode_second_best": ("kv_cache.tokens", support.cached_decoder(choose=second_best)),
    "decode_wrong_shape": ("kv_cache.tokens_hidden", lambda m, q, n: support.cached_decoder()(m, q, n)[:, 1:]),
    "decode_wrong_axis_tokens": ("kv_cache.tokens", support.cached_decoder(cache=WrongAxisCache)),
    "decode_wrong_axis_structure": ("kv_cache.encoder_once", support.cached_decoder(cache=WrongAxisCache)),
    "decode_wrong_axis_encoder_every_step": (
        "kv_cache.encoder_once",
        support.cached_decoder(cache=WrongAxisCache, encoder_every_step=True),
    ),
    "passed_block_shape": ("decoder_block.shapes", M.DecoderBlock),
    "passed_model_shape": ("target_slicing.forward_shapes", M.Transformer),
    "passed_structure": ("kv_cache.structure_hidden", support.cached_decoder()),
    "update_wrong_axis": ("kv_cache.update", WrongAxisCache),
}


def saved(name: str, workdir: Path) -> tuple[str, bytes | dict | None, dict]:
    """One case's graded run, kernel side: the check id, what the kernel saved, the inputs. A check
    judged by cost runs once per run, its CPU time read around the run (here, in this process)."""
    check_id, impl = CASES[name]
    inputs = J.graded_inputs(check_id, SEED)
    if "runs" in inputs:
        return (
            check_id,
            {p: in_process.measured_run(check_id, impl, workdir, one, p) for p, one in inputs["runs"].items()},
            inputs,
        )
    return check_id, in_process.run_once(check_id, impl, workdir, inputs)[0], inputs


# --- what counts as English ----------------------------------------------------------------------

# code spans, names with _ . ( [ or digits, shapes and numbers are code, not English
_CODE = re.compile(r"`[^`]*`|\([^()\u4e00-\u9fff]*\)|\[[^\[\]\u4e00-\u9fff]*\]|[\w.]*[_.(\[0-9][\w.:,\-+\[\]()]*")
CODE_WORDS = {  # identifiers the feedback names as they are in the code (and in the Chinese lesson)
    "DecoderBlock",
    "DecoderBlock.forward",
    "Transformer",
    "Transformer.forward",
    "KVCache",
    "KVCache.update",
    "logits",
    "softmax",
    "argmax",
    "pick_next",
    "EOS",
    "BOS",
    "MLP",
    "AssertionError",
    "NotImplementedError",
    "RuntimeError",
    "IndexError",
    "ValueError",
    "Q",
    "K",
    "V",
    "N",
    "M",
    "H",
    "Ka",
    "Kq",
    "Dh",
    "T",
    "dim",
    "update",
}
_WORD = re.compile(r"[A-Za-z][A-Za-z'\-]*")


# an exception's own message, quoted as it was raised (by torch, the package or the student's code)
_QUOTED = re.compile(r"(抛出了 \w+(Error|Exception)\b).*$", re.M)


def english_runs(text: str, at_least: int = 3) -> list[str]:
    """Runs of ``at_least`` or more English words in a row (code spans, code names and quoted
    exception messages taken out)."""
    runs = []
    text = _QUOTED.sub(r"\1", text)
    for chunk in re.split(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef;:,.!?\n]+", _CODE.sub(" | ", text)):
        for piece in chunk.split("|"):
            words = [w for w in _WORD.findall(piece) if w not in CODE_WORDS]
            if len(words) >= at_least and len(words) == len(piece.split()):
                runs.append(piece.strip())
    return runs


def test_the_checker_finds_english_and_lets_code_through():
    assert english_runs("the encoder ran 3 times for one call")
    assert english_runs("第 2 步：the decoder was fed 3 tokens")
    assert not english_runs("`attention_self`（带掩码的自注意力）的 query 是 dec_inp (2, 5, 16)；课程的块给它 out_2。")
    assert not english_runs(
        "kv_cache.update：KVCache.update 抛出了 RuntimeError: Sizes of tensors must match\n（在你的 X 中抛出）"
    )
    assert not english_runs("KVCache.update 返回的键的形状为 (2, 2, 1, 8)；缓存沿 T 增长（dim=2）。")


# --- the tests -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    out = {}
    for name in CASES:
        check_id, got, inputs = saved(name, tmp_path_factory.mktemp(name))
        out[name] = (J.verify(check_id, got, inputs), J.verify(check_id, got, inputs, "zh"))
    return out


NUMBER = re.compile(r"-?\d+\.\d+(?:e-?\d+)?")


@pytest.mark.parametrize("name", CASES)
def test_english_feedback_is_unchanged(name, verdicts):
    """Word for word as recorded; a printed float may differ in its last digit on another CPU
    (torch's kernels round differently), so floats compare to 1e-5 and everything else exactly."""
    en, _ = verdicts[name]
    recorded = json.loads(RECORDED.read_text(encoding="utf-8"))[name]
    assert NUMBER.sub("#", en.message) == NUMBER.sub("#", recorded)
    if "CPU time" in en.message:  # a ratio of CPU times measured in this run: its words are recorded, not its numbers
        return
    got, want = (list(map(float, NUMBER.findall(m))) for m in (en.message, recorded))
    assert got == pytest.approx(want, rel=1e-5, abs=1e-5), (en.message, recorded)


@pytest.mark.parametrize("name", CASES)
def test_chinese_feedback_has_no_english_sentence(name, verdicts):
    en, zh = verdicts[name]
    assert (en.ok, en.parts, en.label, en.credit) == (zh.ok, zh.parts, zh.label, zh.credit)
    assert CJK.search(zh.message) and not CJK.search(en.message)
    assert not english_runs(zh.message), (english_runs(zh.message), zh.message)


def test_every_chinese_template_has_the_english_fields():
    assert language.MESSAGES["zh"].keys() == language.MESSAGES["en"].keys()
    for key, en in language.MESSAGES["en"].items():
        zh = language.MESSAGES["zh"][key]
        assert set(re.findall(r"{(\w*)", en)) == set(re.findall(r"{(\w*)", zh)), key
        assert CJK.search(zh) or not english_runs(re.sub(r"{\w*}", " ", en), 2), key
    for english, local in language.TERMS["zh"].items():  # "{}" and the regular expressions' groups
        assert english.count("{}") == local.count("{}"), english
        groups = re.compile(english).groups if "\\" in english else 0
        assert set(re.findall(r"\\(\d)", local)) == {str(i + 1) for i in range(groups)}, english


def test_every_integrity_reason_has_its_chinese_words():
    """The scan's reasons (advice for the instructor's review, never a score) are worded in both
    languages, so the review list reads the same in either."""
    from autograder.integrity.rules import RULES

    for key in {k for _, k in RULES}:
        assert "{found}" in language.MESSAGES["en"][f"flag_{key}"], key
        assert (
            CJK.search(language.MESSAGES["zh"][f"flag_{key}"]) and "{found}" in language.MESSAGES["zh"][f"flag_{key}"]
        )


def record(names: list[str] | None = None) -> None:
    """Write the English feedback of the cases named (every case when none is) to feedback_en.json."""
    import tempfile

    recorded = json.loads(RECORDED.read_text(encoding="utf-8")) if RECORDED.exists() else {}
    for name in names or list(CASES):
        with tempfile.TemporaryDirectory() as workdir:
            check_id, got, inputs = saved(name, Path(workdir))
            recorded[name] = J.verify(check_id, got, inputs).message
    RECORDED.write_text(json.dumps(recorded, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":  # re-record after an intended change of wording: python tests/test_feedback_zh.py [case ...]
    record(sys.argv[1:] or None)
