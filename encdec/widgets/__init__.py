"""The book's interactive figures: anywidget widgets whose JavaScript computes what they show.

They work live in JupyterLab (Python traits and the browser stay in sync: clicking a mask cell
updates ``MaskToggle.mask``) and on the static book with no kernel. The plain-Python numerics
live in ``numerics``; chapter 11 uses ``MaskToggle``, ``SoftmaxMaskCompare``,
``CrossAttentionExplorer``; chapter 12 ``ShiftTeacherForcing``, ``CrossEntropySlider``,
``AttentionMapViewer``; chapter 13 ``PrefillDecodeStepper``. Every chapter opens with a
``QuickCheck`` (questions made with ``choice`` and ``number``) that the page marks itself.
"""

from .attention_widgets import CrossAttentionExplorer, MaskToggle, SoftmaxMaskCompare
from .model_widgets import AttentionMapViewer, PrefillDecodeStepper, attention_maps, decode_trace
from .quick_check import QuickCheck, choice, number
from .training_widgets import CrossEntropySlider, ShiftTeacherForcing

__all__ = [
    "MaskToggle",
    "SoftmaxMaskCompare",
    "CrossAttentionExplorer",
    "ShiftTeacherForcing",
    "CrossEntropySlider",
    "PrefillDecodeStepper",
    "AttentionMapViewer",
    "QuickCheck",
    "choice",
    "number",
    "attention_maps",
    "decode_trace",
]
