"""The book's widgets, listed once: class name -> the name of its Python and JS files in this folder.

Everything else reads this list: the package's exports (``encdec.widgets``), the bundle step's entries
(``scripts/widgets_bundle.py``: ``<name>.js`` and what it imports, bundled into ``bundle/<name>.js``),
each widget's module (``BookWidget._esm``), the built book's module files and the static page's map of
them (``scripts/book_assets.py``, ``_base.renderer_js``), and the tests that go through every widget.
"""

WIDGETS: dict[str, str] = {
    "MaskToggle": "mask_toggle",  # chapter 11
    "SoftmaxMaskCompare": "softmax_compare",
    "CrossAttentionExplorer": "cross_attention",
    "AttentionMapViewer": "attention_maps",
    "ScoreExplorer": "score_explorer",
    "ShiftTeacherForcing": "shift_teacher_forcing",  # chapter 12
    "CrossEntropySlider": "cross_entropy",
    "PrefillDecodeStepper": "prefill_decode",  # chapter 13
    "AskTheModel": "ask_model",
    "BreakIt": "break_it",
    "QuickCheck": "quick_check",  # every chapter
}
