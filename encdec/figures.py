"""The book's drawn figures as small PNGs (chapter 12): a figure's shades made a small palette.

A line or map figure that matplotlib writes as a full-colour PNG spends most of its bytes on the
antialiased edges of its lines; the same figure in 16 or 32 colours looks the same at a fifth to a
third of the bytes, which keeps a page with many figures within its weight budget
(tests/test_browser_reader.py).
"""

from __future__ import annotations

import io


class SmallFigure:
    """A matplotlib figure as a PNG of ``colors`` colours, which Jupyter shows (``_repr_png_``)."""

    def __init__(self, fig, colors: int = 16):
        import matplotlib.pyplot as plt
        from PIL import Image

        drawn, out = io.BytesIO(), io.BytesIO()
        fig.savefig(drawn, format="png", bbox_inches="tight")  # as Jupyter's inline figures
        plt.close(fig)  # shown once, as this PNG
        Image.open(drawn).convert("RGB").quantize(colors=colors).save(out, format="PNG", optimize=True)
        self.png = out.getvalue()

    def _repr_png_(self) -> bytes:
        return self.png
