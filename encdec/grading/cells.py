"""What a notebook's cells define and what its test cells hand to a check, read from their text
(nothing runs): a check whose function no cell defines any more can say so by name.

A test cell is one call, ``checks.run("<id>", <the student's object>)``; when the solution cell
that defines that object is deleted (or turned into markdown), the cell stops with a NameError
before the check starts, and the grader sees only that it did not run. Both the grader's verdict
(``autograder.judge.verify``) and ``nbgrader validate`` (``validation``) name the missing object
from here. Plain text only: no answer here.
"""

from __future__ import annotations

import ast
import builtins


def _parse(source: str) -> ast.Module | None:
    """The cell as Python (IPython's magics and shell escapes turned into calls first); None when it
    does not parse."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        source = TransformerManager().transform_cell(source)
    except Exception:
        pass
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


def _bound(body: list[ast.stmt], out: set[str]) -> None:
    """Names a block binds at the notebook's top level (into if/try/with/for, not into functions)."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update(a.asname or a.name.split(".")[0] for a in node.names)
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                out.add(sub.id)
        for field in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(node, field, None)
            if isinstance(inner, list):
                _bound(
                    [n for n in inner if isinstance(n, ast.stmt)]
                    + [s for h in inner if isinstance(h, ast.ExceptHandler) for s in h.body],
                    out,
                )


def defined_names(sources: list[str]) -> set[str] | None:
    """Every name the code cells ``sources`` bind at top level; None when a cell does not parse
    (then nothing can be said for sure)."""
    out: set[str] = set()
    for source in sources:
        tree = _parse(source)
        if tree is None:
            return None
        _bound(tree.body, out)
    return out


def checked_names(source: str) -> list[str]:
    """The names a test cell hands to ``checks.run`` as the student's object, in order."""
    tree = _parse(source)
    if tree is None:
        return []
    return [
        call.args[1].id
        for call in ast.walk(tree)
        if isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "run"
        and len(call.args) >= 2
        and isinstance(call.args[1], ast.Name)
    ]


def undefined(code_sources: list[str], test_source: str) -> str | None:
    """The first object the test cell hands to a check that no code cell of the notebook defines
    (its cell is missing), or None (all defined, or a cell does not parse)."""
    defined = defined_names(code_sources)
    if defined is None:
        return None
    for name in checked_names(test_source):
        if name not in defined and not hasattr(builtins, name):
            return name
    return None


def undefined_in(nb, cell) -> str | None:
    """``undefined`` for one test cell of a notebook (nbformat nodes)."""
    return undefined([c.source for c in nb.cells if c.cell_type == "code"], cell.source)
