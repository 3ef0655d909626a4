"""The gallery's figures in headless Chromium, offline, in both editions: each figure is clicked,
dragged or hovered and must show the numbers the package computes, in the words of the page's
language (encdec/widgets/strings). Needs `make book` first."""

from __future__ import annotations

import math
import re

import pytest
from browser_support import GALLERY, fmt, softmax, wait_for_widget

from encdec.widgets._base import text

pytestmark = pytest.mark.browser
# Both editions' galleries: the same figures, the words of the page's language.
GALLERIES = {GALLERY: "en", GALLERY.replace("book/", "book/zh/"): "zh"}


def as_pattern(key: str, lang: str, **known) -> str:
    """A widget string as a regular expression: the known values filled in, any other placeholder
    matching whatever the figure put there."""
    return re.sub(r"\\\{\w+\\\}", ".+", re.escape(text(key, lang, **known)))


@pytest.mark.parametrize("gallery", GALLERIES)
def test_mask_toggle_click_gives_the_new_softmax(open_page, gallery):
    from encdec.widgets.mask_toggle import default_scores

    p = open_page(gallery)
    lang = GALLERIES[gallery]
    w = wait_for_widget(p.page, "MaskToggle")
    # what the decoder is fed, BOS POSITIVE 0 4 (never EOS): a 4 x 4 grid
    assert w.locator("thead th").all_inner_texts()[1:-1] == ["0 BOS", "1 POSITIVE", "2 0", "3 4"]
    scores = default_scores(4)
    cell = w.locator("td[data-row='2'][data-col='3']")
    assert "forbidden" in cell.get_attribute("class")
    cell.click()  # allow reader 2 ("0") to read source 3 ("4")
    shown = [w.locator(f"td[data-row='2'][data-col='{j}'] .w").inner_text() for j in range(4)]
    assert shown == [fmt(x) for x in softmax(scores[2])]
    assert w.locator("td[data-row='1'][data-col='3'] .w").inner_text() == "✕"
    assert [w.locator(f"[data-testid='rowsum-{i}']").inner_text() for i in range(4)] == ["1.000"] * 4
    assert w.locator("[data-testid='preset']").inner_text() == text("mask_toggle.status_custom", lang)
    w.locator("button[data-preset='none']").click()
    assert w.locator("td[data-row='0'][data-col='3'] .w").inner_text() == fmt(softmax(scores[0])[3])
    w.locator("button[data-preset='padding']").click()  # the last position is padding: nobody reads it
    assert w.locator("td[data-row='1'][data-col='3'] .w").inner_text() == "✕"
    assert w.locator("td[data-row='1'][data-col='2'] .w").inner_text() == fmt(softmax(scores[1][:3])[2])
    # a phone's column keeps the scores the caption reads (s = the raw score)
    p.page.set_viewport_size({"width": 390, "height": 844})
    score = w.locator("td[data-row='1'][data-col='2'] .s")
    assert score.is_visible() and score.inner_text() == f"s={scores[1][2]:.1f}"
    # the headers stand up to fit; Chinese ones the CJK way, upright (turned over, 行和 lies on its side)
    turned = w.locator("thead th").last.evaluate("(th) => getComputedStyle(th).transform")
    assert (turned == "none") == (lang == "zh"), turned
    assert w.evaluate("(w) => w.scrollWidth <= w.clientWidth")
    assert p.log.problems() == {}


@pytest.mark.parametrize("gallery", GALLERIES)
def test_softmax_compare_slider_and_a_caption_that_follows_the_reader(open_page, gallery):
    p = open_page(gallery)
    lang = GALLERIES[gallery]
    w = wait_for_widget(p.page, "SoftmaxMaskCompare")
    assert w.locator("button[data-reader]").all_inner_texts() == ["0 BOS", "1 POSITIVE", "2 0", "3 4"]  # no EOS reader
    scores = [float(w.locator(f"[data-testid='score-{j}']").inner_text()) for j in range(4)]
    for future in ("3", "6.5"):
        w.locator("[data-testid='future-slider']").fill(future)
        row = scores[:3] + [float(future)]
        assert w.locator("[data-testid='sum-mask']").inner_text() == "1.000"
        wrong = sum(softmax(row)[:3])
        assert wrong < 1
        assert w.locator("[data-testid='sum-zero']").inner_text() == fmt(wrong)
        assert w.locator("[data-testid='w-mask-0']").locator(".w").inner_text() == fmt(softmax(scores[:3])[0])
    caption = w.locator("[data-testid='caption']")
    assert caption.inner_text().startswith(text("softmax_compare.may_read", lang, i=2, token="0"))
    w.locator("button[data-reader='0']").click()  # BOS reads only itself: no range "0–0"
    assert caption.inner_text().startswith(text("softmax_compare.may_read_first", lang, token="BOS"))
    assert "0–0" not in caption.inner_text()
    w.locator("button[data-reader='3']").click()  # the last reader has no future: nothing is shrunk
    assert caption.inner_text() == text("softmax_compare.caption_last", lang, i=3, token="4")
    assert w.locator("[data-testid='sum-zero']").inner_text() == "1.000"
    assert w.locator("[data-testid='future-slider']").is_disabled()
    assert p.log.problems() == {}


@pytest.mark.parametrize("gallery", GALLERIES)
def test_cross_entropy_slider(open_page, gallery):
    p = open_page(gallery)
    w = wait_for_widget(p.page, "CrossEntropySlider")
    assert w.locator("[data-testid='loss']").inner_text() == "1.609"
    w.locator("[data-testid='p-slider']").fill("0.4")
    assert w.locator("[data-testid='loss']").inner_text() == fmt(-math.log(0.4)) == "0.916"
    assert w.locator("[data-testid='grad-4']").text_content() == "-0.600"
    assert w.locator("[data-testid='grad-3']").text_content() == fmt(0.55 * 0.6 / 0.8)
    assert p.log.problems() == {}


@pytest.mark.parametrize("gallery", GALLERIES)
def test_cross_attention_explorer_hover_and_swap(open_page, gallery):
    p = open_page(gallery)
    lang = GALLERIES[gallery]
    w = wait_for_widget(p.page, "CrossAttentionExplorer")
    from encdec.widgets.cross_attention import example_weights

    # the decoder is fed BOS POSITIVE 0 4 (never EOS): four rows, no "a4 EOS"
    assert w.locator("[data-testid='shape-A'] td").first.inner_text() == "[N, 4, 9]"
    assert [w.locator(f"th:has(+ td[data-row='{i}'][data-col='0'])").inner_text().split()[-1] for i in range(4)] == [
        "BOS",
        "POSITIVE",
        "0",
        "4",
    ]
    A = example_weights(4, 9)  # the grid holds A's numbers, each row a distribution
    assert w.locator("td.encdec-acell").all_inner_texts() == [fmt(x, 2) for row in A for x in row]
    w.locator("td[data-row='3'][data-col='7']").hover()
    token = lambda t: text("cross_attention.token", lang, token=t)  # noqa: E731 (a one-line helper named where it is used)
    assert w.locator("[data-testid='hover-info']").inner_text() == text(
        "cross_attention.hover", lang, i=3, j=7, w=fmt(A[3][7], 2), answer=token("4"), question=token("4")
    )
    w.locator("td[data-row='0'][data-col='1']").hover()
    assert w.locator("[data-testid='hover-info']").inner_text() == text(
        "cross_attention.hover", lang, i=0, j=1, w=fmt(A[0][1], 2), answer=token("BOS"), question=token("NEGATIVE")
    )
    assert w.locator("[data-testid='weights-note']").inner_text() == text("cross_attention.weights_example", lang)
    w.locator("[data-testid='swap-q']").check()
    assert w.locator("[data-testid='shape-A'] td").first.inner_text() == "[N, 9, 4]"
    assert w.locator("[data-testid='shape-output'] td").first.inner_text() == "[N, 9, M]"
    assert w.locator("td.encdec-acell").count() == 36
    w.locator("[data-testid='Ka-input']").fill("3")
    assert w.locator("[data-testid='shape-Q'] td").first.inner_text() == "[N, 9, M]"
    assert w.locator("td.encdec-acell").count() == 27
    assert w.locator("td.encdec-acell").all_inner_texts() == [fmt(x, 2) for row in example_weights(9, 3) for x in row]
    assert p.log.problems() == {}


@pytest.mark.parametrize("gallery", GALLERIES)
def test_shift_and_teacher_forcing_leaks(open_page, gallery):
    p = open_page(gallery)
    lang = GALLERIES[gallery]
    w = wait_for_widget(p.page, "ShiftTeacherForcing")
    status = w.locator("[data-testid='leak-status']")
    assert status.inner_text().startswith(text("shift_teacher_forcing.no_leak", lang))
    w.locator("[data-testid='toggle-shift']").uncheck()
    assert re.fullmatch(as_pattern("shift_teacher_forcing.leak_no_shift", lang, n=5, total=5), status.inner_text())
    assert w.locator("tr[data-leak='yes']").count() == 5
    w.locator("[data-testid='toggle-shift']").check()
    w.locator("[data-testid='toggle-causal_mask']").uncheck()
    assert re.fullmatch(as_pattern("shift_teacher_forcing.leak_no_mask", lang, n=3, total=4), status.inner_text())
    assert "0, 1, 2" in status.inner_text()
    assert p.log.problems() == {}


@pytest.mark.parametrize("gallery", GALLERIES)
def test_prefill_decode_stepper_grows_the_cache(open_page, gallery):
    p = open_page(gallery)
    lang = GALLERIES[gallery]
    w = wait_for_widget(p.page, "PrefillDecodeStepper")
    L = w.locator("[data-testid^='self-cache-']").count()  # decoder layers of the gallery's model
    assert L >= 1

    def rows():
        return [int(w.locator(f"[data-testid='self-cache-{layer}']").get_attribute("data-rows")) for layer in range(L)]

    assert rows() == [0] * L
    w.locator("[data-testid='next']").click()
    assert rows() == [1] * L and re.fullmatch(
        as_pattern("prefill_decode.step_prefill", lang), w.locator("[data-testid='step-label']").inner_text()
    )
    assert w.locator("[data-testid='cross-cache-0']").get_attribute("data-rows") == "9"
    w.locator("[data-testid='next']").click()
    w.locator("[data-testid='next']").click()
    assert rows() == [3] * L
    assert text("prefill_decode.memory_decode", lang, s=3) in w.locator("[data-testid='memory-status']").inner_text()
    assert w.locator(f"[data-testid='cross-cache-{L - 1}']").get_attribute("data-rows") == "9"
    work = w.locator("[data-testid='work'] [data-step]")  # one bar per step, the current one marked
    assert work.count() >= 3  # three steps were taken
    assert "current" in work.nth(2).get_attribute("class")
    prefill, decode = (
        work.nth(k).locator(".encdec-work-dec").evaluate("e => e.getBoundingClientRect().width") for k in (0, 1)
    )
    assert work.nth(0).locator(".encdec-work-enc").evaluate("e => e.getBoundingClientRect().width") > 0
    assert work.nth(1).locator(".encdec-work-enc").evaluate("e => e.getBoundingClientRect().width") == 0
    assert prefill > decode > 0
    w.locator("[data-testid='back']").click()
    assert rows() == [2] * L
    w.locator("[data-testid='reset']").click()
    assert rows() == [0] * L
    assert p.log.problems() == {}


@pytest.mark.parametrize("gallery", GALLERIES)
def test_attention_map_viewer_switches_head(open_page, gallery):
    from encdec.train import load_run
    from encdec.widgets import attention_maps_of

    expected = attention_maps_of(load_run("modern")[0])["maps"]  # the gallery's model and question
    p = open_page(gallery)
    lang = GALLERIES[gallery]
    w = wait_for_widget(p.page, "AttentionMapViewer")

    def shown():
        return [[c.inner_text() for c in row.locator("td").all()] for row in w.locator("tbody tr").all()]

    def as_text(m):
        return [[fmt(x, 2) for x in row] for row in m]

    assert shown() == as_text(expected["cross"][0][0])
    w.locator("button[data-head='1']").click()
    assert shown() == as_text(expected["cross"][0][1])
    w.locator("button[data-kind='encoder_self']").click()
    last = len(expected["encoder_self"]) - 1
    w.locator(f"button[data-layer='{last}']").click()
    assert shown() == as_text(expected["encoder_self"][last][1])
    assert (
        w.locator("[data-testid='map-title']")
        .inner_text()
        .startswith(
            text(
                "attention_maps.title",
                lang,
                kind=text("attention_maps.kind_encoder_self", lang),
                layer=last + 1,
                head=2,
                what=text("attention_maps.what_encoder_self", lang),
            )
        )
    )
    assert p.log.problems() == {}


@pytest.mark.parametrize("gallery", GALLERIES)
def test_ask_the_model_answers_a_typed_question_as_python_does(open_page, gallery):
    """The built gallery's "ask the model" figure (the figure's own page test, from file://, is
    tests/test_browser_ask_model.py): a typed question, both checkpoints' answers, the decode steps,
    and window.encdec.generate, all equal to greedy_decode."""
    import torch

    from encdec.generate import greedy_decode
    from encdec.train import load_run
    from encdec.widgets import parse_question

    p = open_page(gallery)
    lang = GALLERIES[gallery]
    w = wait_for_widget(p.page, "AskTheModel")
    ids, _ = parse_question("-7 - 12")
    box = w.locator("[data-testid='question-input']")
    box.fill("-7 - 12")
    box.press("Enter")
    for preset in ("modern", "historical"):
        want = greedy_decode(load_run(preset)[0], torch.tensor([ids]), max_new_tokens=4)[0].tolist()
        assert [int(x) for x in w.locator(f"[data-testid='answer-{preset}']").get_attribute("data-ids").split()] == want
        assert p.page.evaluate("([preset, ids]) => window.encdec.generate(preset, ids)", [preset, ids]) == want
    w.locator("[data-testid='next']").click()
    assert re.fullmatch(
        as_pattern("ask_model.step_prefill", lang), w.locator("[data-testid='step-label']").inner_text()
    )
    w.locator("[data-testid='end']").click()
    assert w.locator("[data-testid='self-rows-0']").get_attribute("data-rows") == "4"
    assert p.log.problems() == {}


@pytest.mark.parametrize("gallery", GALLERIES)
def test_break_it_picks_a_mistake_and_shows_its_answer_and_count(open_page, gallery):
    """The built page runs the site's weights: picking a mistake gives PyTorch's broken answer (as
    encdec.broken computes it) beside the intact one, and the mistake's count of right answers."""
    from encdec.data import encode_question, question_text
    from encdec.train import load_run
    from encdec.widgets import break_answer, mistake_table

    p = open_page(gallery)
    lang = GALLERIES[gallery]
    w = wait_for_widget(p.page, "BreakIt")
    # the page carries no weights until its reader acts: the figure says so, and runs nothing yet
    assert w.locator("[data-testid='status']").inner_text() == text("break_it.weights_wait", lang)
    assert w.locator("[data-testid='broken-answer']").count() == 0
    chosen = w.locator("[data-testid='mistake-no_causal_mask']")
    assert chosen.is_checked(), "the figure opens on one mistake"
    chosen.click()  # a click on the mistake already chosen runs it
    w.locator("[data-testid='broken-answer']").wait_for(timeout=20000)  # once the site's weights are in
    lesson = encode_question(question_text(-30, "subtract", -34))
    for preset in ("modern", "historical"):
        model, _ = load_run(preset)
        w.locator(f"button[data-preset='{preset}']").click()
        for name in ("mask_after_softmax", "no_cross_attention"):
            w.locator(f"[data-testid='mistake-{name}']").check()
            want, _ = break_answer(model, lesson, name)
            assert w.locator("[data-testid='broken-answer']").get_attribute("data-ids") == " ".join(map(str, want))
            row = next(r for r in mistake_table(preset) if r["name"] == name)
            count = text(
                "break_it.count",
                lang,
                right=f"{row['right']:,}",
                total=f"{row['total']:,}",
                pct=f"{100 * row['right'] / row['total']:.1f}",
            )
            assert w.locator("[data-testid='broken-count']").inner_text() == count
            assert w.locator(f"[data-testid='count-{name}']").get_attribute("data-right") == str(row["right"])
        assert w.locator("[data-testid='intact-answer']").get_attribute("data-ids") == " ".join(
            map(str, break_answer(model, lesson, "intact")[0])
        )
    w.locator("[data-testid='operand-b']").fill("7")
    w.locator("[data-testid='operand-b']").press("Enter")
    w.locator("[data-testid='mistake-q_from_encoder']").check()
    assert w.locator("[data-testid='broken-answer']").get_attribute("data-ids") == ""
    assert re.fullmatch(
        as_pattern("break_it.no_answer_cell", lang, rows=9, t=1),
        w.locator("[data-testid='broken-answer']").inner_text(),
    )
    note = w.locator("[data-testid='operand-note']")
    assert note.is_hidden()
    w.locator("[data-testid='operand-a']").fill("99")  # no operand of the task: said, and nothing run on it
    w.locator("[data-testid='operand-a']").press("Enter")
    assert note.is_visible() and note.inner_text() == text("break_it.operand_range", lang, value="99", max=49)
    w.locator("[data-testid='lesson']").click()
    assert note.is_hidden()
    assert p.log.problems() == {}


@pytest.mark.parametrize("gallery", GALLERIES)
def test_score_explorer_draws_its_own_numbers_then_runs_the_model_when_asked(open_page, gallery):
    """The score explorer opens on the numbers it carries (no weights loaded yet); another attention
    and query are computed in the page from the site's weights; both equal the Python twin's."""
    from encdec.data import encode_question
    from encdec.train import load_run
    from encdec.widgets._base import LESSON_QUESTION_TEXT
    from encdec.widgets.score_explorer import score_parts, score_step

    parts = score_parts(load_run("modern")[0], encode_question(LESSON_QUESTION_TEXT))
    p = open_page(gallery)
    lang = GALLERIES[gallery]
    w = wait_for_widget(p.page, "ScoreExplorer")

    def shows(kind, layer, head, query, key):
        layer_parts = parts[kind][layer]
        step = score_step(layer_parts["q"], layer_parts["k"], 4, head, query, key, kind == "decoder_self")
        w.locator("[data-testid='status'][data-weights='ready']").wait_for()
        weights = [w.locator(f"[data-testid='weight-{j}']").inner_text() for j in range(len(step["weights"]))]
        assert weights == [fmt(x) for x in step["weights"]]
        assert w.locator("[data-testid='dot']").inner_text() == text(
            "score_explorer.dot", lang, Dh=16, dot=fmt(step["dot"])
        )

    shows("cross", 1, 1, 2, 3)
    assert p.page.evaluate("() => window.encdecWeights === undefined"), "the first setting needs no weights"
    w.locator("[data-testid='kind']").select_option("encoder_self")
    w.locator("[data-testid='query']").select_option("4")
    shows("encoder_self", 1, 1, 4, 3)
    assert p.log.problems() == {}
