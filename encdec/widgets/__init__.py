"""The book's interactive figures: anywidget widgets whose JavaScript computes what they show.

They work live in JupyterLab (Python traits and the browser stay in sync: clicking a mask cell
updates ``MaskToggle.mask``) and on the static book with no kernel. Each widget is one Python
file and one JS file of the same name (``mask_toggle.py`` + ``mask_toggle.js``), listed once in
``registry.py`` (which is where the package takes its exports from); the Python file
holds the class and the Python twin of the numbers its JS computes. What they share (the base
class, the string tables, the lesson's example, ``softmax``) is in ``_base`` (twin of
``common.js``). Chapter 11 uses ``MaskToggle``, ``SoftmaxMaskCompare``,
``CrossAttentionExplorer``, ``AttentionMapViewer`` and ``ScoreExplorer`` (one query and one key of the
trained model in one head: the dot product, the scale, the row's softmax, computed in the page); chapter 12 ``ShiftTeacherForcing``,
``CrossEntropySlider``; chapter 13 ``PrefillDecodeStepper`` (made ``from_run``, it runs a shipped checkpoint in the page,
greedy or sampled), ``AskTheModel`` (the trained checkpoints run in the page,
``model_forward.js`` on weights from ``export_weights``) and ``BreakIt`` (one mistake of the lessons
switched into them, ``encdec.broken``). Every chapter opens with a
``QuickCheck`` (questions made with ``choice`` and ``number``) that the page marks itself.
``decode_trace`` and ``attention_maps_of`` record what a model does for the two figures that
show one.

Every word a widget shows comes from ``strings/en.json`` or ``strings/zh.json`` (one table per
language, read by ``_base``): on the book a widget follows the page's ``<html lang>``; in
Jupyter choose with ``MaskToggle(lang="zh")`` or, for every widget made afterwards,
``set_language("zh")``.
"""

from importlib import import_module

from ._base import get_language, set_language
from .ask_model import ask_trace, parse_question
from .attention_maps import attention_maps_of
from .break_it import break_answer, mistake_table
from .prefill_decode import decode_trace
from .quick_check import choice, number
from .registry import WIDGETS

for _class, _name in WIDGETS.items():  # every widget of the one list, by its class name
    globals()[_class] = getattr(import_module(f".{_name}", __name__), _class)
del _class, _name

__all__ = [
    *WIDGETS,
    "choice",
    "number",
    "attention_maps_of",
    "decode_trace",
    "ask_trace",
    "parse_question",
    "break_answer",
    "mistake_table",
    "set_language",
    "get_language",
]
