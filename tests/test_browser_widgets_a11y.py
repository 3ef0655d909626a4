"""Every widget for every reader, in headless Chromium, in both languages: reached with Tab and worked
with the keyboard alone, its readouts shown on focus, its changes said in a polite live region, no
WCAG 2.1 A/AA violation (axe-core) in the light and the dark theme in the states the keys drive it to,
and nothing wider than a phone's column. Each widget is a standalone page as the built book renders it
(browser_support.standalone_widget_page), one page per widget and language."""

from __future__ import annotations

import re

import pytest
from browser_support import ROOT, Opened, fmt, softmax, standalone_widget_page, wait_for_widget

import encdec.widgets
from encdec.widgets import QuickCheck, choice, number
from encdec.widgets._base import text
from encdec.widgets.registry import WIDGETS as REGISTERED

pytestmark = pytest.mark.browser
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
WCAG_AA = "{runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}}"
DARK_PAGE = "#14181e"  # the book's dark background
COLUMN = 356  # the text column of a 390 x 844 phone
QUESTIONS = [
    choice("Who provides `Q`?", ["decoder", "encoder"], answer=0),
    number("How many weights in row 4?", answer=5),
]
# every widget of the one list (encdec/widgets/registry.py), made with no arguments but the quick check
WIDGETS = {name: getattr(encdec.widgets, name) for name in REGISTERED} | {"QuickCheck": lambda: QuickCheck(QUESTIONS)}


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    folder = tmp_path_factory.mktemp("a11y")
    return {
        (name, lang): standalone_widget_page([make()], folder, f"{name}_{lang}", lang).as_uri()
        for name, make in WIDGETS.items()
        for lang in ("en", "zh")
    }


class Reader:
    """One widget's page, worked from the keyboard."""

    def __init__(self, chromium, url, name, lang):
        self.opened = Opened(chromium, url)
        self.page, self.lang = self.opened.page, lang
        self.w = wait_for_widget(self.page, name)
        self.page.add_script_tag(path=str(AXE))

    def say(self, key, **values):
        return text(key, self.lang, **values)

    def opening(self, key, **values):
        """A string's words up to its first placeholder not in ``values``."""
        return re.split(r"\{\w+\}", self.say(key, **values))[0]

    def start(self):
        """Put the keyboard's starting point at the top of the page, before the widget."""
        self.page.mouse.click(1, 1)

    def focused(self, attribute="data-testid"):
        return self.page.evaluate(f"document.activeElement.getAttribute('{attribute}')")

    def tab_to(self, selector, most=40):
        """From the top of the page, press Tab until the focus is on ``selector`` (inside the widget); how
        many presses it took."""
        self.start()
        for k in range(1, most + 1):
            self.page.keyboard.press("Tab")
            if self.w.evaluate("(w, s) => document.activeElement === w.querySelector(s)", selector):
                return k
        raise AssertionError(f"Tab never reached {selector}")

    def cell_name(self, selector):
        return self.w.locator(selector).get_attribute("aria-label")

    def live(self):
        return self.w.locator("[data-testid='live']").text_content()

    def axe(self, state):
        found = self.page.evaluate(f"""async () => (await axe.run(document, {WCAG_AA})).violations.map((v) =>
            v.id + ': ' + v.nodes.slice(0, 3).map((n) => n.target.join(' ') + ' ' + n.failureSummary).join(' | '))""")
        assert found == [], f"{state}: {found}"

    def dark(self, on=True):
        self.page.evaluate(
            "([on, bg]) => { document.documentElement.dataset.theme = on ? 'dark' : 'light';"
            " document.body.style.background = on ? bg : ''; }",
            [on, DARK_PAGE],
        )

    def ring(self):
        """The focused element's focus ring: its width and its contrast on the widget's background."""
        got = self.w.evaluate("""w => { const s = getComputedStyle(document.activeElement);
            return [s.outlineStyle, parseFloat(s.outlineWidth), s.outlineColor, getComputedStyle(w).backgroundColor]; }""")
        style, width, colour, background = got
        assert style == "solid" and width >= 2, got
        return contrast(colour, background)

    def phone(self):
        """Overflow at 390 x 844, in a column 356 px wide: the elements that stick out of the widget."""
        self.page.set_viewport_size({"width": 390, "height": 844})
        self.page.evaluate(f"document.body.style.cssText += '; width: {COLUMN}px; margin: 0 17px; padding: 0'")
        return self.w.evaluate("""w => { const box = w.getBoundingClientRect(), out = [];
            if (w.scrollWidth > w.clientWidth + 1) out.push(`root: ${w.scrollWidth} > ${w.clientWidth}`);
            for (const el of w.querySelectorAll('*:not(.encdec-live)')) {  // the live region is 1 px, clipped
              const b = el.getBoundingClientRect();
              if (b.width && (b.right > box.right + 1 || b.left < box.left - 1)) out.push(`${el.tagName}.${el.className}`);
              if (el.clientWidth && el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== 'visible')
                out.push(`${el.tagName}.${el.className} scrolls`);
            }
            return out; }""")

    def tab_stops(self):
        """Tab from before the widget until the focus leaves it: the interactive elements it never reached
        (a grid counts once, by its one tab stop, and so does a group of radio buttons, by its checked one)
        and how many stops there were."""
        self.start()
        self.w.evaluate("""w => { let k = 0; for (const el of w.querySelectorAll(
            'button:not(:disabled), input:not([type=radio]), input[type=radio]:checked, select, [role=grid], svg[tabindex]'))
            el.dataset.stop = k++; }""")
        seen, inside = set(), False
        for _ in range(60):
            self.page.keyboard.press("Tab")
            stop = self.w.evaluate(
                "w => w.contains(document.activeElement) ? (document.activeElement.closest('[data-stop]')"
                " || {dataset: {}}).dataset.stop ?? '?' : null"
            )
            if stop is None and inside:
                break
            inside = inside or stop is not None
            if stop is not None:
                seen.add(stop)
        every = set(self.w.evaluate("w => [...w.querySelectorAll('[data-stop]')].map((el) => el.dataset.stop)"))
        return every - seen, len(seen)


def luminance(rgb):
    channels = [c / 255 for c in rgb]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def rgb(css: str) -> list[float]:
    """0-255 channels of a computed colour: rgb(...), rgba(...), or color(srgb ...) as color-mix() gives."""
    values = [float(x) for x in re.findall(r"[\d.]+", css.replace("srgb", ""))[:3]]
    return [255 * v for v in values] if css.startswith("color(") else values


def contrast(a: str, b: str) -> float:
    la, lb = (luminance(rgb(c)) for c in (a, b))
    return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)


@pytest.fixture
def reader(chromium, pages):
    made = []

    def _open(name, lang):
        r = Reader(chromium, pages[(name, lang)], name, lang)
        made.append(r)
        return r

    yield _open
    for r in made:
        assert r.opened.log.problems() == {}
        r.opened.context.close()


def every_reader(r, drive_light, drive_dark):
    """The checks every widget gets: all its controls on the Tab order, axe clean in light and in dark
    in the states the two drives leave it in, focus rings of 3:1 in both, and a phone's column."""
    missed, stops = r.tab_stops()
    assert not missed and stops >= 1, missed
    r.axe("as loaded, light")
    drive_light()
    r.axe("driven, light")
    r.dark()
    drive_dark()
    r.axe("driven again, dark")
    assert r.phone() == []
    r.axe("a phone's column, dark")  # the compact view's own rules; its colours are the same


LANGS = ["en", "zh"]


@pytest.mark.parametrize("lang", LANGS)
def test_mask_toggle(reader, lang):
    from encdec.widgets.mask_toggle import default_scores

    r = reader("MaskToggle", lang)
    tokens = ["BOS", "POSITIVE", "0", "4"]  # what the decoder is fed
    scores = default_scores(len(tokens))
    row2 = r.w.locator("[data-testid='rowsum-2']")

    def cell(i, j):
        return f"td[data-row='{i}'][data-col='{j}']"

    def light():
        assert r.tab_to(cell(0, 0)) == 4  # after the three presets: the grid is one stop
        assert r.ring() >= 3
        for key in ("ArrowDown", "ArrowDown", "ArrowRight"):
            r.page.keyboard.press(key)
        assert r.focused("data-row") == "2" and r.focused("data-col") == "1"
        weights = softmax(scores[2][:3])
        allowed = r.say(
            "mask_toggle.cell_allowed",
            i=2,
            reader="0",
            j=1,
            source="POSITIVE",
            shown=f"{fmt(weights[1])} s={fmt(scores[2][1], 1)}",
        )
        assert r.cell_name(cell(2, 1)) == allowed
        assert r.w.locator("[data-testid='readout']").inner_text() == allowed  # shown on focus, not only said
        r.page.keyboard.press("Space")
        assert r.focused("data-row") == "2" and r.focused("data-col") == "1"  # the redraw kept the focus
        now = softmax([scores[2][0], scores[2][2]])
        assert [r.w.locator(cell(2, j) + " .w").inner_text() for j in range(3)] == [fmt(now[0]), "✕", fmt(now[1])]
        assert r.cell_name(cell(2, 1)).startswith("✕ s=")
        assert r.live() == r.say("mask_toggle.live_forbidden", i=2, reader="0", j=1, source="POSITIVE", sum="1.000")
        assert row2.inner_text() == "1.000"
        r.page.keyboard.press("Control+Home")  # reader 0: forbid its only source
        r.page.keyboard.press("Enter")
        assert r.w.locator("[data-testid='all-forbidden']").inner_text() == r.say("mask_toggle.all_forbidden")
        assert "warn" in r.w.locator("[data-testid='rowsum-0']").get_attribute("class")
        r.page.keyboard.press("End")
        r.page.keyboard.press("ArrowDown")
        assert r.focused("data-row") == "1" and r.focused("data-col") == str(len(tokens) - 1)

    def dark():
        r.tab_to("button[data-preset='none']")
        assert r.ring() >= 3
        r.page.keyboard.press("Enter")
        assert r.w.locator("button[data-preset='none']").get_attribute("aria-pressed") == "true"
        assert r.live() == r.say("mask_toggle.live_preset", mask=r.say("mask_toggle.status_none"))
        assert row2.inner_text() == "1.000"

    every_reader(r, light, dark)


@pytest.mark.parametrize("lang", LANGS)
def test_softmax_compare(reader, lang):
    r = reader("SoftmaxMaskCompare", lang)

    def light():
        r.tab_to("button[data-reader='1']")
        r.page.keyboard.press("Enter")
        assert r.w.locator("button[data-reader='1']").get_attribute("aria-pressed") == "true"
        assert r.focused("data-reader") == "1"
        assert r.live() == r.say(
            "softmax_compare.live",
            i=1,
            token="POSITIVE",
            score="3.0",
            right="1.000",
            wrong=r.w.locator("[data-testid='sum-zero']").inner_text(),
        )

    def dark():
        before = r.w.locator("[data-testid='sum-zero']").inner_text()
        r.tab_to("[data-testid='future-slider']")
        assert r.ring() >= 3
        for _ in range(10):
            r.page.keyboard.press("ArrowRight")
        assert r.w.locator("[data-testid='future-value']").inner_text() == "4.0"
        after = r.w.locator("[data-testid='sum-zero']").inner_text()
        assert after != before and after in r.live() and "4.0" in r.live()

    every_reader(r, light, dark)


@pytest.mark.parametrize("lang", LANGS)
def test_cross_entropy(reader, lang):
    r = reader("CrossEntropySlider", lang)

    def light():
        r.tab_to("[data-testid='p-slider']")
        r.page.keyboard.press("ArrowRight")
        assert r.w.locator("[data-testid='loss']").inner_text() == "1.561"  # -log 0.21
        assert "1.561" in r.live()

    def dark():
        r.tab_to("[data-testid='bars']")
        assert r.ring() >= 3
        readout = r.w.locator("[data-testid='readout']")
        assert readout.inner_text().startswith(
            r.opening("cross_entropy.bar_title", token="4")
        )  # the correct token's bar
        r.page.keyboard.press("ArrowLeft")
        assert readout.inner_text().startswith(r.opening("cross_entropy.bar_title", token="3"))
        assert r.live() == readout.inner_text()
        r.page.keyboard.press("Home")
        assert readout.inner_text().startswith(r.opening("cross_entropy.bar_title", token="0"))

    every_reader(r, light, dark)


@pytest.mark.parametrize("lang", LANGS)
def test_cross_attention(reader, lang):
    r = reader("CrossAttentionExplorer", lang)
    token = lambda t: r.say("cross_attention.token", token=t)  # noqa: E731 (a one-line helper named where it is used)

    def light():
        r.tab_to("td[data-row='0'][data-col='0']")
        assert r.ring() >= 3
        r.page.keyboard.press("End")
        r.page.keyboard.press("ArrowDown")
        r.page.keyboard.press("ArrowLeft")
        from encdec.widgets.cross_attention import example_weights

        want = r.say(
            "cross_attention.hover",
            i=1,
            j=7,
            w=fmt(example_weights(4, 9)[1][7], 2),
            answer=token("POSITIVE"),
            question=token("4"),
        )
        assert r.w.locator("[data-testid='hover-info']").inner_text() == want  # the hover readout, on focus
        before = r.live()
        r.page.keyboard.press("Space")
        assert r.w.locator("td[data-row='1'][data-col='7']").get_attribute("aria-selected") == "true"
        assert r.live() != before and want in r.live()

    def dark():
        r.tab_to("[data-testid='swap-q']")
        r.page.keyboard.press("Space")
        assert r.w.locator("[data-testid='shape-A'] td").first.inner_text() == "[N, 9, 4]"
        assert "[N, 9, 4]" in r.live()

    every_reader(r, light, dark)


@pytest.mark.parametrize("lang", LANGS)
def test_shift_teacher_forcing(reader, lang):
    r = reader("ShiftTeacherForcing", lang)

    def light():
        r.tab_to("[data-testid='toggle-shift']")
        assert r.ring() >= 3
        r.page.keyboard.press("Space")
        assert r.live() == r.say("shift_teacher_forcing.live_leak", n=5, total=5)
        r.page.keyboard.press("Space")
        assert r.live() == r.say("shift_teacher_forcing.no_leak")

    def dark():
        r.tab_to("[data-testid='toggle-causal_mask']")
        r.page.keyboard.press("Space")
        assert r.w.locator("tr[data-leak='yes']").count() == 3
        assert r.live() == r.say("shift_teacher_forcing.live_leak", n=3, total=4)

    every_reader(r, light, dark)


@pytest.mark.parametrize("lang", LANGS)
def test_prefill_decode(reader, lang):
    r = reader("PrefillDecodeStepper", lang)
    label = r.w.locator("[data-testid='step-label']")

    def light():
        assert r.tab_to("[data-testid='next']") == 1  # Back is disabled at step 0
        assert r.ring() >= 3
        r.page.keyboard.press("Enter")
        assert r.live() == r.say("prefill_decode.live", step=label.inner_text(), token="POSITIVE")
        r.page.keyboard.press("Space")
        assert label.inner_text() == r.say("prefill_decode.step_decode", s=2, total=4)
        assert r.focused() == "next"

    def dark():
        for _ in range(2):
            r.page.keyboard.press("Enter")
        assert r.live() == r.say(
            "prefill_decode.live", step=r.say("prefill_decode.step_decode", s=4, total=4), token="EOS"
        )
        assert r.focused() == "back"  # Next is disabled at the end: the focus went back, not to the page
        r.page.keyboard.press("Enter")
        assert label.inner_text() == r.say("prefill_decode.step_decode", s=3, total=4)

    every_reader(r, light, dark)


@pytest.mark.parametrize("lang", LANGS)
def test_attention_maps(reader, lang):
    r = reader("AttentionMapViewer", lang)
    title = r.w.locator("[data-testid='map-title']")

    def light():
        r.tab_to("button[data-head='1']")
        r.page.keyboard.press("Enter")
        assert r.w.locator("button[data-head='1']").get_attribute("aria-pressed") == "true"
        assert (
            r.live()
            == title.inner_text()
            == r.say(
                "attention_maps.title",
                kind=r.say("attention_maps.kind_cross"),
                layer=1,
                head=2,
                what=r.say("attention_maps.what_cross"),
            )
        )

    def dark():
        r.tab_to("td[data-row='0'][data-col='0']")
        assert r.ring() >= 3
        r.page.keyboard.press("ArrowRight")
        cell = r.w.locator("td[data-row='0'][data-col='1']")
        assert r.w.locator("[data-testid='readout']").inner_text() == cell.get_attribute("aria-label")
        assert cell.get_attribute("aria-label").startswith(cell.inner_text() + (":" if lang == "en" else "："))

    every_reader(r, light, dark)


# What a reader types into the score explorer's question field, each an attempt to make it more than data:
# (typed, what the field keeps, the status's key or None for a question it shows).
TYPED = [
    ('<img src=x onerror="window.hit=1">', None, "score_explorer.error_format"),
    ("</select><b id=hit>1</b>", None, "score_explorer.error_format"),
    ("9" * 70, "9" * 64, "score_explorer.error_range"),
    ("  −30 – −34 ", None, None),  # typographic minus and dash: the task's question, -30 - -34
]


def typed_as_text(r):
    """Invariant: what a reader types reaches the figure as bounded text, read by parseQuestion, never as
    markup: no element appears, no script runs, the status shows the words of the table."""
    box = r.w.locator("[data-testid='question-input']")
    for typed, kept, status in TYPED:
        box.fill("")
        box.type(typed) if len(typed) > 64 else box.fill(typed)
        assert box.input_value() == (kept or typed)
        box.press("Enter")
        assert r.page.evaluate("() => window.hit === undefined && !document.getElementById('hit')")
        assert r.w.locator("img").count() == 0
        if status is None:  # the question of the task it is, drawn
            assert r.w.locator("[data-testid='status']").get_attribute("data-weights") == "ready"
            assert r.w.locator("[data-testid='vectors']").count() == 1
        else:
            shown = r.w.locator("[data-testid='status']").inner_text()
            assert shown == r.say(status, text=kept or typed, value=kept or typed)


@pytest.mark.parametrize("lang", LANGS)
def test_score_explorer(reader, lang):
    """One query and one key, worked from the keyboard: another key gives the Python twin's numbers, and
    the decoder's self-attention shows the chosen key, now in the query's future, as masked; then each
    attempt of TYPED in the question field stays text."""
    from encdec.data import encode_question
    from encdec.train import load_run
    from encdec.widgets._base import LESSON_QUESTION_TEXT
    from encdec.widgets.score_explorer import score_parts, score_step

    r = reader("ScoreExplorer", lang)
    parts = score_parts(load_run("modern")[0], encode_question(LESSON_QUESTION_TEXT))

    def light():
        r.tab_to("[data-testid='key']")
        assert r.ring() >= 3
        r.page.keyboard.press("ArrowDown")  # key 3 (the units digit 0 of 30) -> key 4 (subtract)
        p = parts["cross"][1]
        step = score_step(p["q"], p["k"], 4, 1, 2, 4, False)
        assert r.w.locator("tr.encdec-chosen").get_attribute("data-key") == "4"
        assert r.w.locator("[data-testid='weight-4']").inner_text() == fmt(step["weights"][4])
        kind = r.say("score_explorer.kind_cross")
        title = r.say(
            "score_explorer.title", kind=kind, layer=2, head=2, heads=4, i=2, query_token="0", j=4, key_token="subtract"
        )
        weight = fmt(step["weights"][4])
        assert r.live() == r.say(
            "score_explorer.live", title=title, dot=fmt(step["dot"]), score=fmt(step["score"]), weight=weight
        )

    def dark():
        r.tab_to("[data-testid='kind']")
        r.page.keyboard.press("ArrowUp")  # cross-attention -> the decoder's self-attention: key 4 becomes 3
        assert r.focused() == "kind"
        assert "future" in r.w.locator("tr[data-key='3']").get_attribute("class")
        assert r.w.locator("[data-testid='weight-3']").inner_text() == "0.000"
        note = r.say("score_explorer.masked_note", i=2, j=3, min="−3.4028e+38")
        assert r.w.locator("[data-testid='weight-line']").inner_text() == note

    every_reader(r, light, dark)
    typed_as_text(r)


@pytest.mark.parametrize("lang", LANGS)
def test_quick_check(reader, lang):
    r = reader("QuickCheck", lang)
    score = lambda right: r.say("quick_check.score", right=right, total=2)  # noqa: E731 (a one-line helper named where it is used)

    def light():
        r.tab_to("[data-question='0'] button[data-option='1']")
        assert r.ring() >= 3
        r.page.keyboard.press("Enter")
        assert r.live() == r.say("quick_check.live", n=1, status=r.say("quick_check.status_wrong"), score=score(0))
        r.page.keyboard.press("Shift+Tab")
        r.page.keyboard.press("Space")
        assert r.w.locator("[data-question='0']").get_attribute("data-state") == "right"
        assert r.live() == r.say("quick_check.live", n=1, status=r.say("quick_check.status_right"), score=score(1))

    def dark():
        r.tab_to("[data-testid='number-1']")
        r.page.keyboard.type("5")
        r.page.keyboard.press("Enter")
        assert r.w.locator("[data-testid='score']").inner_text() == score(2)
        assert r.live() == r.say("quick_check.live", n=2, status=r.say("quick_check.status_right"), score=score(2))

    every_reader(r, light, dark)


@pytest.mark.parametrize("lang", LANGS)
def test_ask_model(reader, lang):
    r = reader("AskTheModel", lang)

    def light():
        assert r.tab_to("[data-testid='question-input']") == 1
        r.page.keyboard.press("Control+a")
        r.page.keyboard.type("-7 - 12")
        r.page.keyboard.press("Enter")
        assert r.w.locator("[data-testid='question-tokens'] .encdec-chip").all_inner_texts() == [
            "BOS",
            "NEGATIVE",
            "0",
            "7",
            "subtract",
            "POSITIVE",
            "1",
            "2",
            "EOS",
        ]
        assert "modern" in r.live() and "historical" in r.live()
        r.tab_to("[data-testid='next']")
        assert r.ring() >= 3
        r.page.keyboard.press("Enter")
        assert r.w.locator("[data-testid='step-panel']").get_attribute("data-step") == "1"
        assert r.live().startswith(r.w.locator("[data-testid='step-label']").inner_text())

    def dark():
        r.tab_to("[data-testid='cross'] td[data-row='0'][data-col='0']")
        assert r.ring() >= 3
        r.page.keyboard.press("ArrowDown")
        r.page.keyboard.press("End")
        cell = r.w.locator("[data-testid='cross'] td[data-row='1'][data-col='8']")
        assert r.w.locator("[data-testid='readout']").inner_text() == cell.get_attribute("aria-label")
        r.tab_to("[data-testid='end']")
        r.page.keyboard.press("Enter")
        assert r.w.locator("[data-testid='step-panel']").get_attribute("data-step") == "4"
        assert r.focused() == "reset"  # End is disabled there: the focus stays in the stepper

    every_reader(r, light, dark)


@pytest.mark.parametrize("lang", LANGS)
def test_break_it(reader, lang):
    from encdec.data import decode, encode_answer, encode_question, question_text
    from encdec.train import load_run
    from encdec.widgets import break_answer, mistake_table

    r = reader("BreakIt", lang)
    model, _ = load_run("modern")
    rows = {row["name"]: row for row in mistake_table("modern")}

    def answer(which):
        return r.w.locator(f"[data-testid='{which}-answer']").get_attribute("data-ids")

    def light():
        r.tab_to("[data-testid='mistake-no_causal_mask']")  # the group's one stop: the checked mistake
        assert r.ring() >= 3
        r.page.keyboard.press("ArrowDown")
        assert r.focused() == "mistake-stale_position"
        assert r.w.locator("[data-testid='mistake-stale_position']").is_checked()
        ids, _ = break_answer(model, encode_question(question_text(-30, "subtract", -34)), "stale_position")
        assert answer("broken") == " ".join(map(str, ids)) and decode(ids) == "BOS POSITIVE 0 0 0"
        assert answer("intact") == " ".join(map(str, encode_answer("BOS POSITIVE 0 4 EOS")))
        assert r.w.locator("[data-testid='count-stale_position']").get_attribute("data-right") == str(
            rows["stale_position"]["right"]
        )
        assert r.live().startswith(r.say("break_it.m_stale_position"))

    def dark():
        r.tab_to("[data-testid='operand-a']")
        r.page.keyboard.press("Control+a")
        r.page.keyboard.type("12")
        r.page.keyboard.press("Tab")  # the change lands; the focus goes on to the operator
        assert r.focused() == "op-select"
        r.tab_to("[data-testid='mistake-stale_position']")
        r.page.keyboard.press("ArrowDown")  # Q from the encoder: no answer, and PyTorch's words
        assert answer("broken") == ""
        assert r.w.locator("[data-testid='torch-error']").inner_text().endswith(rows["q_from_encoder"]["error"])
        a, op = (
            int(r.w.locator("[data-testid='operand-a']").input_value()),
            r.w.locator("[data-testid='op-select']").input_value(),
        )
        ids = encode_question(question_text(a, op, -34))
        assert a == 12 and r.w.locator("[data-testid='question-tokens'] .encdec-chip").count() == len(ids)

    every_reader(r, light, dark)


def test_heat_cells_keep_their_text_readable_at_every_weight(reader):
    """heat() (common.js) at weights 0, 0.01, ..., 1 in a widget: text on cell at least 4.5:1, light and dark."""
    r = reader("AttentionMapViewer", "en")
    common = (ROOT / "encdec" / "widgets" / "common.js").read_text(encoding="utf-8")  # imports nothing
    r.page.add_script_tag(content=common.replace("export function ", "function "))  # its helpers as the page's
    r.w.evaluate("""w => { const row = w.querySelector('tbody tr');
        for (let k = 0; k <= 100; k++) { const a = heat(k / 100); row.append(h('td', { class: a.class, style: a.style }, '0.00')); } }""")
    for dark in (False, True):
        r.dark(dark)
        pairs = r.w.evaluate(
            "w => [...w.querySelectorAll('tbody tr:first-child td')].slice(-101).map((td) => "
            "[getComputedStyle(td).color, getComputedStyle(td).backgroundColor])"
        )
        worst = min(contrast(*pair) for pair in pairs)
        assert worst >= 4.5, (dark, worst)
    # JupyterLab's dark theme gives the same dark colours
    colours = "w => [getComputedStyle(w).backgroundColor, getComputedStyle(w.querySelector('.heat')).backgroundColor]"
    book_dark = r.w.evaluate(colours)
    r.dark(False)
    r.page.evaluate("document.body.dataset.jpThemeLight = 'false'")
    assert r.w.evaluate(colours) == book_dark
