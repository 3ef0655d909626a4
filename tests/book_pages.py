"""What the book's content tests share: the pages, and readers of their MyST markdown (fenced
blocks, headings, code cells) and of the package they include.

The tests read the markdown sources and build nothing; tests/test_book_content*.py, one topic each.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
PACKAGE = ROOT / "encdec"

NOTEBOOK_PAGES = ["ch11_cross_attention", "ch12_what_you_trained", "ch13_generation", "historical_notes"]
ALL_PAGES = ["index", *NOTEBOOK_PAGES, "instructor_guide"]

# Each chapter's exercise: (assignment, the package code it asks the student to write).
EXERCISE_TARGETS = {
    "ch11_cross_attention": ("decoder_block", {"DecoderBlock.forward", "get_subsequent_mask", "masked_softmax"}),
    "ch12_what_you_trained": ("target_slicing", {"Transformer.forward", "shift_targets", "sequence_loss"}),
    "ch13_generation": ("kv_cache", {"KVCache", "greedy_decode"}),
}

FENCE = re.compile(r"^(`{3,}|~{3,})(.*)$")


def read(page: str) -> str:
    return (BOOK / f"{page}.md").read_text(encoding="utf-8")


def blocks(text: str) -> list[tuple[str, str, list[str]]]:
    """Top-level fenced blocks as (fence info, body); nested fences stay inside their parent."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info = m.group(1), m.group(2).strip()
        body, i = [], i + 1
        while i < len(lines) and lines[i].rstrip() != fence:
            body.append(lines[i])
            i += 1
        out.append((info, "\n".join(body), body))
        i += 1
    return out


def nested_blocks(text: str) -> list[tuple[str, str, list[str]]]:
    """Every fenced block, top-level or inside another (a literalinclude folded in a dropdown)."""
    out = []
    for info, body, lines in blocks(text):
        out.append((info, body, lines))
        out += nested_blocks(body)
    return out


def headings(text: str) -> list[str]:
    """Markdown headings outside fenced blocks (a `#` comment in a code cell is not a heading)."""
    found, fence = [], None
    for line in text.splitlines():
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
        elif fence is not None and line.rstrip() == fence:
            fence = None
        elif fence is None and line.startswith("#"):
            found.append(line.lstrip("#").strip())
    return found


CELL_OPTION = re.compile(r"\A(?::\w[\w-]*:.*\n)+\n?")  # leading `:tags: [...]` lines of a MyST cell


def code_cells(text: str) -> list[str]:
    return [CELL_OPTION.sub("", body) for info, body, _ in blocks(text) if info.startswith("{code-cell}")]


def package_names() -> tuple[set[str], set[str]]:
    """Classes and top-level functions the package defines."""
    classes, functions = set(), set()
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                classes.add(node.name)
            elif isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                functions.add(node.name)
    return classes, functions


def find_pyobject(path: Path, dotted: str) -> bool:
    """True when ``dotted`` (``name`` or ``Class.method``) is defined in the module at ``path``."""
    nodes = ast.parse(path.read_text(encoding="utf-8")).body
    for part in dotted.split("."):
        match = [
            n for n in nodes if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == part
        ]
        if not match:
            return False
        nodes = match[0].body
    return True


def paragraphs(text: str) -> list[str]:
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", text)]
