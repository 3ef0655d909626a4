"""The grading edition of torch's ready-made Transformer layers: gone from a graded run.

torch's post-norm ``nn.TransformerDecoderLayer`` *is* the wiring the decoder_block exercise asks
for: a student who copies the given block's weights into one (reached by any name:
``getattr(torch.nn, "TransformerDecoder" + "Layer")``) would score full marks, and no check on
values can tell the two apart. So a graded run may not use torch's ready-made Transformer
layers (``REMOVED``), and the sandbox (``sandbox/``) mounts, read-only over the installed torch's
own files, an edition of the three files that define them, in which the named classes'
``__init__`` and ``forward`` and the function raise ``GradedRunUsesTorchLayer`` (defined in
the edited ``torch/nn/functional.py``) with a message that says why. Everything else in those
files is byte for byte the installed text; the rest of torch is untouched.

Made from the installed torch by an ``ast`` transformation: the ``ast`` finds each body, the
text keeps every other line, and the result must parse to the original tree with exactly those
bodies swapped (``EditionError`` otherwise, for instance after a torch upgrade that moved them).
The compiled files (``__pycache__/*.pyc``) of the installed files are covered too, by the
edition's own, compiled for the edition's text: the original bytecode is then neither loaded
(``importlib.reload`` included) nor readable.

What no file can remove stays: C++ operators such as ``F.scaled_dot_product_attention``
(``torch._C._nn``), ``torch._native_multi_head_attention`` and ``torch._transformer_encoder_layer_fwd``;
``autograder/README.md`` (threat model) says why that is acceptable. ``autograder/edition.py``
builds and caches this edition next to those of ``encdec`` (``build/grading-edition/_torch/``,
with a STAMP of its inputs).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import py_compile
import re
import sys
from pathlib import Path

ERROR = "GradedRunUsesTorchLayer"
_LAYERS = (
    "Transformer",
    "TransformerEncoder",
    "TransformerEncoderLayer",
    "TransformerDecoder",
    "TransformerDecoderLayer",
)
# file of the torch package -> {definition in it (qualified name): the public name a message gives}
REMOVED: dict[str, dict[str, str]] = {
    "nn/modules/transformer.py": {f"{c}.{m}": f"torch.nn.{c}" for c in _LAYERS for m in ("__init__", "forward")},
    "nn/modules/activation.py": {
        f"MultiheadAttention.{m}": "torch.nn.MultiheadAttention" for m in ("__init__", "forward")
    },
    "nn/functional.py": {"multi_head_attention_forward": "torch.nn.functional.multi_head_attention_forward"},
}
DEFINES_ERROR = "nn/functional.py"  # the other files reach the error as F.<ERROR> (they import F)

ERROR_CLASS = f'''

class {ERROR}(RuntimeError):
    """Grading edition (autograder/torch_edition.py): torch's ready-made Transformer layers are removed."""

    def __init__(self, name: str):
        super().__init__(
            f"{{name}} is not available in a graded run: torch's ready-made Transformer layers "
            "(nn.Transformer, its encoder and decoder layers, nn.MultiheadAttention) compute what the "
            "exercises ask you to write, so the grader removes them; build it from the given modules "
            "(attention, layer norms, the MLP) instead."
        )
        self.name = name
'''


class EditionError(RuntimeError):
    """The torch edition cannot be built (the installed torch is not laid out as expected)."""


def torch_folder() -> Path:
    """The installed torch package's folder (found, not imported)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise EditionError("torch is not importable by the grader")
    return Path(list(spec.submodule_search_locations)[0]).resolve()


def _pycs(installed: Path) -> list[Path]:
    """The compiled copies of ``installed`` that exist (``__pycache__/<stem>.*.pyc``)."""
    cache = installed.parent / "__pycache__"
    if not cache.is_dir():
        return []
    return sorted(p for p in cache.glob(f"{installed.stem}.*.pyc") if p.is_file())


def digest(torch_dir: Path | None = None) -> str:
    """sha256 of the inputs: the installed files and their compiled copies' names, this file, the Python."""
    torch_dir = torch_dir or torch_folder()
    h = hashlib.sha256()
    h.update(f"{torch_dir}\0".encode())
    for rel in sorted(REMOVED):
        data = (torch_dir / rel).read_bytes()
        h.update(f"{rel}\0{len(data)}\0".encode() + data)
        h.update(repr([p.name for p in _pycs(torch_dir / rel)]).encode())
    h.update(repr((list(sys.version_info[:2]), sys.implementation.cache_tag)).encode())
    h.update(Path(__file__).read_bytes())
    return h.hexdigest()


def _find(tree: ast.Module, qualname: str, rel: str) -> ast.FunctionDef:
    body, node = tree.body, None
    for part in qualname.split("."):
        found = [n for n in body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part]
        if len(found) != 1:
            raise EditionError(f"torch/{rel}: {'no' if not found else 'more than one'} definition of {qualname}")
        node = found[0]
        body = node.body
    if not isinstance(node, ast.FunctionDef):
        raise EditionError(f"torch/{rel}: {qualname} is not a function")
    return node


def _raise(name: str, rel: str) -> str:
    error = ERROR if rel == DEFINES_ERROR else f"F.{ERROR}"
    return f"raise {error}({name!r})"


def edit(text: str, rel: str) -> str:
    """The edition of one torch file: each of ``REMOVED[rel]``'s bodies (docstring included) is one
    ``raise`` (and blank lines); every other line is the installed text's, at its own number."""
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    spans = []
    for qualname, name in REMOVED[rel].items():
        fn = _find(tree, qualname, rel)
        first, last = fn.body[0], fn.body[-1]
        head = lines[first.lineno - 1][: first.col_offset]
        if head.strip() or fn.body[0].lineno <= fn.lineno:  # a body must start on a line of its own
            raise EditionError(f"torch/{rel}: the body of {qualname} does not start on a line of its own")
        # blank lines where the body was: every other line keeps its number (tracebacks, diffs)
        spans.append(
            (
                first.lineno - 1,
                last.end_lineno,
                [f"{head}{_raise(name, rel)}\n"] + ["\n"] * (last.end_lineno - first.lineno),
            )
        )
        fn.body = ast.parse(_raise(name, rel)).body  # the tree the text must parse to
    for start, end, stub in sorted(spans, reverse=True):
        lines[start:end] = stub
    out = "".join(lines)
    if rel == DEFINES_ERROR:
        out = out.rstrip("\n") + "\n" + ERROR_CLASS
        tree.body += ast.parse(ERROR_CLASS).body
    # at the end, so no line moves
    out = (
        out.rstrip("\n")
        + "\n\n# Grading edition, generated by autograder/torch_edition.py from the installed file:\n"
        + "".join(f"#   {q}: removed\n" for q in REMOVED[rel])
    )
    if ast.dump(ast.parse(out)) != ast.dump(tree):
        raise EditionError(f"torch/{rel}: the edited text does not parse to the intended tree")
    return out


def generate(dest: Path, torch_dir: Path | None = None) -> None:
    """Write the edited files into ``dest/torch/`` (the installed layout), each with a compiled
    copy under the name of every compiled copy the installed file has."""
    torch_dir = torch_dir or torch_folder()
    for rel in REMOVED:
        installed = torch_dir / rel
        out = dest / "torch" / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(edit(installed.read_text(), rel))
        for pyc in _pycs(installed):
            level = re.search(r"\.opt-(\d)\.pyc$", pyc.name)  # as python -O / -OO would compile it
            target = out.parent / "__pycache__" / pyc.name
            target.parent.mkdir(exist_ok=True)
            # stamped with the edition file's own mtime and size: it is valid for the text mounted
            # beside it, and the original bytecode under this name is covered
            py_compile.compile(
                str(out),
                cfile=str(target),
                dfile=str(installed),
                doraise=True,
                optimize=int(level.group(1)) if level else 0,
                invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP,
            )


def files(edition_dir: Path, torch_dir: Path | None = None) -> list[tuple[Path, Path]]:
    """(edition file, installed file it is mounted over) for every file of the edition in
    ``edition_dir`` (the folder that holds ``torch/``)."""
    torch_dir = torch_dir or torch_folder()
    pairs = []
    for rel in REMOVED:
        installed = torch_dir / rel
        pairs.append((edition_dir / "torch" / rel, installed))
        pairs += [
            (edition_dir / "torch" / Path(rel).parent / "__pycache__" / pyc.name, pyc) for pyc in _pycs(installed)
        ]
    missing = [str(e) for e, _ in pairs if not e.is_file()]
    if missing:
        raise EditionError(
            f"the torch edition in {edition_dir} lacks {', '.join(missing)}: rebuild it with "
            "`python -m autograder.edition`"
        )
    return pairs
