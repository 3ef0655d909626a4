"""Scanning: the facts a code cell states (read with `ast`, IPython magics and `!` lines turned
into Python first) and the reasons the rules give for them, cell by cell through a notebook."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from nbformat.notebooknode import NotebookNode
from nbgrader import utils

from encdec.grading import language

from .rules import ALLOWED_IMPORT, COMPILED_RULES, DEFAULT_ALIASES, KNOWN_MAGICS, PYTHON_MAGICS, SHELL_MAGICS

MAX_DEPTH = 4  # magics in magics, code in strings: deeper than this is not read (and says so)


@dataclass(frozen=True)
class Flag:
    """A record: the cell, the rule family's key, what the cell used; worded only when shown."""

    cell: str  # the nbgrader grade_id, or "cell <index>"
    key: str  # a rule family (rules.py); its words are the message `flag_<key>`
    found: str  # what the cell used, as code spans

    @property
    def reason(self) -> str:
        """The flag in words, in the current language (``encdec.grading.language``)."""
        return language.text(f"flag_{self.key}", found=self.found)


def scan_source(source: str) -> list[str]:
    """The deduplicated one-line reasons for flagging one code cell, in words (a cell it cannot
    read is flagged as not checked: the scan fails closed)."""
    facts, _ = _safe_facts(source, DEFAULT_ALIASES)
    return [Flag("", key, found).reason for key, found in _reasons(facts)]


def scan_notebook(nb: NotebookNode) -> list[Flag]:
    """Flags of every code cell but the autograder test cells, in notebook order."""
    flags, aliases = [], dict(DEFAULT_ALIASES)
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or is_test_cell(cell):
            continue
        facts, aliases = _safe_facts(cell.source, aliases)
        label = cell.metadata.get("nbgrader", {}).get("grade_id") or f"cell {index}"
        flags += [Flag(label, key, found) for key, found in _reasons(facts)]
    return flags


def is_test_cell(cell: NotebookNode) -> bool:
    return cell.cell_type == "code" and utils.is_grade(cell) and not utils.is_solution(cell)


def _reasons(facts: list[str]) -> list[tuple[str, str]]:
    """Group the facts by the rule family they match: (key, what was used) per family."""
    names = [fact[len("name:") :] for fact in facts if fact.startswith("name:")]
    found: dict[str, list[str]] = {}
    for fact in facts:
        kind, value = fact.split(":", 1)
        for pattern, reason in COMPILED_RULES:
            if pattern.fullmatch(fact):
                if kind in ("str", "shell"):
                    shown = repr(value if len(value) <= 40 else value[:37] + "...")
                elif kind == "attr":  # the whole chain where the cell has one: `m._forward_hooks`
                    shown = next((n for n in names if n.endswith("." + value)), value)
                else:
                    shown = value
                shown = shown.replace(LOCAL, "")  # the cell's own name, as the cell writes it
                values = found.setdefault(reason, [])
                if shown not in values:
                    values.append(shown)
    lines = []
    for reason, shown in found.items():
        # `sys.modules` says all that `sys` and `modules` say
        kept = [v for v in shown if not any(w.endswith("." + v) or w.startswith(v + ".") for w in shown)]
        # quoted as written: the page that shows a reason escapes it (autograder/feedback.py)
        lines.append((reason, ", ".join([f"`{v}`" for v in kept[:4]] + (["..."] if len(kept) > 4 else []))))
    return lines


def _safe_facts(source: str, aliases: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """``_cell_facts``, failing closed: a cell too deep or too large to read is not checked."""
    try:
        return _cell_facts(source, aliases)
    except (RecursionError, MemoryError):
        return ["unchecked:the cell is nested too deeply to read"], aliases


def _cell_facts(source: str, aliases: dict[str, str], depth: int = 0) -> tuple[list[str], dict[str, str]]:
    """The facts a cell states, and the aliases in force after it."""
    if depth > MAX_DEPTH:
        return ["unchecked:code nested in magics or strings too deeply to read"], aliases
    tree = _parse(source)
    if tree is None:
        return ["unchecked:the cell does not parse as Python"], aliases
    aliases = _bind(tree, aliases)
    return _facts(tree, aliases, depth), aliases


def _parse(source: str) -> ast.Module | None:
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        source = TransformerManager().transform_cell(source)  # %magic, !cmd -> get_ipython() calls
    except Exception:
        source = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


def _dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """`a.b.c` with its root resolved through the aliases; None when the chain starts elsewhere."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        root = aliases.get(node.id, node.id)
    elif isinstance(node, ast.Call) and (module := _dynamic_import(node, aliases)):
        root = module
    else:
        return None
    return ".".join([root, *reversed(parts)])


def _dynamic_import(node: ast.Call, aliases: dict[str, str]) -> str | None:
    """The module of `__import__("m")` or `importlib.import_module("m")`."""
    func = _dotted(node.func, aliases)
    if (
        func in ("__import__", "builtins.__import__", "importlib.import_module", "importlib.__import__")
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return node.args[0].value
    return None


def _bind(tree: ast.Module, aliases: dict[str, str]) -> dict[str, str]:
    """Aliases after the cell: imports, `x = a.b` and `x = __import__("m")` bind a name; any other
    binding forgets it."""
    out, aliased = dict(aliases), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                root = a.name.split(".")[0]
                out[a.asname or root] = a.name if a.asname else root
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            out.update({a.asname or a.name: f"{module}.{a.name}" for a in node.names if a.name != "*"})
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            if (isinstance(value, (ast.Attribute, ast.Call)) or (isinstance(value, ast.Name) and value.id in out)) and (
                target := _dotted(value, out)
            ) is not None:
                out[node.targets[0].id] = target
                aliased.add(id(node.targets[0]))
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and id(node) not in aliased:
            out[node.id] = LOCAL + node.id  # a name of the cell's own (`open = ...` is not the builtin)
        elif isinstance(node, ast.arg):
            out[node.arg] = LOCAL + node.arg
        elif (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            or isinstance(node, ast.ExceptHandler)
            and node.name
        ):
            out[node.name] = LOCAL + node.name
    return out


LOCAL = "<local>."  # the root of a name the cell binds itself: no rule names it


def _facts(tree: ast.AST, aliases: dict[str, str], depth: int = 0) -> list[str]:
    """Every fact of the tree, in source order (`sys._getframe` before `sys._getframe(1).f_back`)."""
    unseen = set()  # docstrings and the plain `checks.run(...)` of the given code
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            unseen.add(id(body[0].value))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "run"
            and isinstance(node.func.value, ast.Name)
            and aliases.get(node.func.value.id) == "encdec.grading.checks"
        ):
            unseen.update({id(node.func), id(node.func.value)})
    found = []
    for node in ast.walk(tree):
        if id(node) not in unseen:
            where = tuple(getattr(node, k, None) or 0 for k in ("lineno", "col_offset", "end_lineno", "end_col_offset"))
            found += [(where, fact) for fact in _node_facts(node, aliases, depth)]
    return [fact for _, fact in sorted(found, key=lambda item: item[0])]


def _node_facts(node: ast.AST, aliases: dict[str, str], depth: int = 0):
    if isinstance(node, ast.Name):
        if isinstance(node.ctx, ast.Store):
            yield f"assign:{node.id}"
        else:
            yield f"name:{aliases.get(node.id, node.id)}"
    elif isinstance(node, ast.Attribute):
        yield f"attr:{node.attr}"
        dotted = _dotted(node, aliases)
        if dotted is not None:
            yield f"name:{dotted}"
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            yield f"assign:{dotted or '?.' + node.attr}"
    elif isinstance(node, ast.Import):
        for a in node.names:
            yield from _import_facts(a.name)
    elif isinstance(node, ast.ImportFrom):
        module = "." * node.level + (node.module or "")
        if (module, [(a.name, a.asname) for a in node.names]) == (ALLOWED_IMPORT[0], [(ALLOWED_IMPORT[1], None)]):
            return
        yield f"import:{module}"
        for a in node.names:
            if a.name != "*":
                yield f"attr:{a.name}"
                yield from _import_facts(f"{module}.{a.name}")
    elif isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
        value = node.value if isinstance(node.value, str) else node.value.decode("latin-1")
        yield f"str:{value}"
        yield from _code_in_string(value, aliases, depth)
    elif isinstance(node, ast.Call):
        yield from _call_facts(node, aliases, depth)
    elif isinstance(node, ast.BinOp) and (joined := _joined(node)) is not None:
        yield f"str:{joined}"  # "_forward_" + "pre_hooks" says what "_forward_pre_hooks" says


def _joined(node: ast.AST, depth: int = 0) -> str | None:
    """The value of constant strings joined with `+` (None for anything else)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if depth < 32 and isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _joined(node.left, depth + 1), _joined(node.right, depth + 1)
        return None if left is None or right is None else left + right
    return None


def _code_in_string(value: str, aliases: dict[str, str], depth: int):
    """A string that reads as Python with a call or an attribute in it (code handed to `timeit`,
    `exec` or any runner) states what that code would state."""
    if len(value) > 100_000 or not any(c in value for c in ".("):
        return
    try:
        tree = ast.parse(value)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return
    if any(isinstance(n, (ast.Call, ast.Attribute)) for n in ast.walk(tree)):
        yield from _cell_facts(value, aliases, depth + 1)[0]


def _import_facts(module: str):
    parts = module.split(".")
    yield f"import:{module}"
    yield from (f"name:{'.'.join(parts[:i])}" for i in range(1, len(parts) + 1))


def _call_facts(node: ast.Call, aliases: dict[str, str], depth: int = 0):
    """getattr/setattr with a constant name, dynamic imports, IPython magics and shell commands
    (a magic the scan does not know is not checked)."""
    func = _dotted(node.func, aliases)
    const = [a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else None for a in node.args]
    if func in ("getattr", "hasattr", "delattr", "setattr") and len(node.args) >= 2:
        owner = _dotted(node.args[0], aliases)
        if const[1] is not None:
            yield f"attr:{const[1]}"
            if owner is not None:
                yield f"name:{owner}.{const[1]}"
        if func in ("setattr", "delattr"):
            yield f"assign:{owner or '?'}.{const[1] or '?'}"
    elif (module := _dynamic_import(node, aliases)) is not None:
        yield from _import_facts(module)
    elif (
        isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Call)
        and _dotted(node.func.value.func, aliases) == "get_ipython"
    ):
        method = node.func.attr
        if method in ("run_line_magic", "run_cell_magic") and const and const[0] is not None:
            yield f"magic:{const[0]}"
            body = const[-1] if len(const) >= 2 else None
            if const[0] not in KNOWN_MAGICS:
                yield f"unchecked:%{const[0]}"
            if body is not None and const[0] in PYTHON_MAGICS:
                yield from _cell_facts(body, aliases, depth + 1)[0]
            elif body is not None and const[0] in SHELL_MAGICS:
                yield f"shell:{body}"
        elif method in ("system", "getoutput") and const and const[0] is not None:
            yield f"shell:{const[0]}"
        elif method in ("run_line_magic", "run_cell_magic", "system", "getoutput", "ex", "ev", "run_cell"):
            yield f"unchecked:get_ipython().{method} with a name or command the scan cannot read"
