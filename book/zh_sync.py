"""Give each Chinese page the code of its English page: the code is shared, never copied by hand.

    python book/zh_sync.py            # rewrite the code cells of book/zh/*.md from book/*.md
    python book/zh_sync.py --check    # exit 1 (and say which page) when one lags behind

A Chinese page ``book/zh/<page>.md`` is written by its translator as prose around code-cell
blocks; this script puts into those blocks, in order, the English page's code cells, with the
page's display strings (quick-check questions, printed labels, plot titles, and the comments of the
cells a reader sees, keyed with their ``# ``) replaced by their Chinese from
``book/zh/strings/<page>.yml`` (``English: 中文`` pairs, each found in the English code verbatim). The notebook front matter (jupytext, kernelspec) is the English page's too. So
the two editions execute the same code, and ``tests/test_book_zh.py`` fails when they do not.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import yaml

BOOK = Path(__file__).resolve().parent
ZH = BOOK / "zh"
STRINGS = ZH / "strings"
# A code cell of a MyST notebook page: its opening fence line through the matching closing one.
CELL = re.compile(r"^(`{3,})\{code-cell\}[^\n]*\n.*?^\1[ \t]*$", re.M | re.S)
FRONT = re.compile(r"\A---\n.*?\n---\n", re.S)


class SyncError(ValueError):
    """A Chinese page that cannot take its English page's code: what to fix, in words."""


def code_cells(text: str) -> list[str]:
    return [m.group(0) for m in CELL.finditer(text)]


def display_strings(page: str) -> dict[str, str]:
    path = STRINGS / f"{page}.yml"
    if not path.exists():
        return {}
    table = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(table, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in table.items()):
        raise SyncError(f"{path.relative_to(BOOK.parent)}: expected a mapping of English strings to Chinese ones")
    return table


def translated_cells(page: str) -> list[str]:
    """The English page's code cells with this page's display strings in Chinese."""
    cells = code_cells((BOOK / f"{page}.md").read_text(encoding="utf-8"))
    table = display_strings(page)
    joined = "\n".join(cells)
    for en in table:
        if en not in joined:
            raise SyncError(f"book/zh/strings/{page}.yml: {en!r} is not in the code of book/{page}.md any more")
    out = []
    for source in cells:
        cell = source
        for en, zh in sorted(table.items(), key=lambda kv: -len(kv[0])):  # longest first: no partial overlap
            cell = cell.replace(en, zh)
        out.append(cell)
    return out


def synced(page: str) -> str:
    """The Chinese page with its English page's front matter and code cells."""
    zh_path = ZH / f"{page}.md"
    text = zh_path.read_text(encoding="utf-8")
    en_text = (BOOK / f"{page}.md").read_text(encoding="utf-8")
    expected = translated_cells(page)
    found = list(CELL.finditer(text))
    if len(found) != len(expected):
        raise SyncError(
            f"book/zh/{page}.md has {len(found)} code cells, book/{page}.md has {len(expected)}: "
            "keep one code-cell block per English cell, in the same order"
        )
    parts, last = [], 0
    for m, cell in zip(found, expected):
        parts += [text[last : m.start()], cell]
        last = m.end()
    parts.append(text[last:])
    text = "".join(parts)
    en_front, zh_front = FRONT.match(en_text), FRONT.match(text)
    if en_front:
        text = en_front.group(0) + (text[zh_front.end() :] if zh_front else text)
    return text


def pages() -> list[str]:
    return sorted(p.stem for p in ZH.glob("*.md") if (BOOK / p.name).exists())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report pages that lag behind")
    args = parser.parse_args(argv)
    stale = []
    for page in pages():
        try:
            new = synced(page)
        except SyncError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        path = ZH / f"{page}.md"
        if new != path.read_text(encoding="utf-8"):
            stale.append(page)
            if not args.check:
                path.write_text(new, encoding="utf-8")
    if stale:
        verb = "lag behind their English pages (run python book/zh_sync.py)" if args.check else "synced"
        print(f"{', '.join(f'book/zh/{p}.md' for p in stale)}: {verb}", file=sys.stderr if args.check else sys.stdout)
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
