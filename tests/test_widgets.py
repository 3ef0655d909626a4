"""The widgets' Python side: numerics against the package, trait sync, from_model recordings."""

from __future__ import annotations

import importlib.util
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import traitlets

import encdec.widgets
from encdec.attention import MultiHeadAttention, get_subsequent_mask, masked_softmax
from encdec.data import VOCAB, encode_answer
from encdec.generate import greedy_decode
from encdec.model import Transformer, shift_targets
from encdec.train import load_run
from encdec.widgets import (
    AskTheModel,
    AttentionMapViewer,
    BreakIt,
    CrossAttentionExplorer,
    CrossEntropySlider,
    MaskToggle,
    PrefillDecodeStepper,
    QuickCheck,
    ShiftTeacherForcing,
    SoftmaxMaskCompare,
)
from encdec.widgets import quick_check as qc
from encdec.widgets._base import LESSON_ANSWER, LESSON_QUESTION, LESSON_QUESTION_TEXT, question_ids, softmax
from encdec.widgets.cross_entropy import cross_entropy_example
from encdec.widgets.mask_toggle import masked_softmax_rows, preset_mask
from encdec.widgets.registry import WIDGETS
from encdec.widgets.shift_teacher_forcing import teacher_forcing_table

ROOT = Path(__file__).resolve().parent.parent
ALL_WIDGETS = [getattr(encdec.widgets, name) for name in WIDGETS]  # the one list (registry.py)


@pytest.fixture(scope="module")
def model():
    with torch.random.fork_rng():
        torch.manual_seed(1)
        return Transformer().eval()


def test_masked_softmax_rows_match_the_package_and_sum_to_one():
    g = torch.Generator().manual_seed(0)
    for K in (1, 3, 5, 7):
        scores = torch.randn(K, K, generator=g, dtype=torch.float64) * 3
        mask = torch.rand(K, K, generator=g) < 0.5
        mask[0] = True  # a row with every source forbidden
        ours = torch.tensor(masked_softmax_rows(scores.tolist(), mask.tolist()), dtype=torch.float64)
        torch.testing.assert_close(ours, masked_softmax(scores, mask), rtol=0, atol=1e-12)
        torch.testing.assert_close(ours.sum(-1), torch.ones(K, dtype=torch.float64))
        assert (ours[~mask[:, :] & ~mask.all(-1, keepdim=True)] > 0).all()


def test_presets():
    K = 5
    causal = torch.tensor(preset_mask("causal", K))
    assert torch.equal(causal, get_subsequent_mask(torch.zeros(1, K, dtype=torch.long))[0])
    padding = preset_mask("padding", K, num_padding=2)
    assert all(row == [False, False, False, True, True] for row in padding)
    assert not any(any(r) for r in preset_mask("none", K))
    with pytest.raises(ValueError, match="unknown mask preset 'diagonal'"):
        preset_mask("diagonal", K)
    with pytest.raises(ValueError, match="num_padding"):
        preset_mask("padding", K, num_padding=5)


def test_mask_toggle_defaults_are_the_lesson_example():
    """What the decoder is fed, BOS POSITIVE 0 4: the shifted answer, never EOS (a 4 x 4 grid)."""
    w = MaskToggle()
    dec_in, _ = shift_targets(torch.tensor([encode_answer("BOS POSITIVE 04 EOS")]))
    assert w.tokens == [VOCAB[i] for i in dec_in[0]] == ["BOS", "POSITIVE", "0", "4"]
    assert w.mask == preset_mask("causal", 4) == get_subsequent_mask(dec_in)[0].tolist()
    weights = w.weights()
    assert weights[0] == [1.0, 0.0, 0.0, 0.0]  # BOS reads only itself under the causal mask
    assert all(math.isclose(sum(r), 1.0) for r in weights)


def test_mask_toggle_syncs_with_the_front_end():
    w = MaskToggle()
    state = w.get_state()
    assert state["mask"] == preset_mask("causal", 4) and state["preset"] == "causal"
    json.dumps(state["mask"])  # what the browser receives
    # What a click on cell (2, 3) sends from the browser: the whole mask and preset "custom".
    clicked = [list(r) for r in state["mask"]]
    clicked[2][3] = False
    w.set_state({"mask": clicked, "preset": "custom"})
    assert w.mask[2][3] is False and w.preset == "custom"
    expected = torch.softmax(torch.tensor(w.scores[2][:4], dtype=torch.float64), -1).tolist()
    assert w.weights()[2] == pytest.approx(expected)
    # A preset chosen in Python resets the mask, which is what the browser then draws.
    w.preset = "none"
    assert w.get_state()["mask"] == preset_mask("none", 4)
    w.toggle(3, 0)
    assert w.mask[3][0] is True and w.preset == "custom"


def test_mask_toggle_takes_an_explicit_mask():
    diagonal = [[i != j for j in range(3)] for i in range(3)]
    w = MaskToggle(tokens=("a", "b", "c"), mask=diagonal)
    assert w.preset == "custom" and w.mask == diagonal
    assert w.weights() == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]


def test_mask_toggle_rejects_bad_input():
    w = MaskToggle()
    with pytest.raises(traitlets.TraitError, match="mask must be 4 x 4"):
        w.mask = [[False] * 5] * 4
    with pytest.raises(ValueError, match="unknown mask preset"):
        MaskToggle(preset="diagonal")
    with pytest.raises(traitlets.TraitError, match="scores must be 3 x 3"):
        MaskToggle(tokens=("a", "b", "c"), scores=[[0.0, 1.0]] * 3)


def test_softmax_before_and_after_the_mask():
    w = SoftmaxMaskCompare()
    assert w.tokens == ["BOS", "POSITIVE", "0", "4"]  # the decoder's input: no EOS reader
    assert w.reader == 2 and w.row()[3:] == [w.future_score]
    assert sum(w.mask_then_softmax()) == pytest.approx(1.0)
    sums = []
    for future in (-4.0, 0.0, 3.0, 8.0):
        w.future_score = future
        assert sum(w.mask_then_softmax()) == pytest.approx(1.0)
        assert w.mask_then_softmax()[:3] == pytest.approx(softmax(w.scores[:3]))  # the future cannot matter
        sums.append(sum(w.softmax_then_zero()))
    assert all(s < 1 for s in sums) and sums == sorted(sums, reverse=True)  # a bigger future steals more
    with pytest.raises(ValueError, match="one score per token"):
        SoftmaxMaskCompare(scores=(1.0, 2.0))


@pytest.mark.parametrize("swap", [False, True])
def test_cross_attention_shapes_match_multi_head_attention(swap):
    N, Ka, Kq, M, H = 2, 5, 9, 8, 2
    mha = MultiHeadAttention(H, M)
    dec, enc = torch.randn(N, Ka, M), torch.randn(N, Kq, M)
    q_src, kv_src = (enc, dec) if swap else (dec, enc)
    out = mha(q_src, kv_src, kv_src)
    shapes = CrossAttentionExplorer(Ka=Ka, Kq=Kq, swap_q=swap).shapes()
    concrete = {k: tuple(N if d == "N" else M if d == "M" else d for d in v) for k, v in shapes.items()}
    assert concrete["output"] == tuple(out.shape)
    assert concrete["A"] == (N, *mha.last_attention.shape[2:])
    assert concrete["Q"] == tuple(q_src.shape) and concrete["K"] == tuple(kv_src.shape)
    assert shapes["A"] == (("N", Kq, Ka) if swap else ("N", Ka, Kq))


def test_cross_attention_explorer_validates_lengths():
    w = CrossAttentionExplorer()
    assert (w.Ka, w.Kq, w.selected) == (4, 9, [3, 7])  # the decoder is fed 4 positions: BOS POSITIVE 0 4
    assert w.answer_tokens == ["BOS", "POSITIVE", "0", "4"]
    with pytest.raises(traitlets.TraitError, match=r"Kq must be in \[1, 12\]"):
        w.Kq = 0


def test_cross_attention_explorer_shows_a_models_weights_at_their_shape():
    """The grid of A holds numbers: the trained model's last layer (heads averaged) at the running
    example's shape, every row a distribution; made-up weights (still rows of 1) at any other."""
    model, _ = load_run("modern")
    w = CrossAttentionExplorer.from_model(model)
    assert (w.Ka, w.Kq, w.answer_tokens, w.source) == (4, 9, ["BOS", "POSITIVE", "0", "4"], "trained")
    ques = question_ids(LESSON_QUESTION_TEXT)
    ans = torch.tensor([encode_answer("BOS POSITIVE 04 EOS")])
    with torch.no_grad():
        model(ques, model.positions(9), ans, model.positions(5))
    want = model.decoder.layers[-1].attention_cross.last_attention[0].mean(0)  # (Ka, Kq), heads averaged
    assert torch.tensor(w.shown_weights()) == pytest.approx(want, abs=1e-4)
    w.Ka = 6
    assert len(w.shown_weights()) == 6 and w.shown_weights() != w.weights
    w.Ka, w.swap_q = 4, True
    assert len(w.shown_weights()) == 9 and len(w.shown_weights()[0]) == 4
    for rows in (w.shown_weights(), CrossAttentionExplorer().shown_weights()):
        assert all(math.isclose(sum(r), 1.0) for r in rows)


def test_teacher_forcing_table_agrees_with_shift_targets():
    tokens = list(LESSON_ANSWER)
    dec_in, labels = shift_targets(torch.tensor([encode_answer("BOS POSITIVE 04 EOS")]))
    table = ShiftTeacherForcing().table()
    assert [r["input"] for r in table] == [VOCAB[i] for i in dec_in[0]]
    assert [r["label"] for r in table] == [VOCAB[i] for i in labels[0]]
    assert not any(r["leak"] for r in table)
    no_shift = teacher_forcing_table(tokens, shift=False, causal_mask=True)
    assert all(r["leak"] and r["input"] == r["label"] for r in no_shift)
    no_mask = teacher_forcing_table(tokens, shift=True, causal_mask=False)
    assert [r["leak"] for r in no_mask] == [True, True, True, False]  # the last label (EOS) is never an input


def test_cross_entropy_example_matches_autograd():
    for p in (0.20, 0.40, 0.9):
        ex = CrossEntropySlider(p_correct=p).example()
        probs = torch.tensor([ex["probs"][t] for t in VOCAB], dtype=torch.float64)
        assert probs.sum().item() == pytest.approx(1.0)
        logits = probs.log().requires_grad_()
        loss = torch.nn.functional.cross_entropy(logits[None], torch.tensor([VOCAB.index("4")]))
        loss.backward()
        assert ex["loss"] == pytest.approx(loss.item())
        assert [ex["grad"][t] for t in VOCAB] == pytest.approx(logits.grad.tolist())
    assert round(CrossEntropySlider(0.20).example()["loss"], 3) == 1.609
    assert round(CrossEntropySlider(0.40).example()["loss"], 3) == 0.916
    assert CrossEntropySlider().example()["probs"]["3"] == pytest.approx(0.55)
    with pytest.raises(traitlets.TraitError, match="strictly between 0 and 1"):
        CrossEntropySlider(p_correct=1.0)


def test_prefill_decode_stepper_records_the_real_decoding(model):
    w = PrefillDecodeStepper.from_model(model)
    ids = greedy_decode(model, question_ids(LESSON_QUESTION_TEXT), 4)[0].tolist()
    produced = [VOCAB[i] for i in ids[1:]]
    if "EOS" in produced:
        produced = produced[: produced.index("EOS") + 1]
    assert w.steps == produced
    assert w.question == list(LESSON_QUESTION)
    L = len(model.decoder.layers)
    assert w.self_cache_lens == [[s + 1] * L for s in range(len(w.steps))]  # one more row per step
    assert w.cross_cache_lens == [[9] * L for _ in w.steps]  # the memory rows, fixed
    assert len(w.probs) == len(w.steps) and all(0 < p <= 1 for p in w.probs)
    with pytest.raises(traitlets.TraitError, match="step must be in"):
        w.step = len(w.steps) + 1
    assert PrefillDecodeStepper().steps == ["POSITIVE", "0", "4", "EOS"]
    assert w.prefix == ["BOS"]


def test_prefill_decode_stepper_with_a_multi_token_prefix(model):
    """The prefill feeds the whole known answer prefix: P cache rows after step 1, then one more per step."""
    w = PrefillDecodeStepper.from_model(model, prefix="BOS POSITIVE 0")
    prefix = torch.tensor([[VOCAB.index(t) for t in ("BOS", "POSITIVE", "0")]])
    ids = greedy_decode(model, question_ids(LESSON_QUESTION_TEXT), 2, prefix=prefix)[0].tolist()
    produced = [VOCAB[i] for i in ids[3:]]
    if "EOS" in produced:
        produced = produced[: produced.index("EOS") + 1]
    assert w.prefix == ["BOS", "POSITIVE", "0"] and w.steps == produced
    L = len(model.decoder.layers)
    assert w.self_cache_lens == [[3 + s] * L for s in range(len(w.steps))]
    assert PrefillDecodeStepper(prefix=["BOS", "POSITIVE"], steps=["0"]).self_cache_lens == [[2] * 4]
    with pytest.raises(ValueError, match="must start with BOS"):
        PrefillDecodeStepper.from_model(model, prefix="POSITIVE 0")
    with pytest.raises(ValueError, match="nothing to generate"):
        PrefillDecodeStepper.from_model(model, prefix="BOS POSITIVE 0 4 EOS")


def test_prefill_decode_stepper_counts_each_steps_work(model):
    """The work of a decode step, counted through hooks, is the lesson's arithmetic for one position:
    per layer the four self-attention projections, the cross-attention's Q and output projections
    (its K and V are cached), scores and weighted values over T cached rows and the Kq memory rows,
    the MLP; and the readout. The prefill alone pays for the encoder."""
    w = PrefillDecodeStepper.from_model(model, prefix="BOS POSITIVE")
    c, Kq = model.config, len(w.question)
    M, F, L, V = c.emb_dim, c.feedforward_dim, c.num_dec_layers, c.vocab_size
    for s, (encoder, decoder) in enumerate(w.work[1:], start=2):
        T = w.self_cache_lens[s - 1][0]  # rows the new position attends over, itself included
        assert encoder == 0
        assert decoder == L * (6 * M * M + 2 * T * M + 2 * Kq * M + 2 * M * F) + M * V
    encoder, decoder = w.work[0]
    assert encoder > 0 and decoder > w.work[1][1]
    assert PrefillDecodeStepper().work == []  # the lesson's example, without a model: no bars


def test_the_stepper_of_a_shipped_run_samples_as_sampling_probs_says():
    """from_run records its first view in Python: greedy, decode_trace; sampled, each step's distribution
    is sampling_probs of the model's logits, the draw mulberry32's number through the inverse CDF. The
    settings are checked; the page runs every later one (tests/test_model_generation_js.py)."""
    from encdec.sampling import sampling_probs
    from encdec.widgets.prefill_decode import draw_token, mulberry32

    weights = {"modern": {}, "historical": {}}  # the page's weights are not needed here
    w = PrefillDecodeStepper.from_run("historical", mode="sample", temperature=2.0, top_k=3, seed=4, weights=weights)
    model, _ = load_run("historical")
    tokens, uniforms = ["BOS"], mulberry32(4)
    for s, (token, dist) in enumerate(zip(w.steps, w.dists)):
        ans = torch.tensor([[VOCAB.index(x) for x in tokens] + [VOCAB.index("EOS")] * (5 - len(tokens))])
        with torch.no_grad():
            logits = model(question_ids(LESSON_QUESTION_TEXT), model.positions(9), ans, model.positions(5))[:, s]
        q = sampling_probs(logits, 2.0, 3)[0]
        assert torch.allclose(torch.tensor(dist["q"]), q, atol=1e-6) and int((q > 0).sum()) == 3
        assert dist["u"] == next(uniforms) and VOCAB[draw_token(dist["q"], dist["u"])] == token
        tokens.append(token)
    assert w.self_cache_lens == [[1 + s] * 4 for s in range(len(w.steps))] and w.preset == "historical"
    greedy = PrefillDecodeStepper.from_run("modern", prefix="BOS POSITIVE 0", weights=weights)
    assert greedy.steps == ["4", "EOS"] and greedy.dists[0]["q"] is None and greedy.mode == "greedy"
    for trait, bad in (("mode", "beam"), ("temperature", -1.0), ("top_k", 0), ("top_p", 1.5), ("seed", -1)):
        with pytest.raises(traitlets.TraitError, match=trait):
            setattr(w, trait, bad)
    with pytest.raises(ValueError, match="preset must be one of"):
        PrefillDecodeStepper.from_run("overfit", weights=weights)


def test_attention_map_viewer_shapes(model):
    w = AttentionMapViewer.from_model(model)
    L, H = len(model.encoder.layers), model.config.num_heads
    maps = {k: torch.tensor(v) for k, v in w.maps.items()}
    assert maps["encoder_self"].shape == (L, H, 9, 9)
    assert maps["decoder_self"].shape == (L, H, 4, 4)
    assert maps["cross"].shape == (L, H, 4, 9)
    for m in maps.values():
        torch.testing.assert_close(m.sum(-1), torch.ones(m.shape[:-1]), atol=1e-3, rtol=0)
    assert (maps["decoder_self"].triu(diagonal=1) == 0).all()  # the causal mask, seen in the weights
    w.set_state({"kind": "decoder_self", "layer": 1, "head": 2})
    assert w.current() == w.maps["decoder_self"][1][2]
    with pytest.raises(traitlets.TraitError, match="kind must be one of"):
        w.kind = "self"
    assert len(w.answer) == 5 and w.question == list(LESSON_QUESTION)


@pytest.mark.parametrize("cls", ALL_WIDGETS)
def test_every_widget_builds_without_arguments(cls):
    w = cls()
    state = w.get_state()
    name = WIDGETS[cls.__name__]
    assert state["_esm"] == (ROOT / "encdec" / "widgets" / "bundle" / f"{name}.js").read_text(encoding="utf-8")
    # one self-contained module: the widget's default export, the helpers it imports inside, no import left
    assert re.search(r"export ?\{[^}]* as default", state["_esm"]) and "function h(" in state["_esm"]
    assert not re.search(r"(^|;)import[ {]", state["_esm"], re.M)  # minified: statements follow a ';'
    assert ".encdec-widget" in state["_css"]
    json.dumps({k: v for k, v in state.items() if not isinstance(v, bytes)})


def test_a_widget_not_in_the_registry_or_without_its_bundle_says_what_to_do(monkeypatch):
    from encdec.widgets import _base

    class Unlisted(MaskToggle):  # a subclass is the registered widget it extends
        pass

    assert _base.registered_name(Unlisted) == "mask_toggle"
    with pytest.raises(TypeError, match="registry.py"):
        _base.registered_name(type("Stray", (_base.BookWidget,), {}))
    monkeypatch.setattr(_base, "BUNDLE", "no-such-folder")
    with pytest.raises(_base.BundleMissing, match="run `make widgets`"):
        MaskToggle()


def test_constants_js_says_what_the_data_module_says(tmp_path):
    """constants.js, which every widget imports for the vocabulary and the lengths, as node reads it,
    holds encdec/data.py's values; and it is what the bundle step writes now (scripts/widgets_bundle.py)."""
    import shutil
    import subprocess

    from encdec import data

    spec = importlib.util.spec_from_file_location("widgets_bundle", ROOT / "scripts" / "widgets_bundle.py")
    bundle = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bundle)
    constants = ROOT / "encdec" / "widgets" / "constants.js"
    assert constants.read_text(encoding="utf-8") == bundle.constants_js()
    (tmp_path / "read.mjs").write_text(
        f"import * as c from {json.dumps(constants.as_uri())};\nconsole.log(JSON.stringify(c));\n"
    )
    got = json.loads(
        subprocess.run(
            [shutil.which("node"), str(tmp_path / "read.mjs")], capture_output=True, text=True, check=True
        ).stdout
    )
    ids = data.TOKEN_TO_ID
    signs, digits, ops = (
        [ids["POSITIVE"], ids["NEGATIVE"]],
        [ids[str(d)] for d in range(10)],
        [ids["add"], ids["subtract"]],
    )
    assert got == {
        "TOKENS": list(data.VOCAB),
        "BOS_ID": ids["BOS"],
        "EOS_ID": ids["EOS"],
        "SIGN_IDS": {"POSITIVE": ids["POSITIVE"], "NEGATIVE": ids["NEGATIVE"]},
        "OP_IDS": {"add": ids["add"], "subtract": ids["subtract"]},
        "QUESTION_LEN": data.QUESTION_LEN,
        "ANSWER_LEN": data.ANSWER_LEN,
        "OPERAND_MAX": data.OPERAND_MAX,
        # BOS sign d d op sign d d EOS
        "QUESTION_LAYOUT": [[ids["BOS"]], signs, digits, digits, ops, signs, digits, digits, [ids["EOS"]]],
    }


def test_the_static_page_maps_every_registered_widget_to_its_module_script():
    """The built site's widgets.js (_base.renderer_js) carries the map of the registry's widgets to their
    module scripts, and nothing else: a saved state names a widget, never a path."""
    import re as re_

    from encdec.widgets._base import SITE_ESM, renderer_js

    found = re_.search(r"const MODULES = (\{.*?\});", renderer_js())
    assert found and json.loads(found.group(1)) == {name: f"{SITE_ESM}/{name}.js" for name in WIDGETS.values()}


def test_each_widget_is_one_python_file_and_one_js_file_of_the_same_name():
    """mask_toggle.py holds MaskToggle and its numerics; mask_toggle.js draws it; nothing else per widget."""
    folder = ROOT / "encdec" / "widgets"
    stems = []
    for cls in ALL_WIDGETS:
        stem = cls.__module__.rsplit(".", 1)[1]
        assert stem == WIDGETS[cls.__name__] and (folder / f"{stem}.js").is_file(), cls
        stems.append(stem)
    assert len(set(stems)) == len(stems), "two widgets share a file"
    # shared by several figures: common.js (+ _base.py), and the model's forward pass in the page
    # (model_forward.js, whose weights export_weights.py exports) with the task's questions and the
    # site's weights loader (task.js: the figures that run the model), the facts of encdec/data.py
    # (constants.js, written by the bundle step); the generation view's run in the page (prefill_run.js,
    # its drawing being prefill_decode.js); and the static page's: the renderer of saved widget
    # views (static_page.js) and the unpacking of the site's weights script (site_weights.js), both
    # written into the built site by scripts/book_assets.py
    assert sorted(p.stem for p in folder.glob("*.js")) == sorted(
        [*stems, "common", "model_forward", "task", "constants", "prefill_run", "static_page", "site_weights"]
    )
    assert sorted(p.stem for p in folder.glob("*.py")) == sorted(
        [*stems, "__init__", "_base", "export_weights", "registry"]
    )


def _load_book_assets():
    spec = importlib.util.spec_from_file_location("book_assets", ROOT / "scripts" / "book_assets.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_build_cache_is_cleared_when_widget_code_changes(tmp_path):
    assets = _load_book_assets()
    (tmp_path / "encdec" / "widgets").mkdir(parents=True)
    js = tmp_path / "encdec" / "widgets" / "mask_toggle.js"
    js.write_text("export default {}")
    build = tmp_path / "_build"
    stale = [build / ".jupyter_cache", build / ".doctrees"]  # executed outputs, Sphinx's environment

    def make_stale():
        for folder in stale:
            folder.mkdir(parents=True, exist_ok=True)

    make_stale()
    assert assets.check_cache(build, tmp_path) is True  # no stamp yet: stale by definition
    assert not any(f.exists() for f in stale)
    make_stale()
    assert assets.check_cache(build, tmp_path) is False  # nothing changed: both stay
    assert all(f.is_dir() for f in stale)
    js.write_text("export default { render() {} }")
    assert assets.check_cache(build, tmp_path) is True
    assert not any(f.exists() for f in stale)


def test_build_cache_is_cleared_when_a_checkpoint_the_rc_or_the_fonts_change(tmp_path, monkeypatch):
    """A font installed after a build (the CJK glyphs of the Chinese labels) changes every figure:
    the executed outputs and matplotlib's own font list must go, as for a new checkpoint."""
    assets = _load_book_assets()
    (tmp_path / "encdec" / "checkpoints" / "modern").mkdir(parents=True)
    (tmp_path / "book").mkdir()
    rc, weights = tmp_path / "book" / "matplotlibrc", tmp_path / "encdec" / "checkpoints" / "modern" / "model.pt"
    rc.write_text("font.family: DejaVu Sans\n")
    weights.write_bytes(b"weights")
    build = tmp_path / "_build"
    stale = [build / ".jupyter_cache", build / ".doctrees", build / ".matplotlib"]
    fonts = [b"/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"]
    monkeypatch.setattr(assets, "_fonts", lambda: b"\n".join(fonts))
    assets.check_cache(build, tmp_path)
    for change in (
        lambda: fonts.append(b"/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"),
        lambda: rc.write_text("font.family: DejaVu Sans, Noto Sans CJK SC\n"),
        lambda: weights.write_bytes(b"retrained"),
    ):
        for folder in stale:
            folder.mkdir(parents=True, exist_ok=True)
        assert assets.check_cache(build, tmp_path) is False  # nothing changed yet
        change()
        assert assets.check_cache(build, tmp_path) is True
        assert not any(f.exists() for f in stale)


def _run_widget_js(tmp_path, widget_file: str, names: list[str], calls: str, shared: tuple[str, ...] = ()):
    """Evaluate ``calls`` (a JS expression) with ``names`` imported from one widget's ES module
    (``shared``: the other modules that define some of them, e.g. ``model_forward.js``)."""
    import shutil
    import subprocess

    from node_support import widget_module

    node = shutil.which("node")
    assert node, "node is needed (the book build needs it too: install Node.js)"
    (tmp_path / "widget.mjs").write_text(widget_module(names, (widget_file, *shared, "common.js")))
    (tmp_path / "run.mjs").write_text(
        f"import {{ {', '.join(names)} }} from './widget.mjs';\nconsole.log(JSON.stringify({calls}));\n"
    )
    out = subprocess.run([node, str(tmp_path / "run.mjs")], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_javascript_numerics_match_python(tmp_path):
    """The browser computes what the page shows: its numbers equal the Python helpers'."""
    g = torch.Generator().manual_seed(3)
    scores = (torch.randn(6, 6, generator=g) * 2).tolist()
    mask = (torch.rand(6, 6, generator=g) < 0.4).tolist()
    mask[1] = [True] * 6
    tokens = list(LESSON_ANSWER)
    js = _run_widget_js(
        tmp_path,
        "shift_teacher_forcing.js",
        ["maskedSoftmaxRow", "teacherForcingTable"],
        f"{{ rows: {json.dumps(scores)}.map((r, i) => maskedSoftmaxRow(r, {json.dumps(mask)}[i])),"
        f" tables: [[true, true], [false, true], [true, false], [false, false]].map(([s, m]) =>"
        f" teacherForcingTable({json.dumps(tokens)}, s, m)) }}",
    )
    for got, want in zip(js["rows"], masked_softmax_rows(scores, mask), strict=True):
        assert got == pytest.approx(want, abs=1e-12)
    for (shift, causal), table in zip([(True, True), (False, True), (True, False), (False, False)], js["tables"]):
        py = teacher_forcing_table(tokens, shift, causal)
        assert [(r["label"], r["readable"], r["leak"]) for r in table] == [
            (r["label_index"], r["readable"], r["leak"]) for r in py
        ]
    given = CrossAttentionExplorer.from_model(Transformer().eval()).weights
    shown = _run_widget_js(
        tmp_path,
        "cross_attention.js",
        ["shownWeights"],
        f"[[{json.dumps(given)}, 4, 9, false], [{json.dumps(given)}, 4, 9, true], [[], 3, 7, false]]"
        ".map(([g, r, c, s]) => shownWeights(g, s ? c : r, s ? r : c, s))",
    )
    for (Ka, Kq, swap), got in zip([(4, 9, False), (4, 9, True), (3, 7, False)], shown):
        w = CrossAttentionExplorer(Ka=Ka, Kq=Kq, swap_q=swap, weights=given if Ka == 4 else [])
        assert got["own"] == (Ka == 4 and not swap)
        assert np.array(got["weights"]) == pytest.approx(np.array(w.shown_weights()), abs=1e-12)
    ps = [0.05, 0.2, 0.4, 0.9]
    ce = _run_widget_js(
        tmp_path,
        "cross_entropy.js",
        ["ceExample"],
        f"{json.dumps(ps)}.map((p) => ceExample({json.dumps(list(VOCAB))}, '4', '3', p, 0.2, 0.55))",
    )
    for p, got in zip(ps, ce):
        ex = cross_entropy_example(p)
        assert got["loss"] == pytest.approx(ex["loss"])
        assert got["probs"] == pytest.approx([ex["probs"][t] for t in VOCAB])
        assert got["grad"] == pytest.approx([ex["grad"][t] for t in VOCAB])
    presets = _run_widget_js(
        tmp_path, "mask_toggle.js", ["presetMask"], "['causal', 'padding', 'none'].map((p) => presetMask(p, 5, 2))"
    )
    assert presets == [preset_mask(p, 5, 2) for p in ("causal", "padding", "none")]


# --- QuickCheck: the page marks the reader's answers (Python and the browser by the same rule) ---

QUESTIONS = [
    qc.choice("Who provides Q?", ["decoder", "encoder", "both"], answer=0, explain="`Q` from the decoder"),
    qc.number("How many weights in row 4?", answer=9),
    qc.number("p?", answer=0.25, tolerance=0.01),
]
RESPONSES = [
    (0, 0),
    (0, 2),
    (0, None),
    (1, "9"),
    (1, " 9.0 "),
    (1, "+9"),
    (1, "9e0"),
    (1, "8"),
    (1, "nine"),
    (1, ""),
    (1, "1_000"),
    (1, "inf"),
    (1, None),
    (2, ".25"),
    (2, "0.26"),
    (2, "0.2601"),
    (2, "-0.25"),
]


def test_quick_check_marks_answers():
    w = QuickCheck(QUESTIONS)
    assert w.responses == [None] * 3 and w.revealed == [False] * 3 and w.results() == [None] * 3
    assert w.answer(0, 1) is False and w.answer(0, 0) is True  # a click on option 0 after option 1
    assert w.answer(1, "9") is True and w.answer(2, "0.3") is False
    assert w.results() == [True, True, False] and w.score() == (2, 3)
    w.set_state({"responses": [2, "9", "0.251"]})  # what the browser sends
    assert w.results() == [False, True, True]
    assert [qc.is_right(QUESTIONS[i], r) for i, r in RESPONSES[:3]] == [True, False, None]


def test_quick_check_rejects_malformed_questions():
    bad = [
        ({"kind": "essay", "prompt": "?"}, "kind must be one of"),
        (qc.choice("?", ["only"], 0), "at least two options"),
        (qc.choice("?", ["a", "a"], 0), "options repeat"),
        (qc.choice("?", ["a", "b"], 2), "answer must index"),
        (qc.choice("  ", ["a", "b"], 0), "needs a prompt"),
        (qc.number("?", float("nan")), "finite answer"),
        (qc.number("?", 1.0, tolerance=-0.1), "tolerance must be >= 0"),
    ]
    for question, message in bad:
        with pytest.raises(ValueError, match=message):
            QuickCheck([question])
    w = QuickCheck(QUESTIONS)
    with pytest.raises(traitlets.TraitError, match="one entry per question"):
        w.responses = [None]


def test_quick_check_javascript_marks_like_python(tmp_path):
    """The browser's verdict on every answer (choice index or typed text) equals is_right's."""
    calls = f"{json.dumps(RESPONSES)}.map(([i, r]) => isRight({json.dumps(QUESTIONS)}[i], r))"
    js = _run_widget_js(tmp_path, "quick_check.js", ["isRight"], calls)
    assert js == [qc.is_right(QUESTIONS[i], r) for i, r in RESPONSES]
    assert {True, False, None} <= set(js)


# --- AskTheModel: the trained checkpoints in the page (the forward pass itself: test_model_forward_js) ---

ASK_SHARED = ("model_forward.js", "task.js")
QUESTION_TEXTS = [
    "-30 - -34",
    "−30 − −34",
    "12 + 7",
    "12 add -7",
    "+5 subtract 0",
    "-0 + 0",
    "49--49",
    "BOS NEGATIVE 30 subtract NEGATIVE 34 EOS",
    "negative 30 subtract negative 34",
    "POSITIVE 4 9 add NEGATIVE 0 1",
    "",
    "   ",
    "50 + 1",
    "-123 - 4",
    "2 * 3",
    "what is 2 + 2",
    "POSITIVE 50 add POSITIVE 01",
    "NEGATIVE 30 subtract",
    "BOS BOS NEGATIVE 30 subtract NEGATIVE 34 EOS",
    "1 + 2 + 3",
]


def test_ask_parses_what_the_reader_types_as_python_does(tmp_path):
    from encdec.data import decode, encode_question
    from encdec.widgets import parse_question

    js = _run_widget_js(
        tmp_path,
        "ask_model.js",
        ["parseQuestion"],
        f"{json.dumps(QUESTION_TEXTS)}.map((q) => parseQuestion(q))",
        ASK_SHARED,
    )
    py = [parse_question(q) for q in QUESTION_TEXTS]
    for text, got, (ids, error) in zip(QUESTION_TEXTS, js, py):
        if ids is not None:
            assert got == {"ids": ids}, text
            assert encode_question(decode(ids)) == ids
        else:
            assert got == {"error": error[0], "values": error[1]}, text
    assert py[0][0] == encode_question(LESSON_QUESTION_TEXT) == py[7][0] == py[8][0]
    assert py[5][0] == encode_question("BOS POSITIVE 00 add POSITIVE 00 EOS")  # zero is POSITIVE
    assert [e[0] for _, e in py[10:]] == [
        "no_text",
        "no_text",
        "out_of_range",
        "out_of_range",
        "bad_format",
        "bad_format",
        "out_of_range",
        "bad_format",
        "bad_format",
        "bad_format",
    ]


def test_ask_the_model_carries_both_checkpoints():
    from encdec.widgets.export_weights import tensor

    w = AskTheModel()
    assert w.presets == ["modern", "historical"] and set(w.weights) == {"modern", "historical"}
    model, _ = load_run("historical")
    assert w.weights["historical"]["config"]["position_encoding"] == "simple"
    assert np.array_equal(
        tensor(w.weights["historical"], "proj_to_vocab.weight"), model.proj_to_vocab.weight.detach().numpy()
    )
    with pytest.raises(traitlets.TraitError, match="forced must be"):
        w.forced = "BOS"
    with pytest.raises(traitlets.TraitError, match="preset must be one of"):
        w.preset = "overfit"
    with pytest.raises(ValueError, match="no weights for"):
        AskTheModel(presets=["modern"], weights={})


def test_ask_trace_follows_greedy_decode_on_the_lesson_example():
    from encdec.data import decode, encode, encode_question
    from encdec.widgets import ask_trace

    model, _ = load_run("modern")
    ids = encode_question(LESSON_QUESTION_TEXT)
    trace = ask_trace(model, ids)
    assert decode(trace["tokens"]) == "BOS POSITIVE 0 4 EOS"
    assert [s["fed"] for s in trace["steps"]] == [1, 1, 1, 1] and trace["positions_computed"] == 4
    assert [s["self_rows"] for s in trace["steps"]] == [[k] * 2 for k in (1, 2, 3, 4)]
    for step in trace["steps"]:
        assert len(step["cross"]) == 2 and all(
            sum(head) == pytest.approx(1) and len(head) == 9 for heads in step["cross"] for head in heads
        )
    historical, _ = load_run("historical")
    from encdec.widgets.ask_model import EXAMPLES

    for question, right in zip(EXAMPLES[1:], ("BOS POSITIVE 25 EOS", "BOS POSITIVE 77 EOS"), strict=True):
        assert ask_trace(historical, encode_question(question))["tokens"] != encode(right), "historical gets it wrong"
    off = ask_trace(model, ids, use_cache=False)
    assert off["tokens"] == trace["tokens"] and [s["fed"] for s in off["steps"]] == [1, 2, 3, 4]
    forced = ask_trace(model, ids, forced="NEGATIVE")
    assert forced["prefix"] == [14, 11] and len(forced["steps"]) == 3 and forced["tokens"][:2] == [14, 11]


def test_ask_the_model_javascript_shows_the_python_numbers(tmp_path):
    """The figure's numbers for the lesson's example (probabilities, cross-attention, cache rows) are
    the Python trace's, computed by model_forward.js from the widget's own weights."""
    from encdec.data import encode_question
    from encdec.widgets import ask_trace

    w = AskTheModel()
    ids = encode_question(LESSON_QUESTION_TEXT)
    for preset in ("modern", "historical"):
        js = _run_widget_js(
            tmp_path,
            "ask_model.js",
            ["loadModel", "askRun"],
            f"(() => {{ const r = askRun(loadModel({json.dumps(w.weights[preset])}), {json.dumps(ids)}, null, true);"
            " return { tokens: r.tokens, steps: r.steps.map((s) => ({ probs: s.logits, cross: s.cross, rows: s.selfRows, fed: s.computed })),"
            " same: r.sameTokens, off: r.other.positionsComputed, teacher: r.teacher }; })()",
            ASK_SHARED,
        )
        model, _ = load_run(preset)
        py = ask_trace(model, ids)
        assert js["tokens"] == py["tokens"] and js["same"] is True
        assert js["off"] == ask_trace(model, ids, use_cache=False)["positions_computed"]
        for got, want in zip(js["steps"], py["steps"], strict=True):
            assert softmax(got["probs"]) == pytest.approx(want["probs"], abs=1e-6)
            assert np.allclose(got["cross"], want["cross"], atol=1e-5)
            assert got["rows"] == want["self_rows"] and got["fed"] == want["fed"]


def test_a_figure_names_the_sites_stylesheet_in_a_book_build(monkeypatch):
    """Built into the book (SITE_CSS_ENV set), a figure's CSS is the site's one stylesheet's path;
    elsewhere (Jupyter) it is the stylesheet itself."""
    from encdec.widgets._base import SITE_CSS, SITE_CSS_ENV, asset_text

    assert MaskToggle().get_state()["_css"] == asset_text("widgets.css")
    monkeypatch.setenv(SITE_CSS_ENV, SITE_CSS)
    assert MaskToggle().get_state()["_css"] == SITE_CSS
    assert AskTheModel().get_state()["_css"] == SITE_CSS


def test_the_ask_figure_names_the_sites_weights_in_a_book_build(monkeypatch, tmp_path):
    """Built into the book (SITE_WEIGHTS_ENV set), the figure carries no weights and names the site's
    script instead; the script holds every preset's export."""
    from encdec.widgets.export_weights import (
        PRESETS,
        SITE_WEIGHTS,
        SITE_WEIGHTS_ENV,
        export_preset,
        read_site_script,
        write_site_script,
    )

    monkeypatch.setenv(SITE_WEIGHTS_ENV, SITE_WEIGHTS)
    w = AskTheModel()
    assert w.weights == {} and w.weights_src == SITE_WEIGHTS and w.presets == list(PRESETS)
    monkeypatch.delenv(SITE_WEIGHTS_ENV)
    assert AskTheModel().weights_src == "" and set(AskTheModel().weights) == set(PRESETS)
    assert read_site_script(write_site_script(tmp_path / "w.js")) == {p: export_preset(p) for p in PRESETS}


# --- BreakIt: one mistake switched into the trained model (every question: test_model_broken_js) ---


def test_break_it_ships_each_mistakes_count_from_pytorch():
    from encdec.broken import MISTAKES
    from encdec.data import problem_space
    from encdec.widgets import mistake_table

    w = BreakIt()
    assert w.presets == ["modern", "historical"] and set(w.tables) == {"modern", "historical"}
    table = w.tables["modern"]
    assert [row["name"] for row in table] == list(MISTAKES)
    _, metrics = load_run("modern")
    total = len(problem_space()[0])
    assert table[0] == {
        "name": "intact",
        "use_cache": True,
        "right": round(metrics["space_exact_match"] * total),
        "total": total,
        "error": None,
    }
    rows = {row["name"]: row for row in table}
    assert rows["q_from_encoder"]["right"] == 0 and rows["q_from_encoder"]["error"].startswith(
        "ValueError: mask of shape (1, 1, 1)"
    )
    assert all(rows[name]["right"] < rows["intact"]["right"] for name in rows if name != "intact")
    assert mistake_table("modern") is mistake_table("modern")  # counted once per process
    with pytest.raises(traitlets.TraitError, match="mistake must be one of"):
        w.mistake = "intact"
    with pytest.raises(traitlets.TraitError, match="operand"):
        w.a = 50
    with pytest.raises(traitlets.TraitError, match="op must be"):
        w.op = "multiply"


def test_break_it_javascript_answers_as_pytorch_with_the_same_mistake(tmp_path):
    """The figure's two answers for the lesson's example and another question, under every mistake and
    on both checkpoints, from its own weights, equal encdec.broken's."""
    from encdec.broken import MISTAKES
    from encdec.widgets import break_answer

    w = BreakIt()
    questions = [(-30, "subtract", -34), (12, "add", 7), (49, "subtract", -28)]
    names = [m for m in MISTAKES if m != "intact"]
    for preset in w.presets:
        model, _ = load_run(preset)
        calls = (
            f"(() => {{ const net = loadModel({json.dumps(w.weights[preset])});"
            f" return {json.dumps(questions)}.map(([a, op, b]) => {json.dumps(names)}.map((m) =>"
            f" breakRun(net, breakQuestionIds(a, op, b), m, {json.dumps({m: MISTAKES[m].use_cache for m in names})}[m]))); }})()"
        )
        js = _run_widget_js(tmp_path, "break_it.js", ["loadModel", "breakRun", "breakQuestionIds"], calls, ASK_SHARED)
        for (a, op, b), runs in zip(questions, js, strict=True):
            w.a, w.op, w.b = a, op, b
            ids = w.question_ids()
            for name, run in zip(names, runs, strict=True):
                got, error = break_answer(model, ids, name)
                assert run["broken"] == got, (preset, a, op, b, name)
                assert (run["error"] is None) == (error is None)
            assert (
                run["intact"]
                == break_answer(model, ids, "intact")[0]
                == greedy_decode(model, torch.tensor([ids]), 4)[0].tolist()[: len(run["intact"])]
            )
