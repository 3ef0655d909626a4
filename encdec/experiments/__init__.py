"""Chapter 12's experiments: short training runs whose small JSON records ship beside the checkpoints.

``norms``: post-norm against pre-norm, each with a step warm-up, without one, and without one but
clipped (per-layer gradient norms per step); ``attention_learns``: one question's cross-attention
maps at stored epochs of the ``modern`` recipe's run. ``make experiments`` reruns both; the page
reads the JSON (``encdec/checkpoints/experiments/``) and never trains.
"""

from pathlib import Path

EXPERIMENTS = Path(__file__).resolve().parents[1] / "checkpoints" / "experiments"


def significant(x: float, digits: int = 4) -> float:
    """A float cut to ``digits`` significant digits: the records stay a few tens of kB."""
    return float(f"{x:.{digits}g}")


def small_png(fig, colors: int = 16) -> bytes:
    """A matplotlib figure as a PNG of ``colors`` colours: a line or map figure's shades become a
    small palette, a fifth of the bytes, so chapter 12 stays within its page-weight budget."""
    import io

    import matplotlib.pyplot as plt
    from PIL import Image

    drawn, out = io.BytesIO(), io.BytesIO()
    fig.savefig(drawn, format="png")
    plt.close(fig)
    Image.open(drawn).convert("RGB").quantize(colors=colors).save(out, format="PNG", optimize=True)
    return out.getvalue()
