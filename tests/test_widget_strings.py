"""The widgets speak the page's language from one table of strings per language.

``encdec/widgets/strings/<lang>.json`` holds every word a widget shows; these tests hold the
tables to the same keys and placeholders, every key to a use and every use to a key, the widgets'
JavaScript to no English of its own, and a widget rendered in Chinese (in node, on a small fake
DOM) to Chinese text with no English sentence of the table left in it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import traitlets

import encdec.widgets as widgets
from encdec.widgets import (
    AskTheModel,
    AttentionMapViewer,
    BreakIt,
    CrossAttentionExplorer,
    CrossEntropySlider,
    MaskToggle,
    PrefillDecodeStepper,
    QuickCheck,
    ScoreExplorer,
    ShiftTeacherForcing,
    SoftmaxMaskCompare,
    _base,
    choice,
    number,
)

ROOT = Path(__file__).resolve().parent.parent
WIDGETS_DIR = ROOT / "encdec" / "widgets"
TABLES = {
    lang: json.loads((WIDGETS_DIR / "strings" / f"{lang}.json").read_text(encoding="utf-8")) for lang in _base.LANGUAGES
}
# The widgets' JS. static_page.js is the static page's renderer of saved widgets, not a widget: its
# one sentence to a reader (a figure could not be shown) is the tables' "static_page.failed", which
# the build writes into it (_base.renderer_js; tested below).
JS_FILES = sorted(p for p in WIDGETS_DIR.glob("*.js") if p.name != "static_page.js")
PY_FILES = sorted(WIDGETS_DIR.glob("*.py"))
PLACEHOLDER = re.compile(r"\{(\w+)\}")
CJK = re.compile(r"[\u4e00-\u9fff]")


def flat(table: dict) -> dict[str, str]:
    return {f"{section}.{key}": value for section, keys in table.items() for key, value in keys.items()}


EN, ZH = flat(TABLES["en"]), flat(TABLES["zh"])


# --- the tables ---------------------------------------------------------------------------------


def test_both_tables_have_the_same_keys_and_placeholders():
    assert list(TABLES["en"]) == list(TABLES["zh"]), "the same sections, in the same order"
    assert sorted(EN) == sorted(ZH), f"only in en: {sorted(set(EN) - set(ZH))}; only in zh: {sorted(set(ZH) - set(EN))}"
    for key in EN:
        assert set(PLACEHOLDER.findall(EN[key])) == set(PLACEHOLDER.findall(ZH[key])), key
        assert ZH[key].strip() and EN[key].strip(), key


def test_the_chinese_table_is_chinese():
    """Every entry with English words in it reads in Chinese (symbols and code may stay)."""
    for key, en in EN.items():
        words = re.findall(r"[A-Za-z]{3,}", PLACEHOLDER.sub("", en))
        if len(words) >= 1 and not set(words) <= {"softmax", "log", "one_hot", "inf", "NaN"}:
            assert CJK.search(ZH[key]), f"{key}: {ZH[key]!r} is not translated"


def test_the_chinese_table_uses_the_glossary():
    import yaml

    terms = yaml.safe_load((ROOT / "book" / "glossary.yml").read_text(encoding="utf-8"))["terms"]
    missing = [
        (key, t["en"], t["zh"])
        for key in EN
        for t in terms
        if re.search(rf"\b{re.escape(t['en'])}s?\b", PLACEHOLDER.sub("", EN[key]), re.IGNORECASE)
        and t["zh"] not in ZH[key]
    ]
    assert not missing, f"(key, the English term, the glossary's Chinese the entry should use): {missing}"


# --- every key used, every use a key --------------------------------------------------------------


def _js_literals(source: str) -> list[str]:
    """The string literals of a JS file, a template literal with its ${...} left empty; comments
    are skipped (and regular expressions, as long as they hold no quote)."""
    out, i, n = [], 0, len(source)
    stack = []  # open template literals: [brace depth inside the current ${...}, static parts so far]

    def read_quoted(i, quote):
        buf = []
        while source[i] != quote:
            if source[i] == "\\":
                buf.append(source[i : i + 2])
                i += 2
            else:
                buf.append(source[i])
                i += 1
        return "".join(buf), i + 1

    def read_template(i):  # from just after ` or }, up to the closing ` or the next ${
        buf = []
        while True:
            c = source[i]
            if c == "\\":
                buf.append(source[i : i + 2])
                i += 2
            elif c == "`":
                return "".join(buf), i + 1, False
            elif source.startswith("${", i):
                return "".join(buf), i + 2, True
            else:
                buf.append(c)
                i += 1

    while i < n:
        c = source[i]
        if source.startswith("//", i):
            i = source.index("\n", i) if "\n" in source[i:] else n
        elif source.startswith("/*", i):
            i = source.index("*/", i) + 2
        elif c in "\"'":
            text, i = read_quoted(i + 1, c)
            out.append(text)
        elif c == "`" or (c == "}" and stack and stack[-1][0] == 0):
            parts = stack.pop()[1] if c == "}" else []
            text, i, opened = read_template(i + 1)
            parts.append(text)
            if opened:
                stack.append([0, parts])
            else:
                out.append("${}".join(parts))  # a template literal is one literal, its ${...} left empty
        elif c == "{" and stack:
            stack[-1][0] += 1
            i += 1
        elif c == "}" and stack:
            stack[-1][0] -= 1
            i += 1
        else:
            i += 1
    return out


KEY = re.compile(rf"^({'|'.join(TABLES['en'])})\.(\w+)$")


def _keys_named(text: str, literals: list[str]) -> set[str]:
    named = {s for s in literals if KEY.match(s)}
    for plural in re.findall(r"\btn\(model, \"([\w.]+)\"", text):  # tn(model, key, n): key_one, key_other
        named.discard(plural)
        named |= {plural + "_one", plural + "_other"}
    return named


def _python_literals(path: Path) -> list[str]:
    import ast

    return [
        node.value
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]


def test_every_key_is_used_and_every_key_asked_for_exists():
    asked = set()
    for path in JS_FILES:
        text = path.read_text(encoding="utf-8")
        asked |= _keys_named(text, _js_literals(text))
    for path in PY_FILES:
        asked |= {s for s in _python_literals(path) if KEY.match(s) and not s.endswith((".js", ".css", ".json"))}
    assert not asked - set(EN), f"keys asked for but not in the tables: {sorted(asked - set(EN))}"
    assert not set(EN) - asked, f"keys no widget uses: {sorted(set(EN) - asked)}"


def test_keys_are_literal_strings_in_the_javascript():
    """t(model, ...) and tn(model, ...) always name their key, so the test above sees every use."""
    for path in JS_FILES:
        text = path.read_text(encoding="utf-8")
        for call in re.finditer(r"(?<!function )\bt\(model, ([^,)]+)", text):
            arg = call.group(1).strip()
            if path.name == "common.js" and arg.startswith("key"):
                continue  # t and tn themselves
            literal = re.fullmatch(r'"[\w.]+"', arg)
            ternary = re.fullmatch(r'[\w\[\]. !=]+\? "[\w.]+" : "[\w.]+"', arg)
            lookup = re.fullmatch(r"(status|known)\[\w+\]", arg)  # a table of literal keys
            assert literal or ternary or lookup, f"{path.name}: t(model, {arg}) does not name its key"
        for call in re.finditer(r"(?<!function )\btn\(model, ([^,)]+)", text):
            assert re.fullmatch(r'"[\w.]+"', call.group(1).strip()), f"{path.name}: tn(model, {call.group(1)})"


# Words in the JS that are code, not prose: CSS and SVG tokens, the lesson's tensor names.
CODE_WORDS = {"background", "rgba", "color", "width", "http", "www", "org", "svg", "softmax", "scores"}
# Trait values, CSS classes and trait names that happen to equal an English label of the table.
CODE_NAMES = {"causal", "padding", "none", "future", "score", "source"}
EN_WORDS = {v for v in EN.values() if not PLACEHOLDER.search(v)}


def _english(literal: str) -> bool:
    """A sentence or phrase (two or more words of letters), or a label of the English table."""
    words = [
        w
        for w in re.split(r"[\s,;:()\[\]=/.+\"'`]+", re.sub(r"\$\{[^}]*\}", " ", literal))
        if re.fullmatch(r"[A-Za-z]{2,}", w) and w not in CODE_WORDS
    ]
    return len(words) >= 2 or (literal.strip() in EN_WORDS and literal.strip() not in CODE_NAMES)


def test_no_english_left_in_the_javascript():
    """No literal of a widget's JS says something in English: the words come from the tables."""
    leftovers = {}
    for path in JS_FILES:
        code = re.sub(r"^import [^;]*;$", "", path.read_text(encoding="utf-8"), flags=re.M)  # module paths: no words
        for literal in _js_literals(code):
            if not KEY.match(literal) and _english(literal):
                leftovers.setdefault(path.name, []).append(literal)
    assert not leftovers, f"English text in the widgets' JS (move it to strings/en.json): {leftovers}"


def test_the_static_renderer_says_its_sentence_from_the_tables():
    """widgets.js as the build writes it (_base.renderer_js) carries "static_page.failed" of each
    table, and its source (static_page.js) no sentence of its own."""
    built = _base.renderer_js()
    words = json.loads(re.search(r"const FAILED = (\{.*?\});", built).group(1))
    assert words == {lang: flat(TABLES[lang])["static_page.failed"] for lang in _base.LANGUAGES}
    assert all("{why}" in w for w in words.values())
    source = (WIDGETS_DIR / "static_page.js").read_text(encoding="utf-8")
    assert _base.RENDERER_WORDS in source and not CJK.search(source)
    assert not [lit for lit in _js_literals(source) if "could not be shown" in lit]


def test_the_literal_scan_sees_english():
    """The scan above would catch a sentence, a label, a template's words and a single word."""
    source = (
        'h("b", {}, "Show answer"); const x = `step ${s} of ${n}`; y = "Reset"; // a comment\n'
        'z = "encdec-btn active"; w = t(model, "quick_check.check");'
    )
    found = [s for s in _js_literals(source) if not KEY.match(s) and _english(s)]
    assert found == ["Show answer", "step ${} of ${}", "Reset"]


# --- rendering in node ------------------------------------------------------------------------------

FAKE_DOM = r"""
class FakeNode {
  constructor(tag) { this.tag = tag; this.attrs = {}; this.children = []; this.listeners = {}; this.className = ""; }
  setAttribute(k, v) { this.attrs[k] = String(v); }
  getAttribute(k) { return this.attrs[k] ?? null; }
  addEventListener(type, f) { (this.listeners[type] ||= []).push(f); }
  append(...nodes) { for (const x of nodes) this.children.push(x instanceof FakeNode ? x : String(x)); }
  replaceChildren(...nodes) { this.children = []; this.append(...nodes); }
  set textContent(v) { this.children = [String(v)]; }
  get textContent() { return this.children.map((c) => (typeof c === "string" ? c : c.textContent)).join(""); }
}
globalThis.Node = FakeNode;
globalThis.document = { documentElement: { lang: PAGE_LANG },
  createElement: (tag) => new FakeNode(tag), createElementNS: (ns, tag) => new FakeNode(tag) };
function fakeModel(state) {
  const handlers = {};
  return { get: (k) => state[k], set: (k, v) => { state[k] = v; }, save_changes() {},
    on: (ev, f) => { (handlers[ev] ||= []).push(f); }, off() {} };
}
// What a reader sees: every text node, and the attributes read aloud or shown on hover.
function seen(node, out = []) {
  if (typeof node === "string") { if (node.trim()) out.push(node); return out; }
  for (const k of ["title", "aria-label"]) if (node.attrs[k]) out.push(node.attrs[k]);
  for (const c of node.children) seen(c, out);
  return out;
}
"""


def render_texts(tmp_path: Path, widget, js: str, page_lang: str, states: list[dict]) -> list[list[str]]:
    """The texts a widget shows in node, once per state (trait changes over its own state)."""
    from encdec.widgets._base import bundle_text

    node = shutil.which("node")
    assert node, "node is needed (the book build needs it too: install Node.js)"
    state = {k: v for k, v in widget.get_state().items() if k not in ("_esm", "_css") and not isinstance(v, bytes)}
    assert widget._esm == bundle_text(js.removesuffix(".js")), f"{js} is not the widget's own module"
    (tmp_path / "widget.mjs").write_text(widget._esm, encoding="utf-8")  # its bundle, as the page imports it
    (tmp_path / "run.mjs").write_text(
        FAKE_DOM.replace("PAGE_LANG", json.dumps(page_lang))
        + "const { default: widget } = await import('./widget.mjs');\n"
        + f"const base = {json.dumps(state)};\n"
        + f"const out = {json.dumps(states)}.map((changes) => {{\n"
        + "  const el = new FakeNode('div');\n"
        + "  widget.render({ model: fakeModel({ ...base, ...changes }), el });\n"
        + "  return seen(el);\n"
        + "});\n"
        + "console.log(JSON.stringify(out));\n",
        encoding="utf-8",
    )
    done = subprocess.run([node, str(tmp_path / "run.mjs")], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def fragments(lang: str, section: str) -> list[str]:
    """Pieces of one table that a rendering in the other language may not show: every fragment
    between placeholders that holds an English word of three or more letters (en) or a Chinese
    character (zh) and differs from the other table's entry."""
    table, other = (EN, ZH) if lang == "en" else (ZH, EN)
    words = re.compile(r"[A-Za-z]{3,}") if lang == "en" else CJK
    frags = []
    for key in (k for k in table if k.split(".")[0] in (section, "common")):
        for piece in PLACEHOLDER.split(table[key])[::2]:
            frag = piece.strip(' :;,.()"')
            if words.search(frag) and frag not in other[key] and frag != "softmax":
                frags.append(frag)
    return frags


QUESTIONS = [choice("Q?", ["A", "B"], answer=0, explain="`Q`"), number("9?", answer=9)]  # the page's own words
CASES = {  # widget: (how to make it, its JS, states to render)
    "MaskToggle": (
        MaskToggle,
        "mask_toggle.js",
        [{}, {"preset": "custom"}, {"preset": "none", "mask": [[True] * 5] + [[False] * 5] * 4}],
    ),
    "SoftmaxMaskCompare": (SoftmaxMaskCompare, "softmax_compare.js", [{}]),
    "CrossAttentionExplorer": (
        CrossAttentionExplorer,
        "cross_attention.js",
        [{}, {"swap_q": True}, {"Ka": 3, "selected": [9, 9]}],
    ),
    "ShiftTeacherForcing": (
        ShiftTeacherForcing,
        "shift_teacher_forcing.js",
        [{}, {"shift": False}, {"causal_mask": False}],
    ),
    "CrossEntropySlider": (CrossEntropySlider, "cross_entropy.js", [{}]),
    "PrefillDecodeStepper": (
        PrefillDecodeStepper,
        "prefill_decode.js",
        [{"step": s} for s in range(5)]
        + [{"prefix": ["BOS", "POSITIVE"], "steps": ["0", "4"], "step": 1, "probs": [0.5, 0.9]}],
    ),
    "AttentionMapViewer": (
        AttentionMapViewer,
        "attention_maps.js",
        [{}, {"kind": "encoder_self"}, {"kind": "decoder_self"}],
    ),
    "ScoreExplorer": (
        ScoreExplorer,
        "score_explorer.js",
        [
            {},
            {"kind": "decoder_self", "layer": 0, "query": 1, "key": 3},
            {"kind": "encoder_self", "query": 4, "key": 8},
            {"question": "12 + 7"},
            {"question": "50 + 1"},
            {"question": "what is 2 + 2"},
            {"question": ""},
        ],
    ),
    "QuickCheck": (
        lambda **kw: QuickCheck(QUESTIONS, **kw),
        "quick_check.js",
        [{}, {"responses": [1, "8"]}, {"responses": [0, "9"]}, {"responses": [1, "x"], "revealed": [True, True]}],
    ),
    "AskTheModel": (
        AskTheModel,
        "ask_model.js",
        [
            {},
            {"step": 1},
            {"step": 3, "use_cache": False},
            {"question": "-7 - 12", "preset": "historical", "step": 4, "forced": "NEGATIVE"},
            {"forced": "EOS"},
            {"question": "50 + 1"},
            {"question": "what is 2 + 2"},
            {"question": ""},
        ],
    ),
    "BreakIt": (
        BreakIt,
        "break_it.js",
        [
            {},
            {"mistake": "mask_after_softmax"},
            {"mistake": "stale_position", "a": 12, "op": "add", "b": 7},
            {"mistake": "q_from_encoder"},
            {"mistake": "no_cross_attention", "preset": "historical"},
        ],
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_widget_on_a_chinese_page_speaks_chinese(tmp_path, name):
    make, js, states = CASES[name]
    widget = make()
    assert widget.lang == "auto"
    frags = fragments("en", widget._section)
    for texts in render_texts(tmp_path, widget, js, "zh-CN", states):
        shown = "\n".join(texts)
        assert CJK.search(shown), f"{name}: no Chinese on a Chinese page: {shown[:300]}"
        english = [f for f in frags if f in shown]
        assert not english, f"{name}: English from the table on a Chinese page: {english}"


@pytest.mark.parametrize("name", list(CASES))
def test_a_widget_speaks_english_on_an_english_page_and_chinese_when_told(tmp_path, name):
    make, js, states = CASES[name]
    widget = make()
    for texts in render_texts(tmp_path, widget, js, "en", states):
        assert not CJK.search("\n".join(texts)), f"{name}: Chinese on an English page: {texts}"
    told = make(lang="zh")
    assert list(told._strings) == ["zh"]
    frags = fragments("en", widget._section)
    for texts in render_texts(tmp_path, told, js, "en", states):
        shown = "\n".join(texts)
        assert CJK.search(shown) and not [f for f in frags if f in shown], f"{name}: lang='zh' shows {texts}"
        assert CJK.search("\n".join(texts)), f"{name}: lang='zh' on an English page should be Chinese"


# --- the Python side: the lang trait, the module default, one rule to fill a template ----------------

ALL = [
    MaskToggle,
    SoftmaxMaskCompare,
    CrossAttentionExplorer,
    ShiftTeacherForcing,
    CrossEntropySlider,
    PrefillDecodeStepper,
    AttentionMapViewer,
    ScoreExplorer,
    QuickCheck,
    AskTheModel,
    BreakIt,
]


@pytest.mark.parametrize("cls", ALL)
def test_every_widget_gets_its_sections_in_the_languages_it_may_show(cls):
    w = cls()
    assert w.lang == "auto" and w._section in TABLES["en"]
    state = w.get_state()
    assert state["lang"] == "auto"
    assert state["_strings"] == {lang: {s: TABLES[lang][s] for s in ("common", w._section)} for lang in ("en", "zh")}
    w.lang = "zh"  # chosen in Python: the browser gets that language only, and redraws
    assert w.get_state()["_strings"] == {"zh": {s: TABLES["zh"][s] for s in ("common", w._section)}}


def test_set_language_is_the_default_of_new_widgets():
    assert widgets.get_language() == "auto"
    try:
        widgets.set_language("zh")
        assert MaskToggle().lang == "zh" and list(QuickCheck()._strings) == ["zh"]
        assert MaskToggle(lang="en").lang == "en"
    finally:
        widgets.set_language("auto")
    assert MaskToggle().lang == "auto"
    with pytest.raises(ValueError, match="lang must be one of"):
        widgets.set_language("fr")
    with pytest.raises(traitlets.TraitError, match="lang must be one of"):
        MaskToggle(lang="zh-CN")


def test_python_and_javascript_fill_templates_alike(tmp_path):
    from test_widgets import _run_widget_js

    cases = [
        (template, {name: f"<{k}>" for k, name in enumerate(PLACEHOLDER.findall(template))})
        for template in [*EN.values(), *ZH.values()]
    ]
    cases.append(("{a} and {missing}", {"a": 1}))
    js = _run_widget_js(
        tmp_path, "mask_toggle.js", ["fill"], f"{json.dumps(cases)}.map(([template, values]) => fill(template, values))"
    )
    assert js == [_base.fill(template, **values) for template, values in cases]
    assert _base.fill("{a} and {missing}", a=1) == "1 and {missing}"
    assert _base.text("prefill_decode.layer", "zh", n=2) == "第 2 层"
    assert _base.text("prefill_decode.layer", "auto", n=2) == "layer 2"  # Python has no page: English


def test_quick_check_status_is_the_same_line_in_python_and_javascript(tmp_path):
    from test_widgets import _run_widget_js

    w = QuickCheck([choice("?", ["a", "b"], 0), number("?", 9), number("?", 1), number("?", 2)])
    w.set_state({"responses": [0, "8", "x", None], "revealed": [False, False, False, False]})
    for lang in ("en", "zh"):
        w.lang = lang
        states = [w.state(i) for i in range(4)]
        assert states == ["right", "wrong", "unanswered", "unanswered"]
        model = json.dumps({"lang": lang, "_strings": w._strings})
        js = _run_widget_js(
            tmp_path,
            "quick_check.js",
            ["statusText"],
            f"{json.dumps(list(zip(states, w.responses)))}.map(([s, r]) =>"
            f" statusText({{ get: (k) => ({model})[k] }}, s, r))",
        )
        assert js == [w.status(i) for i in range(4)]
    assert w.status(0) == "✓ 正确。" and w.status(3) == ""
    w.lang = "auto"
    assert w.status(1) == EN["quick_check.status_wrong"] and w.status(2) == EN["quick_check.status_not_a_number"]
