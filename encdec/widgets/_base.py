"""What every book widget shares: the base class, the string tables, the lesson's example, softmax.

A widget is one Python file here and one JS file of the same name, listed once in ``registry.py``; its
module is that JS file bundled with what it imports (``bundle_text``, made by ``make widgets``). This module is the Python side of ``common.js``: ``softmax`` and ``masked_softmax_row`` are
the twins of its ``softmax`` and ``maskedSoftmaxRow`` (plain Python), ``LESSON_*`` is the example
the figures show by default (chapter 11), and ``question_ids`` encodes a question for the two
figures that run a model.

Every word a widget shows comes from one table of strings per language, ``strings/<lang>.json``
(a section per widget plus ``common``; templates name their numbers, ``"layer {n}"``). The
widget receives its sections through the synced trait ``_strings`` and picks the language in
the browser: ``lang="auto"`` (the default) follows the page's ``<html lang>`` (``zh...`` gives
Chinese, anything else English); ``lang="en"`` or ``"zh"`` fixes it, e.g. in Jupyter.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
from collections.abc import Sequence
from importlib import resources

import anywidget
import traitlets as t

from .registry import WIDGETS

LANGUAGES = ("en", "zh")
LANG_CHOICES = ("auto", *LANGUAGES)
PLACEHOLDER = re.compile(r"\{(\w+)\}")  # the same rule as fill() in common.js
_default = {"lang": "auto"}
BUNDLE = "bundle"  # the bundles' folder here (scripts/widgets_bundle.py): build products, never tracked

#: The lesson's example (chapter 11): question and answer tokens, as ``decode`` prints them.
LESSON_QUESTION = ("BOS", "NEGATIVE", "3", "0", "subtract", "NEGATIVE", "3", "4", "EOS")
LESSON_ANSWER = ("BOS", "POSITIVE", "0", "4", "EOS")
#: What the decoder is fed of it, in training and in the figures of chapter 11: the shifted answer,
#: never EOS (it has no next token to predict).
LESSON_DECODER_INPUT = LESSON_ANSWER[:-1]
LESSON_QUESTION_TEXT = "BOS NEGATIVE 30 subtract NEGATIVE 34 EOS"


def asset_text(name: str) -> str:
    """The text of a JS or CSS file shipped next to this module."""
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


class BundleMissing(RuntimeError):
    """A widget's bundle is not built (a checkout before ``make widgets``)."""


def bundle_text(name: str) -> str:
    """The module of widget file ``name`` (a value of ``registry.WIDGETS``): ``bundle/<name>.js``, its
    ES module with everything it imports, made by ``make widgets`` (scripts/widgets_bundle.py)."""
    try:
        return asset_text(f"{BUNDLE}/{name}.js")
    except FileNotFoundError:
        raise BundleMissing(
            f"the widget bundle encdec/widgets/{BUNDLE}/{name}.js is missing: run `make widgets` "
            "in the checkout (esbuild bundles each widget's ES modules)"
        ) from None


def registered_name(cls: type) -> str:
    """The registered file name of a widget class (or of the registered class it extends)."""
    for klass in cls.__mro__:
        if WIDGETS.get(klass.__name__) and klass.__module__ == f"{__package__}.{WIDGETS[klass.__name__]}":
            return WIDGETS[klass.__name__]
    raise TypeError(f"{cls.__name__} is not in encdec/widgets/registry.py's WIDGETS")


# The built book's modules: each bundle once per site, a classic script under SITE_ESM (written by
# scripts/book_assets.py; a classic script loads from file:// too, where a module would not) that adds
# its text to the page's SITE_ESM_GLOBAL, and each figure's ``_esm`` its widget's name after SITE_ESM_NAME,
# which the page's renderer (static_page.js) looks up in its map of the registered widgets (renderer_js)
# and loads once per page. A chapter's four model-running figures carry no module text in their state.
# The book build sets SITE_ESM_ENV (mk/book.mk: to SITE_ESM; set at all, it names the widget).
SITE_ESM_ENV = "ENCDEC_SITE_ESM"
SITE_ESM = "_widget_assets/esm"
SITE_ESM_NAME = "encdec-esm:"  # then the widget's name, a value of registry.WIDGETS
SITE_ESM_GLOBAL = "ENCDEC_ESM"  # the page's global each module script adds its text to, by its path


def site_esm_path(name: str) -> str:
    """Where the built site serves widget ``name``'s module script, from the site's root."""
    return f"{SITE_ESM}/{name}.js"


def site_esm_script(name: str) -> str:
    """The classic script of widget ``name``'s module: it adds the bundle's text to SITE_ESM_GLOBAL."""
    key = json.dumps(site_esm_path(name))
    return f"(self.{SITE_ESM_GLOBAL} = self.{SITE_ESM_GLOBAL} || {{}})[{key}] = {json.dumps(bundle_text(name))};\n"


def softmax(row: Sequence[float]) -> list[float]:
    """Numerically stable softmax of one row."""
    top = max(row)
    exps = [math.exp(x - top) for x in row]
    total = sum(exps)
    return [e / total for e in exps]


def masked_softmax_row(scores: Sequence[float], forbidden: Sequence[bool]) -> list[float]:
    """Mask, then softmax: forbidden sources leave the denominator and get weight 0.

    Like ``encdec.attention.masked_softmax`` (which fills with the most negative float), a row
    with every source forbidden spreads evenly over all of them.
    """
    if len(scores) != len(forbidden):
        raise ValueError(f"{len(scores)} scores but {len(forbidden)} mask entries")
    allowed = [i for i, f in enumerate(forbidden) if not f]
    if not allowed:
        return [1.0 / len(scores)] * len(scores)
    sub = softmax([scores[i] for i in allowed])
    out = [0.0] * len(scores)
    for i, w in zip(allowed, sub):
        out[i] = w
    return out


def question_ids(question_text: str):
    """The question as the model reads it, a (1, Kq) tensor (torch is imported only here)."""
    import torch

    from ..data import encode_question

    return torch.tensor([encode_question(question_text)], dtype=torch.long)  # (1, Kq)


@functools.cache
def watch_greedy(model, ques, max_new_tokens: int, prefix, use_cache: bool = True) -> tuple[list[int], list[dict]]:
    """``greedy_decode`` on one question (``ques`` (1, Kq), ``prefix`` (1, P)), watched through hooks:
    the figures that replay a decoding (the stepper, ask the model) read the package's own loop,
    never one of their own.

    Returns the ids ``greedy_decode`` returns (its row 0: the prefix and the new tokens) and,
    per decoder call (the prefill, then each decode step): ``fed``, the answer positions it was
    given; ``self_rows`` and ``cross_rows``, every layer's self- and cross-attention cache rows after
    it (None without the cache); ``cross``, every layer's cross-attention weights of the last
    position over the question, [L][H][Kq]; ``logits``, the last position's logits (V,);
    ``work``, the multiply-adds of the call (the encoder's, at the prefill, and the decoder's with
    the readout): every ``nn.Linear`` row and every attention score and weighted value counted.
    """
    from torch import nn

    from ..attention import MultiHeadAttention
    from ..generate import greedy_decode

    calls: list[dict] = []
    work = {"encoder": 0, "decoder": 0}
    phase = ["decoder"]

    def count_linear(module, args, out):
        work[phase[0]] += args[0].numel() * module.out_features  # rows x in x out

    def count_attention(module, args, out):
        N, H, Lq, T = module.last_attention.shape  # scores Q K^T and weights x V: 2 N H Lq T Dh
        work[phase[0]] += 2 * N * Lq * T * module.emb_dim

    def set_phase(name):
        return lambda *_: phase.__setitem__(0, name)

    def after_decoder(module, args, kwargs, out):
        caches = kwargs.get("caches")
        calls.append(
            {
                "fed": args[0].shape[1],
                "self_rows": [len(c_self) for c_self, _ in caches] if caches else None,
                "cross_rows": [len(c_cross) for _, c_cross in caches] if caches else None,
                "cross": [layer.attention_cross.last_attention[0, :, -1].tolist() for layer in module.layers],
            }
        )

    def after_projection(module, args, out):
        calls[-1]["logits"] = out[0]  # (V,): the last position's, one row per question
        calls[-1]["work"] = dict(work)
        work.update(encoder=0, decoder=0)

    was_training = model.training
    model.eval()
    hooks = [
        model.decoder.register_forward_hook(after_decoder, with_kwargs=True),
        model.encoder.register_forward_pre_hook(set_phase("encoder")),
        model.encoder.register_forward_hook(set_phase("decoder")),
    ]
    for module in model.modules():
        if isinstance(module, nn.Linear):
            hooks.append(module.register_forward_hook(count_linear))
        elif isinstance(module, MultiHeadAttention):
            hooks.append(module.register_forward_hook(count_attention))
    # after the readout's own count (hooks run in the order registered): a call's work includes its readout
    hooks.append(model.proj_to_vocab.register_forward_hook(after_projection))
    try:
        ids = greedy_decode(model, ques, max_new_tokens, prefix=prefix, use_cache=use_cache)  # (1, P + n)
    finally:
        for hook in hooks:
            hook.remove()
        model.train(was_training)
    return ids[0].tolist(), calls


def string_table(lang: str) -> dict[str, dict[str, str]]:
    """The table of one language: {section: {key: template}}, read once."""
    if lang not in LANGUAGES:
        raise ValueError(f"no strings for language {lang!r}: expected one of {LANGUAGES}")
    return json.loads(asset_text(f"strings/{lang}.json"))


def _check_lang(lang: str) -> str:
    if lang not in LANG_CHOICES:
        raise ValueError(f"lang must be one of {LANG_CHOICES}, got {lang!r}")
    return lang


def set_language(lang: str) -> None:
    """The language of widgets made from now on: "auto" (follow the page), "en" or "zh"."""
    _default["lang"] = _check_lang(lang)


def get_language() -> str:
    return _default["lang"]


def fill(template: str, **values) -> str:
    """A template with its ``{name}`` placeholders replaced (as ``fill`` in common.js)."""
    return PLACEHOLDER.sub(lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), template)


def text(key: str, lang: str = "en", **values) -> str:
    """The text of ``"section.key"`` in ``lang`` ("auto" reads as English: Python has no page)."""
    section, name = key.split(".", 1)
    return fill(string_table("en" if lang == "auto" else lang)[section][name], **values)


# The built book's one copy of widgets.css per site (scripts/book_assets.py writes it with the widget
# assets): the book build names it in this variable (mk/book.mk), and each figure's ``_css`` is then
# that path, relative to the site's root, which the page's renderer (static_page.js) links once,
# instead of the whole stylesheet in every figure's saved state. Elsewhere (Jupyter) it is the text.
SITE_CSS_ENV = "ENCDEC_SITE_CSS"
SITE_CSS = "_widget_assets/widgets.css"


RENDERER_WORDS = "const FAILED = {};"  # where static_page.js takes its words (renderer_js)
RENDERER_MODULES = "const MODULES = {};"  # and its map of the widgets' module scripts


def renderer_js() -> str:
    """The static page's widget renderer as the built site carries it (``widgets.js``, written by
    scripts/book_assets.py): ``static_page.js`` with the one sentence it may say to a reader, that a
    figure could not be shown, from the string tables ("static_page.failed") in every language, and
    the map of the registered widgets to their module scripts (a figure's module is looked up there)."""
    code = asset_text("static_page.js")
    for mark in (RENDERER_WORDS, RENDERER_MODULES):
        if mark not in code:
            raise ValueError(f"static_page.js has no {mark!r} to fill")
    words = {lang: text("static_page.failed", lang) for lang in LANGUAGES}
    modules = {name: site_esm_path(name) for name in sorted(set(WIDGETS.values()))}
    code = code.replace(RENDERER_MODULES, f"const MODULES = {json.dumps(modules)};", 1)
    return code.replace(RENDERER_WORDS, f"const FAILED = {json.dumps(words, ensure_ascii=False)};", 1)


class BookWidget(anywidget.AnyWidget):
    """Shared CSS and strings for every figure; subclasses set ``_esm`` and ``_section``."""

    _css = asset_text("widgets.css")
    _section = ""  # the widget's section of the string tables
    lang = t.Unicode().tag(sync=True)
    _strings = t.Dict().tag(sync=True)  # {lang: {section: {key: template}}}, the languages lang may show

    @property
    def _esm(self) -> str:  # read once, by anywidget's __init__, which makes it a synced trait
        """The widget's module: its bundle, or in the built book its name for the site's copy (SITE_ESM)."""
        name = registered_name(type(self))
        return SITE_ESM_NAME + name if os.environ.get(SITE_ESM_ENV) else bundle_text(name)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        if os.environ.get(SITE_CSS_ENV):  # the built book: the site's one stylesheet (SITE_CSS)
            self._css = os.environ[SITE_CSS_ENV]

    @t.default("lang")
    def _default_lang(self):
        return _default["lang"]

    @t.validate("lang")
    def _valid_lang(self, proposal):
        try:
            return _check_lang(proposal["value"])
        except ValueError as err:
            raise t.TraitError(str(err)) from None

    @t.default("_strings")
    def _default_strings(self):
        return self._tables(self.lang)

    @t.observe("lang")
    def _lang_changed(self, change):
        self._strings = self._tables(change["new"])

    def _tables(self, lang: str) -> dict:
        langs = LANGUAGES if lang == "auto" else (lang,)
        sections = ("common", self._section) if self._section else ("common",)
        return {code: {s: string_table(code)[s] for s in sections} for code in langs}

    def text(self, key: str, **values) -> str:
        """A string of this widget's table in its language (English for "auto")."""
        return text(key, self.lang, **values)
