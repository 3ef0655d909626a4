"""The no-answer test of issue 50: which graded answers a set of files holds.

An answer (``autograder.assessed.answers``: every exercise's targets and the package code that
answers a graded part under another name) is known by its *distinctive statements*: the simple
statements of its body in the package source, comments and whitespace dropped, that appear nowhere
in what students are given anyway (the package but for the answers' bodies, the released exercises,
the lessons' open code cells, which never rebuild an answer: tests/test_book_content_built.py).
A file holds an answer when two of them (or its only one) are in its text, read as a reader
gets it: HTML without its tags and entities (a highlighted listing is split into spans), JSON
decoded (a notebook, a search index), a wheel or zip member by member, a PDF's extracted text;
whitespace is dropped everywhere, so a re-wrapped line still matches.
"""

from __future__ import annotations

import ast
import functools
import html
import json
import re
import zipfile
from pathlib import Path

from autograder import assessed, edition

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "encdec"
SHORTEST = 16  # characters, whitespace dropped: shorter statements (`T = x.shape[1]`) say too little
TEXT = {
    ".py",
    ".md",
    ".txt",
    ".html",
    ".htm",
    ".js",
    ".json",
    ".ipynb",
    ".css",
    ".yml",
    ".yaml",
    ".svg",
    ".cfg",
    ".toml",
    ".map",
    ".po",
    "",
}
ARCHIVES = {".whl", ".zip"}
# what holds no text to search: images, fonts, the trained weights, the visible checks' arrays, the
# theme's compiled translations (.mo, beside their .po) and Sphinx's inventory of names (objects.inv)
BINARY = {
    ".png",
    ".jpg",
    ".jpeg",
    ".gif",
    ".ico",
    ".woff",
    ".woff2",
    ".ttf",
    ".otf",
    ".eot",
    ".pt",
    ".npz",
    ".mo",
    ".inv",
}


OPEN_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```", flags=re.M | re.S)


def squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _body_statements(name: str) -> list[frozenset[str]]:
    """Every simple statement of the answer's body (docstring left out, a condition for an if or
    while), each as written and as ``ast.unparse`` writes it (other quotes and parentheses),
    whitespace dropped."""
    module = name.split(".")[1]
    source = (PACKAGE / f"{module}.py").read_text(encoding="utf-8")
    fn = edition._find(ast.parse(source), name.split(".")[2:], name)
    body = fn.body[1:] if isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant) else fn.body
    found = []
    for top in body:
        for node in ast.walk(top):
            if isinstance(node, ast.stmt) and not hasattr(node, "body"):  # a leaf: no block of its own
                found.append(frozenset({squeeze(ast.get_source_segment(source, node)), squeeze(ast.unparse(node))}))
            elif isinstance(node, (ast.If, ast.While)):
                found.append(
                    frozenset(
                        {
                            "if" + squeeze(ast.get_source_segment(source, node.test)),
                            "if" + squeeze(ast.unparse(node.test)),
                        }
                    )
                )
    return found


@functools.lru_cache(maxsize=1)
def given() -> str:
    """What students are given whatever the term, found apart from the assessed edition's own
    making: the package's source with the answers' bodies cut out, the grading edition's twins
    and the released exercises."""
    answers = assessed.answers()
    parts = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        tree, lines, cut = ast.parse(source), source.splitlines(keepends=True), set()
        for name in answers:
            if path == PACKAGE / f"{name.split('.')[1]}.py":
                fn = edition._find(tree, name.split(".")[2:], name)
                cut |= set(range(fn.body[0].lineno - 1, fn.end_lineno))
        parts.append("".join(line for i, line in enumerate(lines) if i not in cut))
    parts += [twin.helper + "\n".join(twin.swap.values()) for twin in edition.TWINS]
    for nb in sorted((ROOT / "exercises").rglob("*.ipynb")):
        parts += ["".join(c["source"]) for c in json.loads(nb.read_text(encoding="utf-8"))["cells"]]
    for page in sorted((ROOT / "book").rglob("*.md")):  # the lessons' open code cells (never an answer:
        for cell in OPEN_CELL.findall(page.read_text(encoding="utf-8")):  # tests/test_book_content_built.py)
            if not re.search(r"^:tags:.*\b(hide|remove)-", cell, flags=re.M):
                parts.append(cell)
    return squeeze("\n".join(parts))


@functools.lru_cache(maxsize=1)
def distinctive() -> dict[str, tuple[frozenset[str], ...]]:
    """answer -> its distinctive statements (each: its ways of being written, whitespace dropped)."""
    out = {}
    for name in assessed.answers():
        kept = set(_body_statements(name))
        out[name] = tuple(
            sorted((s for s in kept if min(map(len, s)) >= SHORTEST and not any(v in given() for v in s)), key=sorted)
        )
    return out


def _readable(name: str, data: bytes) -> str:
    text = data.decode("utf-8", errors="replace")
    suffix = Path(name).suffix.lower()
    if suffix in {".html", ".htm", ".svg"}:
        text = html.unescape(re.sub(r"<[^>]*>", "", text))
    if suffix in {".json", ".ipynb"}:
        try:
            text = json.dumps(json.loads(text), ensure_ascii=False).encode().decode("unicode_escape", errors="replace")
        except (ValueError, UnicodeError):
            pass
    if suffix == ".js":  # a search index or a widget's data: JSON-escaped strings
        text = text.replace("\\n", "\n").replace('\\"', '"').replace("\\'", "'")
    return text


def _texts(path: Path, name: str = ""):
    """(name, text) of a file, of each member of an archive, or of a PDF's text."""
    name = name or str(path)
    suffix = path.suffix.lower()
    if suffix in ARCHIVES:
        with zipfile.ZipFile(path) as z:
            for member in z.namelist():
                if Path(member).suffix.lower() in TEXT:
                    yield f"{name}!{member}", _readable(member, z.read(member))
    elif suffix == ".pdf":  # its text as pypdf extracts it (the book's own PDF tool, tests/test_book_pdf.py)
        from pypdf import PdfReader

        yield name, "\n".join(page.extract_text() for page in PdfReader(path).pages)
    elif suffix in TEXT:
        yield name, _readable(path.name, path.read_bytes())


def held(text: str) -> list[str]:
    """The answers a text holds."""
    flat = squeeze(text)
    found = []
    for name, statements in distinctive().items():
        hits = sum(any(v in flat for v in s) for s in statements)
        if statements and hits >= min(2, len(statements)):
            found.append(name)
    return found


def scan(*roots: Path) -> dict[str, list[str]]:
    """file (or archive!member) -> the answers it holds, for every file under ``roots``."""
    found = {}
    for root in roots:
        for path in sorted([root] if root.is_file() else root.rglob("*")):
            if path.is_file():
                for name, text in _texts(path):
                    if hit := held(text):
                        found[name] = hit
    return found


def unread(*roots: Path) -> list[str]:
    """Files (and archive members) the search does not read and that are not known to hold no text:
    a test asserts there are none, so nothing escapes the search by its name."""
    left = []
    for root in roots:
        for path in sorted([root] if root.is_file() else root.rglob("*")):
            suffix = path.suffix.lower()
            if path.is_file() and suffix in ARCHIVES:
                with zipfile.ZipFile(path) as z:
                    left += [
                        f"{path}!{m}"
                        for m in z.namelist()
                        if not m.endswith("/") and Path(m).suffix.lower() not in TEXT | BINARY
                    ]
            elif path.is_file() and suffix not in TEXT | ARCHIVES | BINARY | {".pdf"}:
                left.append(str(path))
    return left
