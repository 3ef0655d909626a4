"""The "ask the model" figure in headless Chromium, from file:// with no network: the reader types a
question, steps through the decoding and both experiments, and the page reads the answers and the
numbers the package computes. The page is the figure's static HTML as the built book renders it
(its saved widget state, the offline widget assets), made here without building the book."""

from __future__ import annotations

import random

import pytest
import torch
from browser_support import Opened, fmt, standalone_widget_page, wait_for_widget

from encdec.data import VOCAB, decode, encode_question
from encdec.generate import greedy_decode
from encdec.train import load_run
from encdec.widgets import AskTheModel, ask_trace, parse_question
from encdec.widgets._base import LESSON_QUESTION_TEXT, text

pytestmark = pytest.mark.browser
PRESETS = ("modern", "historical")


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ask_model")
    widget = AskTheModel()
    return {lang: standalone_widget_page([widget], folder, f"ask_{lang}", lang).as_uri() for lang in ("en", "zh")}


@pytest.fixture(scope="module")
def models():
    return {preset: load_run(preset)[0] for preset in PRESETS}


@pytest.fixture
def opened(chromium):
    pages = []

    def _open(url: str, width: int = 1280) -> Opened:
        p = Opened(chromium, url, width)
        pages.append(p)
        return p

    yield _open
    for p in pages:
        p.context.close()


def answer_ids(w, preset) -> list[int]:
    return [int(x) for x in w.locator(f"[data-testid='answer-{preset}']").get_attribute("data-ids").split()]


def test_the_lesson_example_step_by_step_shows_the_python_numbers(opened, pages, models):
    p = opened(pages["en"])
    w = wait_for_widget(p.page, "AskTheModel")
    ids = encode_question(LESSON_QUESTION_TEXT)
    for preset in PRESETS:
        assert decode(answer_ids(w, preset)) == "BOS POSITIVE 0 4 EOS"
    trace = ask_trace(models["modern"], ids)
    L, H = 2, 4
    for s, step in enumerate(trace["steps"], start=1):
        w.locator("[data-testid='next']").click()
        panel = w.locator("[data-testid='step-panel']")
        assert panel.get_attribute("data-step") == str(s)
        chosen = trace["tokens"][s]
        assert w.locator("[data-testid='top'] tr").first.get_attribute("data-token") == decode([chosen])
        assert w.locator("[data-testid='top-0']").inner_text().startswith(fmt(step["probs"][chosen]))
        cells = w.locator("[data-testid='cross'] td").all_inner_texts()
        assert cells == [fmt(x, 2) for heads in step["cross"] for row in heads for x in row]
        assert len(cells) == L * H * 9
        assert [
            int(w.locator(f"[data-testid='self-rows-{layer}']").get_attribute("data-rows")) for layer in range(L)
        ] == step["self_rows"]
        fed = w.locator("[data-testid='fed']").inner_text()
        assert (
            "BOS at position(s) 0." if s == 1 else f"{decode([trace['tokens'][s - 1]])}, at position {s - 1}."
        ) in fed
    assert w.locator("[data-testid='next']").is_disabled()
    assert "9 rows" in w.locator("[data-testid='cross-kv']").inner_text()
    assert p.log.problems() == {}


def _astray(models, texts=("12 + 13", "-7 - 12", "23 + 19", "-49 - 49", "30 - 34")):
    """A question of these (else the first of the task) that historical gets wrong, its ids and the
    step where its answer leaves the right one (1: the prefill's prediction)."""
    from encdec.data import problem_space

    candidates = [parse_question(t)[0] for t in texts] + problem_space()[0].tolist()
    for ids in candidates:
        right = greedy_decode(models["modern"], torch.tensor([ids]), max_new_tokens=4)[0].tolist()
        got = greedy_decode(models["historical"], torch.tensor([ids]), max_new_tokens=4)[0].tolist()
        if got != right:
            return ids, next(k for k in range(1, 5) if got[k] != right[k])
    raise AssertionError("historical answers every question right: no step went astray")


def test_a_typed_question_is_answered_as_python_answers_it_and_the_step_that_went_astray(opened, pages, models):
    p = opened(pages["en"])
    w = wait_for_widget(p.page, "AskTheModel")
    box = w.locator("[data-testid='question-input']")
    ids, step = _astray(models)
    box.fill(" ".join(decode(ids).split()[1:-1]))  # the question's tokens, as a reader may type them
    box.press("Enter")  # the form submits from the keyboard
    assert w.locator("[data-testid='question-tokens'] .encdec-chip").all_inner_texts() == decode(ids).split()
    right = greedy_decode(models["modern"], torch.tensor([ids]), max_new_tokens=4)[0].tolist()
    for preset in PRESETS:
        want = greedy_decode(models[preset], torch.tensor([ids]), max_new_tokens=4)[0].tolist()
        assert answer_ids(w, preset) == want
        # each token coloured by itself: a right token (EOS too) after a wrong one is no mistake
        marks = [
            c.split()[-1]
            for c in w.locator(f"[data-testid='answer-{preset}'] .encdec-chip").evaluate_all(
                "(chips) => chips.map((c) => c.className)"
            )
        ]
        assert marks == ["kv"] + ["out" if got == r else "leak" for got, r in zip(want[1:], right[1:])], preset
    assert w.locator("[data-testid='verdict-modern']").inner_text() == text("ask_model.right")
    go = w.locator("[data-testid='goto-historical']")  # historical's answer leaves the right one at `step`
    assert f"step {step}" in go.inner_text()
    go.click()
    assert w.locator("button[data-preset='historical']").get_attribute("aria-pressed") == "true"
    assert w.locator("[data-testid='step-panel']").get_attribute("data-step") == str(step)
    trace = ask_trace(models["historical"], ids)
    token = trace["tokens"][step]  # what historical predicts at that step
    assert w.locator("[data-testid='top'] tr").first.get_attribute("data-token") == VOCAB[token]
    assert w.locator("[data-testid='top-0']").inner_text().startswith(fmt(trace["steps"][step - 1]["probs"][token]))
    assert [int(w.locator(f"[data-testid='self-rows-{layer}']").get_attribute("data-rows")) for layer in range(4)] == [
        step
    ] * 4

    box.fill("50 + 1")
    box.press("Enter")
    assert w.locator("[data-testid='status']").inner_text() == text("ask_model.error_range", value="50")
    box.fill("what is 2 + 2")
    w.locator("[data-testid='ask']").click()
    assert w.locator("[data-testid='status']").inner_text() == text("ask_model.error_format", text="what is 2 + 2")
    assert p.log.problems() == {}


def test_forcing_the_first_token_and_switching_the_cache_off(opened, pages, models):
    p = opened(pages["en"])
    w = wait_for_widget(p.page, "AskTheModel")
    ids = encode_question(LESSON_QUESTION_TEXT)
    w.locator("[data-testid='forced']").select_option("NEGATIVE")  # the answer is +4
    for preset in PRESETS:
        want = ask_trace(models[preset], ids, forced="NEGATIVE")["tokens"]
        assert answer_ids(w, preset) == want
        assert w.locator(f"[data-testid='verdict-{preset}']").inner_text() == text("ask_model.wrong_prefix")
    model = models["modern"]
    forced_row = w.locator("[data-testid='row-forced'] .encdec-chip").all_inner_texts()
    assert forced_row == decode(ask_trace(model, ids, forced="NEGATIVE")["tokens"]).split()
    answer = torch.tensor([encode_question(LESSON_QUESTION_TEXT)]), torch.tensor([[14, 10, 0, 4, 15]])
    teacher = model(answer[0], model.positions(9), answer[1], model.positions(5)).argmax(-1)[0].tolist()
    assert w.locator("[data-testid='row-teacher'] .encdec-chip").all_inner_texts() == decode([14, *teacher]).split()
    assert w.locator("[data-testid='row-free'] .encdec-chip").all_inner_texts() == ["BOS", "POSITIVE", "0", "4", "EOS"]

    w.locator("[data-testid='forced']").select_option("")
    compare = w.locator("[data-testid='cache-compare']")
    assert (
        compare.get_attribute("data-on"),
        compare.get_attribute("data-off"),
        compare.get_attribute("data-same"),
    ) == ("4", "10", "yes")
    w.locator("[data-testid='use-cache']").press("Space")  # a native checkbox: the keyboard switches it
    assert not w.locator("[data-testid='use-cache']").is_checked()
    w.locator("[data-testid='end']").click()
    assert w.locator("[data-testid='computed']").inner_text().startswith("4 positions")  # the whole prefix again
    assert decode(answer_ids(w, "modern")) == "BOS POSITIVE 0 4 EOS"
    assert "projected again" in w.locator("[data-testid='cross-kv']").inner_text()
    assert p.log.problems() == {}


def test_window_encdec_generate_equals_greedy_decode(opened, pages, models):
    p = opened(pages["en"])
    wait_for_widget(p.page, "AskTheModel")
    rng = random.Random(26)
    texts = [f"{rng.randint(-49, 49)} {rng.choice('+-')} {rng.randint(-49, 49)}" for _ in range(60)]
    questions = [parse_question(q)[0] for q in texts]
    assert p.page.evaluate("window.encdec.presets") == list(PRESETS)
    for preset in PRESETS:
        got = p.page.evaluate(
            "([preset, qs]) => Promise.all(qs.map((q) => window.encdec.generate(preset, q)))", [preset, questions]
        )
        want = greedy_decode(models[preset], torch.tensor(questions), max_new_tokens=4).tolist()
        assert got == [row[: row.index(15) + 1] if 15 in row else row for row in want]
    error = p.page.evaluate(
        "async () => { try { await window.encdec.generate('modern', [14, 1, 2]); } catch (e) { return e.message; } }"
    )
    assert error == text("ask_model.error_bad_question_ids", ids="[14,1,2]")
    error = p.page.evaluate(
        "async () => { try { await window.encdec.generate('overfit', [14]); } catch (e) { return e.message; } }"
    )
    assert error == text("ask_model.error_preset", preset="overfit", known="modern, historical")


def test_readable_at_390_pixels_and_in_chinese(opened, pages):
    p = opened(pages["zh"], width=390)
    w = wait_for_widget(p.page, "AskTheModel")
    assert w.locator("[data-testid='ask']").inner_text() == text("ask_model.ask", "zh")
    w.locator("[data-testid='next']").click()
    assert p.page.evaluate("document.documentElement.scrollWidth") <= 390  # wide tables scroll inside the figure
    box = w.locator("[data-testid='question-input']").bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 390 and box["width"] >= 120
    for testid in ("ask", "next", "forced", "use-cache"):
        b = w.locator(f"[data-testid='{testid}']").bounding_box()
        assert b["x"] >= 0 and b["x"] + b["width"] <= 390, testid
    assert p.log.problems() == {}


@pytest.mark.parametrize("edition", ["book", "book/zh"])
def test_the_built_chapter_asks_the_model_from_file(opened, models, edition):
    """Chapter 13 as the build makes it, opened from disk (file://, no server, no network): a typed
    question is answered as Python answers it, the decoding steps to its end, the cache switches off."""
    from browser_support import require_built_book

    page = require_built_book() / edition / "ch13_generation.html"
    p = opened(page.as_uri())
    w = wait_for_widget(p.page, "AskTheModel")
    status = w.locator("[data-testid='status']")
    assert status.get_attribute("data-weights") == "idle"  # nothing loaded before the reader asks
    assert status.inner_text() == text("ask_model.weights_idle", "zh" if "zh" in edition else "en")
    assert p.page.evaluate("() => window.encdecWeights === undefined")
    box = w.locator("[data-testid='question-input']")
    box.fill("23 + 19")
    box.press("Enter")
    ids, _ = parse_question("23 + 19")
    for preset in PRESETS:
        assert answer_ids(w, preset) == greedy_decode(models[preset], torch.tensor([ids]), max_new_tokens=4)[0].tolist()
    w.locator("[data-testid='end']").click()
    assert [int(w.locator(f"[data-testid='self-rows-{layer}']").get_attribute("data-rows")) for layer in range(2)] == [
        4,
        4,
    ]
    w.locator("[data-testid='use-cache']").press("Space")
    compare = w.locator("[data-testid='cache-compare']")
    assert (
        compare.get_attribute("data-on"),
        compare.get_attribute("data-off"),
        compare.get_attribute("data-same"),
    ) == ("4", "10", "yes")
    assert p.log.problems() == {}
