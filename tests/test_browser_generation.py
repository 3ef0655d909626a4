"""Chapter 13's generation view in headless Chromium, from file:// with no network: the prefill/decode
stepper runs the trained checkpoints in the page. A reader forces a longer answer prefix and steps
through the prefill and the decode steps; samples with a temperature, top-k and a seed; and works it all
from the keyboard, in both languages, light and dark, on a phone's column. The page's tokens, cache rows
and work are the package's (``decode_trace``, ``sample_trace``)."""

from __future__ import annotations

import re

import pytest
from browser_support import fmt, standalone_widget_page
from test_browser_widgets_a11y import Reader, every_reader

from encdec.data import VOCAB
from encdec.train import load_run
from encdec.widgets import PrefillDecodeStepper
from encdec.widgets._base import LESSON_QUESTION_TEXT
from encdec.widgets.ask_model import EXAMPLES
from encdec.widgets.prefill_decode import decode_trace, sample_trace

pytestmark = pytest.mark.browser
SAMPLING = {"mode": "sample", "temperature": 2.0, "top_k": 3, "seed": 0}


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    folder = tmp_path_factory.mktemp("generation")
    greedy = PrefillDecodeStepper.from_run("modern", prefix="BOS POSITIVE")
    sampled = PrefillDecodeStepper.from_run("historical", **SAMPLING)
    return {
        (kind, lang): standalone_widget_page([w], folder, f"{kind}_{lang}", lang).as_uri()
        for kind, w in (("greedy", greedy), ("sampled", sampled))
        for lang in ("en", "zh")
    }


@pytest.fixture(scope="module")
def models():
    return {preset: load_run(preset)[0] for preset in ("modern", "historical")}


@pytest.fixture
def reader(chromium, pages):
    made = []

    def _open(kind, lang="en"):
        r = Reader(chromium, pages[(kind, lang)], "PrefillDecodeStepper", lang)
        made.append(r)
        shows_no_missing_value(r)  # step 0: nothing computed yet
        return r

    yield _open
    for r in made:
        assert r.opened.log.problems() == {}
        shows_no_missing_value(r)
        r.opened.context.close()


def shows_no_missing_value(r):
    """Nothing the view shows is a value missing from a template or a part left out of the view."""
    shown = r.w.inner_text()
    assert not re.search(r"\b(null|undefined|NaN)\b", shown), shown


def rows(w, L):
    return [int(w.locator(f"[data-testid='self-cache-{layer}']").get_attribute("data-rows")) for layer in range(L)]


def work(w):
    bars = w.locator("[data-testid='work'] [data-step]")
    return [
        [int(bars.nth(k).get_attribute("data-enc")), int(bars.nth(k).get_attribute("data-dec"))]
        for k in range(bars.count())
    ]


def test_a_longer_prefix_is_prefilled_at_once_then_decoded_in_the_page(reader, models):
    r = reader("greedy")
    w = r.w
    assert w.locator("[data-testid='status']").inner_text() == r.say("prefill_decode.not_yet_in_page", preset="modern")
    w.locator("[data-testid='prefix-pick']").select_option("BOS POSITIVE 0")  # P = 3: the page runs the model
    assert w.locator("[data-testid='status']").inner_text() == r.say("prefill_decode.ran_in_page", preset="modern")
    trace = decode_trace(models["modern"], LESSON_QUESTION_TEXT, None, "BOS POSITIVE 0")
    L = trace["num_layers"]
    assert rows(w, L) == [0] * L and work(w) == trace["work"]
    legend = w.locator("[data-testid='work-legend']").inner_text()
    assert r.say("prefill_decode.work_key_enc") in legend and r.say("prefill_decode.work_key_dec") in legend
    w.locator("[data-testid='next']").click()  # the prefill: three positions, three rows in every layer
    assert w.locator("[data-testid='step-label']").inner_text() == r.say(
        "prefill_decode.step_prefill", total=len(trace["steps"]), positions=r.say("prefill_decode.positions_other", n=3)
    )
    assert rows(w, L) == [3] * L and w.locator("[data-testid='cross-cache-0']").get_attribute("data-rows") == "9"
    assert w.locator("[data-testid='produced']").inner_text() == trace["steps"][0]
    assert "current" in w.locator("[data-testid='work'] [data-step='1']").get_attribute("class")
    w.locator("[data-testid='next']").click()  # a decode step: one position, one more row
    assert rows(w, L) == [4] * L and w.locator("[data-testid='produced']").inner_text() == trace["steps"][1]
    assert w.locator("[data-testid='dist'] tbody tr").first.get_attribute("data-token") == trace["steps"][1]
    # another question keeps the prefix's length, with that question's own right tokens
    w.locator("[data-testid='question-pick']").select_option(EXAMPLES[2])
    other = decode_trace(models["modern"], EXAMPLES[2], None, "BOS POSITIVE 7")
    assert w.locator("[data-testid='prefix-pick']").input_value() == "BOS POSITIVE 7"
    assert rows(w, L) == [3] * L, "another question starts again, at its prefill (it kept the old step)"
    w.locator("[data-testid='reset']").click()
    for s, token in enumerate(other["steps"], start=1):
        w.locator("[data-testid='next']").click()
        assert w.locator("[data-testid='produced']").inner_text() == token
        assert rows(w, L) == other["self_cache_lens"][s - 1]
    assert work(w) == other["work"]
    # the other checkpoint, in the page too
    w.locator("button[data-preset='historical']").click()
    hist = decode_trace(models["historical"], EXAMPLES[2], None, "BOS POSITIVE 7")
    assert work(w) == hist["work"] and rows(w, hist["num_layers"]) == hist["self_cache_lens"][-1]


def test_a_sampled_run_draws_what_python_draws(reader, models):
    r = reader("sampled")
    w = r.w
    first = sample_trace(models["historical"], LESSON_QUESTION_TEXT, "BOS", 2.0, 3, None, 0)  # recorded by Python
    for seed in (0, 5, 6):
        if seed == 5:  # a new seed, typed: the page runs the model and draws with it
            w.locator("[data-testid='seed']").fill("5")
            w.locator("[data-testid='seed']").press("Enter")
            w.locator("[data-testid='temperature']").focus()  # the change lands as the field is left
        if seed == 6:
            w.locator("[data-testid='draw-again']").click()
        want = (
            first if seed == 0 else sample_trace(models["historical"], LESSON_QUESTION_TEXT, "BOS", 2.0, 3, None, seed)
        )
        w.locator("[data-testid='reset']").click()
        for s, (token, dist) in enumerate(zip(want["steps"], want["dists"]), start=1):
            w.locator("[data-testid='next']").click()
            assert w.locator("[data-testid='produced']").inner_text() == token, (seed, s)
            panel = w.locator("[data-testid='dist']")
            assert float(panel.get_attribute("data-u")) == pytest.approx(dist["u"], abs=1e-15)
            assert int(panel.get_attribute("data-kept")) == sum(q > 0 for q in dist["q"]) == 3  # top-k = 3
            for row in panel.locator("tbody tr").all():
                v = VOCAB.index(row.get_attribute("data-token"))
                assert row.locator("[data-testid='p']").inner_text().startswith(fmt(dist["p"][v]))
                q = row.locator("[data-testid='q']").inner_text()
                assert q.startswith(fmt(dist["q"][v])) if dist["q"][v] > 0 else q == r.say("prefill_decode.cut")
        assert int(w.locator("[data-testid='seed']").input_value()) == seed
    # greedy again: nothing drawn, the argmax taken
    w.locator("button[data-mode='greedy']").click()
    greedy = decode_trace(models["historical"], LESSON_QUESTION_TEXT, None, "BOS")
    w.locator("[data-testid='reset']").click()
    w.locator("[data-testid='next']").click()
    assert w.locator("[data-testid='dist-note']").inner_text() == r.say(
        "prefill_decode.dist_greedy", token=greedy["steps"][0]
    )
    assert w.locator("[data-testid='sampling-settings']").count() == 0


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_reader_works_the_generation_view(reader, models, lang):
    r = reader("sampled", lang)
    total = len(
        sample_trace(
            models["historical"],
            LESSON_QUESTION_TEXT,
            "BOS POSITIVE",
            **{k: v for k, v in SAMPLING.items() if k != "mode"},
        )["steps"]
    )
    label = r.w.locator("[data-testid='step-label']")

    def light():
        r.tab_to("[data-testid='prefix-pick']")
        assert r.ring() >= 3
        r.page.keyboard.press("ArrowDown")  # BOS POSITIVE: the page runs the model
        assert r.w.locator("[data-testid='prefix-pick']").input_value() == "BOS POSITIVE"
        r.tab_to("[data-testid='next']")
        r.page.keyboard.press("Enter")
        assert label.inner_text() == r.say(
            "prefill_decode.step_prefill", total=total, positions=r.say("prefill_decode.positions_other", n=2)
        )
        assert r.live().startswith(label.inner_text())

    def dark():
        r.tab_to("button[data-mode='greedy']")
        r.page.keyboard.press("Enter")
        assert r.w.locator("button[data-mode='greedy']").get_attribute("aria-pressed") == "true"
        r.page.keyboard.press("Enter")  # the focus stayed on the mode's button
        r.tab_to("[data-testid='next']")
        r.page.keyboard.press("Space")
        assert r.w.locator("[data-testid='dist']").count() == 1

    every_reader(r, light, dark)
