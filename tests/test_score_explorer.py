"""ScoreExplorer (chapter 11): one query and one key in one head of the trained model.

Its Python twin reads the package's own model (every attention's Q and K through hooks) and must give
the package's attention weights; the page's JavaScript (model_forward.js on the exported weights, in
node) must give the same q, k, products, score and weights; the figure carries only its first
setting's numbers, so the page stays light until its reader asks for more.
"""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
import torch
import traitlets
from test_widgets import ASK_SHARED, _run_widget_js

from encdec.data import VOCAB, encode_answer, encode_question
from encdec.train import load_run
from encdec.widgets import ScoreExplorer, parse_question
from encdec.widgets._base import LESSON_QUESTION_TEXT
from encdec.widgets.attention_maps import ATTENTION_KINDS
from encdec.widgets.score_explorer import FIRST, score_parts, score_step, true_answer

OTHER = "BOS POSITIVE 12 add POSITIVE 07 EOS"
# (kind, layer, head, query, key): the first setting, a masked key, every kind and both layers
SETTINGS = [
    ("cross", 1, 1, 2, 3),
    ("decoder_self", 0, 3, 1, 3),
    ("decoder_self", 1, 0, 3, 0),
    ("encoder_self", 0, 2, 4, 8),
    ("encoder_self", 1, 1, 0, 5),
    ("cross", 0, 0, 0, 1),
]


@pytest.fixture(scope="module")
def modern():
    model, _ = load_run("modern")
    return model


@pytest.fixture(scope="module")
def parts(modern):
    return {text: score_parts(modern, encode_question(text)) for text in (LESSON_QUESTION_TEXT, OTHER)}


def test_every_score_row_gives_the_packages_attention_weights(modern, parts):
    """q . k / sqrt(Dh) over a query's row, masked then softmaxed, is the module's own last_attention,
    for every kind, layer, head and query; a masked key gets exactly 0, its score left out of the sum."""
    H, M = modern.config.num_heads, modern.config.emb_dim
    p = parts[LESSON_QUESTION_TEXT]
    assert [VOCAB[i] for i in p["answer"]] == ["BOS", "POSITIVE", "0", "4", "EOS"]
    for kind in ATTENTION_KINDS:
        for layer in p[kind]:
            q, k, weights = np.array(layer["q"]), np.array(layer["k"]), np.array(layer["weights"])
            assert q.shape == (weights.shape[1], M) and k.shape == (weights.shape[2], M)
            for head in range(H):
                for query in range(len(q)):
                    step = score_step(layer["q"], layer["k"], H, head, query, 0, kind == "decoder_self")
                    assert step["weights"] == pytest.approx(weights[head, query], abs=1e-6)
                    if kind == "decoder_self":
                        assert all(w == 0.0 for w in step["weights"][query + 1 :])
                    assert step["scale"] == 4.0 and sum(step["weights"]) == pytest.approx(1.0)
    step = score_step(p["cross"][1]["q"], p["cross"][1]["k"], H, 1, 2, 3, False)
    assert step["score"] == step["scores"][3] and step["dot"] == pytest.approx(sum(step["products"]))
    assert step["weights"][3] == pytest.approx(np.exp(step["score"] - step["top"]) / step["total"])


def test_the_first_setting_reads_a_digit_and_travels_with_the_figure(parts):
    """The figure opens on the units row reading the units digit 0 of 30, a weight well over an even
    spread; it carries that setting's q and k (a few kB), and its twin gives the numbers the page draws."""
    w = ScoreExplorer()
    assert (w.kind, w.layer, w.head, w.query, w.key) == tuple(FIRST.values())
    p = parts[LESSON_QUESTION_TEXT]
    first = p["cross"][1]
    exact = {name: np.frombuffer(base64.b64decode(w.shown[name]), dtype="<f4").reshape(-1, 64) for name in "qk"}
    assert all(np.array_equal(exact[name], np.float32(first[name])) for name in "qk"), "float32 as computed"
    assert w.shown["fill"] == torch.finfo(torch.float32).min  # encdec.attention.masked_softmax's fill
    assert w.shown["heads"] == 4 and w.shown["layers"] == {"encoder_self": 2, "decoder_self": 2, "cross": 2}
    assert len(json.dumps(w.shown)) < 20_000
    model, _ = load_run("modern")
    step = w.step(model)
    assert (VOCAB[p["question"][w.key]], VOCAB[p["answer"][w.query]]) == ("0", "0")
    assert step["weights"][w.key] > 3 / 9, "the opening example should show a key the query reads"


def test_the_figure_refuses_what_it_cannot_show():
    w = ScoreExplorer()
    with pytest.raises(traitlets.TraitError, match="kind must be one of"):
        w.kind = "self"
    with pytest.raises(traitlets.TraitError, match="counts from 0"):
        w.key = -1
    with pytest.raises(ValueError, match="not a question of the task"):
        ScoreExplorer(question="2 * 3")
    assert true_answer(encode_question("BOS NEGATIVE 45 add POSITIVE 19 EOS")) == encode_answer("BOS NEGATIVE 26 EOS")


def test_in_a_book_build_the_figure_names_the_sites_weights(monkeypatch):
    from encdec.widgets.export_weights import SITE_WEIGHTS, SITE_WEIGHTS_ENV

    monkeypatch.setenv(SITE_WEIGHTS_ENV, SITE_WEIGHTS)
    w = ScoreExplorer()
    assert w.weights == {} and w.weights_src == SITE_WEIGHTS and w.shown["q"]
    monkeypatch.delenv(SITE_WEIGHTS_ENV)
    assert set(ScoreExplorer().weights) == {"modern"}


def test_the_page_computes_the_python_numbers(tmp_path, modern, parts):
    """model_forward.js on the exported weights: every attention's q and k of two questions, and each
    setting's slices, products, dot product, score, row and weights, equal the Python twin's."""
    w = ScoreExplorer()
    H = modern.config.num_heads
    questions = [encode_question(text) for text in (LESSON_QUESTION_TEXT, OTHER)]
    js = _run_widget_js(
        tmp_path,
        "score_explorer.js",
        ["loadModel", "attentionParts", "scoreStep", "positionTokens", "lengths", "arithmetic", "unpacked"],
        f"(() => {{ const net = loadModel({json.dumps(w.weights['modern'])});"
        f" const first = unpacked({json.dumps(w.shown)});"
        f" return {json.dumps(questions)}.map((ids) => {{ const p = attentionParts(net, ids);"
        f" return {{ p, first, arithmetic: arithmetic(ids), steps: {json.dumps(SETTINGS)}.map(([kind, l, h, i, j]) =>"
        f" scoreStep(p[kind][l].q, p[kind][l].k, {H}, h, i, j, kind === 'decoder_self')),"
        " tokens: ['encoder_self', 'decoder_self', 'cross'].map((kind) => [positionTokens(kind, ids), lengths(kind)]) }; }); })()",
        ASK_SHARED,
    )
    assert [got["arithmetic"] for got in js] == ["-30 - -34", "12 + 7"]
    first = parts[LESSON_QUESTION_TEXT]["cross"][1]  # what the figure carries, unpacked in the page: float32 exactly
    assert all(np.array_equal(np.array(js[0]["first"][name]), np.float32(first[name])) for name in "qk")
    for text, got in zip((LESSON_QUESTION_TEXT, OTHER), js, strict=True):
        want = parts[text]
        assert parse_question(got["arithmetic"]) == (want["question"], None)  # what the field shows reads back
        assert got["p"]["answer"] == want["answer"]
        for kind in ATTENTION_KINDS:
            for g, p in zip(got["p"][kind], want[kind], strict=True):
                assert np.allclose(g["q"], p["q"], atol=1e-5) and np.allclose(g["k"], p["k"], atol=1e-5)
        for (kind, layer, head, query, key), step in zip(SETTINGS, got["steps"], strict=True):
            p = want[kind][layer]
            py = score_step(p["q"], p["k"], H, head, query, key, kind == "decoder_self")
            assert step["masked"] == py["masked"]
            for name in ("q", "k", "products", "scores", "weights"):
                assert step[name] == pytest.approx(py[name], rel=1e-6, abs=1e-5), (kind, name)
            for name in ("dot", "scale", "score", "top", "total"):
                assert step[name] == pytest.approx(py[name], rel=1e-6, abs=1e-5), (kind, name)
            assert step["weights"][key] == pytest.approx(p["weights"][head][query][key], abs=1e-5)
        question = [VOCAB[i] for i in want["question"]]
        fed = [VOCAB[i] for i in want["answer"][:-1]]
        assert got["tokens"] == [[[question, question], [9, 9]], [[fed, fed], [4, 4]], [[fed, question], [4, 9]]]
