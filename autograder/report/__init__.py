"""The class-wide misconception report, written after ``nbgrader autograde``.

    python -m autograder.report warmup decoder_block target_slicing kv_cache [--out DIR]

For each assignment and graded item: how many students passed, hit each named misconception,
got an unnamed observation ("Observed: ...") or failed another way, with one anonymised example
of the feedback each group read; plus every notebook that could not be read (which never stops
the report). Writes ``DIR/misconceptions.csv``, ``DIR/misconceptions_by_key.csv`` (per assignment,
how many students made each mistake, by key, the most common first) and a static
``DIR/misconceptions.html``; ``--lang zh`` words the keys' meanings in Chinese.
``collect`` reads the autograded notebooks, ``render`` writes the report.
"""

from __future__ import annotations

from pathlib import Path

from .collect import Assignment, collect
from .render import by_key, rows, write_csv, write_html, write_key_csv

__all__ = ["Assignment", "by_key", "collect", "rows", "write_report"]


def write_report(
    assignments: list[str],
    out: Path,
    source_dir: Path,
    autograded_dir: Path,
    submitted_dir: Path | None,
    lang: str = "en",
) -> tuple[list[Assignment], Path, Path]:
    """Collect every assignment and write the CSV and HTML report into ``out``; the meanings of the
    keys in ``lang``."""
    collected = [collect(a, source_dir, autograded_dir, submitted_dir) for a in assignments]
    report = rows(collected)
    out.mkdir(parents=True, exist_ok=True)
    csv_path, html_path = out / "misconceptions.csv", out / "misconceptions.html"
    write_csv(csv_path, report, lang)
    write_key_csv(out / "misconceptions_by_key.csv", by_key(collected), lang)
    write_html(html_path, report, collected, lang)
    return collected, csv_path, html_path
