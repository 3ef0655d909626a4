"""The chapters' experiments: short training runs whose small JSON records ship beside the checkpoints.

``norms`` (chapter 12): post-norm against pre-norm, each with a step warm-up, without one, and
without one but clipped (per-layer gradient norms per step); ``attention_learns`` (chapter 12): one
question's cross-attention maps at stored epochs of the ``modern`` recipe's run; ``positions``
(chapter 13): the modern recipe with sinusoids and with RoPE. ``make experiments`` reruns them; the
pages read the JSON (``encdec/checkpoints/experiments/``) and never train.
"""

import argparse
import json
from pathlib import Path

EXPERIMENTS = Path(__file__).resolve().parents[1] / "checkpoints" / "experiments"


def significant(x: float, digits: int = 4) -> float:
    """A float cut to ``digits`` significant digits: the records stay a few tens of kB."""
    return float(f"{x:.{digits}g}")


def write(path: str | Path, record: dict) -> dict:
    """``record`` as one line of compact JSON at ``path`` (its folder made): a record stays small."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, separators=(",", ":")) + "\n")
    return record


def arguments(doc: str, out: Path, argv: list[str] | None) -> argparse.Namespace:
    """An experiment's command line: where its record goes (``out`` by default, as the repository
    names it) and torch's CPU threads, which are set here."""
    import torch

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--out", default=str(out.relative_to(out.parents[3])), help="the record's JSON file")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    return args
