"""Integrity flags: submissions whose code reaches into the grader's machinery, marked for review.

A flag never changes a score. It marks the notebook for manual review in nbgrader's gradebook, so
the formgrader lists it as "needs manual grade", and says why in one line:

- ``scan_source`` reads one code cell with ``ast`` (IPython magics and ``!`` lines are turned into
  Python first, as IPython does) and returns the reasons it matches in ``RULES``: one table of
  (pattern, reason) rows over the *facts* a cell states, each a ``kind:value`` string:

  ``name:``   a name or dotted attribute chain, imports and simple aliases resolved
              (``import torch.nn.functional as F; F.softmax`` -> ``name:torch.nn.functional.softmax``)
  ``attr:``   an attribute or imported name, whatever object it is taken from (``attr:f_back``)
  ``import:`` a module imported, statically or with ``__import__``/``importlib``
  ``assign:`` an assignment target (``assign:numpy.allclose``), ``setattr`` included
  ``str:``    a string constant (docstrings excepted)
  ``magic:`` / ``shell:``  an IPython magic's name, a shell command's text

  Honest solutions in any style must match nothing: the rules name what no exercise needs (stack
  frames, hooks, the check library, the grading files, interpreter internals, environment probes,
  file access, torch's ready-made Transformer layers), never a tensor operation.
- ``scan_notebook`` scans every code cell except the autograder test cells (the grader restores
  their source from the gradebook), carrying the imports of one cell into the next.
- ``FlagIntegrity`` runs in ``Autograde.autograde_preprocessors`` right after nbgrader's
  ``SaveAutoGrades``: on a flagged notebook it sets ``Grade.needs_manual_grade`` on every
  autograded test cell (an attack anywhere can forge the result of any check, even an earlier
  one, since the verdict is judged after the whole notebook has run) and writes the reasons into
  ``Comment.auto_comment`` of the flagged solution cell (of the first solution cell for any other
  cell), prefixed ``Integrity flag: ``. ``auto_score`` is left alone. The next autograde run
  rewrites both fields, so a resubmission is judged afresh.
- ``HideIntegrityFlags`` (optional, in ``GenerateFeedback.preprocessors`` after ``GetGrades``)
  keeps the automatic flag out of the student's feedback until an instructor has reviewed it.
- ``python -m autograder.integrity report [--db-url URL] [--csv PATH]`` lists every flagged
  submission; ``python -m autograder.integrity scan NOTEBOOK...`` scans notebooks offline.
"""

from __future__ import annotations

import argparse
import ast
import csv
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from nbformat.notebooknode import NotebookNode
from nbgrader import utils
from nbgrader.api import Comment, Gradebook
from nbgrader.preprocessors import NbGraderPreprocessor

ROOT = Path(__file__).resolve().parents[1]
PREFIX = "Integrity flag: "  # starts Comment.auto_comment of a flagged notebook; the report looks for it

# Reasons, one per rule family; "{}" becomes what the cell used.
FRAMES = "reads interpreter stack frames ({})"
HOOKS = "touches torch's hook machinery ({})"
GRADER = "reaches into the grader's code ({})"
GRADING_FILES = "names the grader's files ({})"
INTERPRETER = "tampers with the interpreter ({})"
PATCHES = "patches library functions ({})"
PROBES = "probes the grading environment ({})"
FILES = "reads or writes files ({})"
READY_MADE = "uses torch's ready-made layers ({})"

# (pattern, reason): the pattern must match a whole fact (re.fullmatch).
RULES: list[tuple[str, str]] = [
    (r"name:sys\.(_getframe|_current_frames)", FRAMES),
    (r"attr:_getframe", FRAMES),
    (r"name:inspect\.(currentframe|stack|getouterframes|getinnerframes|trace|getframeinfo)", FRAMES),
    (r"attr:(f_back|f_locals|f_globals|f_builtins|f_code|tb_frame|tb_next|gi_frame|cr_frame|ag_frame)", FRAMES),
    (r"attr:_(forward|backward)\w*_hooks\w*", HOOKS),  # _forward_hooks, _forward_pre_hooks, _backward_hooks, ...
    (r"attr:_global_\w+", HOOKS),  # torch.nn.modules.module._global_forward_hooks, ...
    (r"attr:register_\w*hook", HOOKS),  # register_forward_(pre_)hook, register_module_forward_hook, ...
    (r"(name|import):torch\.nn\.modules\.module(\..*)?", HOOKS),
    (r"(name|import):torch\.utils\.hooks(\..*)?", HOOKS),
    (r"(name|assign):torch\.nn\.(modules\.module\.)?Module\.(__call__|_call_impl|_wrapped_call_impl)", HOOKS),
    (r"attr:_(wrapped_)?call_impl", HOOKS),
    (r"call:forward", HOOKS),  # `layer.forward(x)` runs a module around its hooks (super().forward excepted)
    (r"(name|import):encdec\.grading(\..*)?", GRADER),  # the exact `from encdec.grading import checks` and a
    (r"import:(autograder|nbgrader)(\..*)?", GRADER),  # plain `checks.run(...)` call state no fact
    (r"str:.*(\.grading|grading-in|reference/|\.npz|seed\.json|gradebook|autograded|submitted).*", GRADING_FILES),
    (r"name:gc\.(get_objects|get_referrers|get_referents)", INTERPRETER),
    (r"name:sys\.modules(\..*)?", INTERPRETER),
    (r"(name|import):importlib(\..*)?", INTERPRETER),
    (r"name:(builtins\.)?__import__", INTERPRETER),
    (r"(name|assign):(builtins\.)?__builtins__(\..*)?", INTERPRETER),
    (r"name:(builtins\.)?(exec|eval|compile)", INTERPRETER),
    (r"attr:(settrace|setprofile|__code__|__globals__|__closure__|__builtins__|__subclasses__)", INTERPRETER),
    (r"name:sys\.monitoring(\..*)?", INTERPRETER),
    (r"(name|import):ctypes(\..*)?", INTERPRETER),
    (r"assign:(?!torch\.backends\.)(torch|numpy|builtins)(\..*)?", PATCHES),  # cudnn flags are settings
    (r"name:os\.(environ|environb|getenv|getenvb|putenv|unsetenv|uname)(\..*)?", PROBES),
    (r"attr:(getuid|geteuid|getgid|getegid|getpid|getppid|getlogin|gethostname)", PROBES),
    (r"name:(socket\..+|platform\.(node|uname)|getpass\.getuser)", PROBES),
    (r"import:socket(\..*)?", PROBES),
    (r"name:os\.(getcwd|getcwdb|listdir|scandir|walk|fwalk)", PROBES),
    (r"name:os\.path\.(exists|lexists|isfile|isdir)", PROBES),
    (r"attr:(cwd|iterdir|glob|rglob)", PROBES),  # Path.cwd(), Path(...).iterdir(), ...
    (r"(name|import):glob(\..*)?", PROBES),
    (r"str:.*/proc(/.*|\s.*)?", PROBES),
    (r"magic:(env|set_env|pwd|ls|cd|sx|system|bookmark)", PROBES),
    (r"shell:\s*(env|printenv|hostname|whoami|id|pwd|ls|find|cat|uname|ps)\b.*", PROBES),
    (r"name:(builtins\.|io\.|os\.|codecs\.)?open|name:os\.fdopen", FILES),
    (r"attr:(read_text|read_bytes|write_text|write_bytes)", FILES),
    (r"name:(numpy|torch)\.(load|save|savez|savez_compressed|fromfile|loadtxt|genfromtxt|memmap)", FILES),
    (r"name:torch\.nn(\.modules(\.\w+)?)?\.(Transformer|TransformerEncoder|TransformerEncoderLayer"
     r"|TransformerDecoder|TransformerDecoderLayer|MultiheadAttention)", READY_MADE),
    (r"attr:(TransformerEncoder|TransformerEncoderLayer|TransformerDecoder|TransformerDecoderLayer|MultiheadAttention"
     r"|generate_square_subsequent_mask)", READY_MADE),
    (r"name:torch\.nn\.functional\.(scaled_dot_product_attention|multi_head_attention_forward)", READY_MADE),
]
_RULES = [(re.compile(pattern, re.S), reason) for pattern, reason in RULES]

# Names a cell may use without importing them (the notebooks import them in their first cell).
DEFAULT_ALIASES = {"F": "torch.nn.functional", "nn": "torch.nn", "np": "numpy", "checks": "encdec.grading.checks"}
ALLOWED_IMPORT = ("encdec.grading", "checks")  # the given `from encdec.grading import checks`
PYTHON_MAGICS = {"time", "timeit", "prun", "capture"}  # magics whose text is Python code
SHELL_MAGICS = {"bash", "sh", "script"}


@dataclass(frozen=True)
class Flag:
    cell: str  # the nbgrader grade_id, or "cell <index>"
    reason: str


# --------------------------------------------------------------------------------------------
# Scanning


def scan_source(source: str) -> list[str]:
    """The deduplicated one-line reasons for flagging one code cell ([] when it does not parse)."""
    facts, _ = _cell_facts(source, DEFAULT_ALIASES)
    return _reasons(facts)


def scan_notebook(nb: NotebookNode) -> list[Flag]:
    """Flags of every code cell but the autograder test cells, in notebook order."""
    flags, aliases = [], dict(DEFAULT_ALIASES)
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or _is_test_cell(cell):
            continue
        facts, aliases = _cell_facts(cell.source, aliases)
        label = cell.metadata.get("nbgrader", {}).get("grade_id") or f"cell {index}"
        flags += [Flag(label, reason) for reason in _reasons(facts)]
    return flags


def _is_test_cell(cell: NotebookNode) -> bool:
    return cell.cell_type == "code" and utils.is_grade(cell) and not utils.is_solution(cell)


def _reasons(facts: list[str]) -> list[str]:
    """Group the facts by the reason of the rules they match; one line per reason."""
    names = [fact[len("name:"):] for fact in facts if fact.startswith("name:")]
    found: dict[str, list[str]] = {}
    for fact in facts:
        kind, value = fact.split(":", 1)
        for pattern, reason in _RULES:
            if pattern.fullmatch(fact):
                if kind == "call":
                    shown = f".{value}(...) called directly"
                elif kind in ("str", "shell"):
                    shown = repr(value if len(value) <= 40 else value[:37] + "...")
                elif kind == "attr":  # the whole chain where the cell has one: `m._forward_hooks`
                    shown = next((n for n in names if n.endswith("." + value)), value)
                else:
                    shown = value
                values = found.setdefault(reason, [])
                if shown not in values:
                    values.append(shown)
    lines = []
    for reason, values in found.items():
        # `sys.modules` says all that `sys` and `modules` say
        values = [v for v in values if not any(w.endswith("." + v) or w.startswith(v + ".") for w in values)]
        lines.append(reason.format(", ".join(values[:4] + (["..."] if len(values) > 4 else []))))
    return lines


def _cell_facts(source: str, aliases: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The facts a cell states, and the aliases in force after it."""
    tree = _parse(source)
    if tree is None:
        return [], aliases
    aliases = _bind(tree, aliases)
    return _facts(tree, aliases), aliases


def _parse(source: str) -> ast.Module | None:
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        source = TransformerManager().transform_cell(source)  # %magic, !cmd -> get_ipython() calls
    except Exception:  # noqa: BLE001 - without IPython, drop the magic lines
        source = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
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
    if func in ("__import__", "builtins.__import__", "importlib.import_module", "importlib.__import__"):
        if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
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
            if isinstance(value, (ast.Attribute, ast.Call)) or (isinstance(value, ast.Name) and value.id in out):
                if (target := _dotted(value, out)) is not None:
                    out[node.targets[0].id] = target
                    aliased.add(id(node.targets[0]))
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and id(node) not in aliased:
            out.pop(node.id, None)
        elif isinstance(node, ast.arg):
            out.pop(node.arg, None)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.pop(node.name, None)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            out.pop(node.name, None)
    return out


def _facts(tree: ast.AST, aliases: dict[str, str]) -> list[str]:
    """Every fact of the tree, in source order (`sys._getframe` before `sys._getframe(1).f_back`)."""
    unseen = set()  # docstrings and the plain `checks.run(...)` of the given code
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            unseen.add(id(body[0].value))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "run"
                and isinstance(node.func.value, ast.Name)
                and aliases.get(node.func.value.id) == "encdec.grading.checks"):
            unseen.update({id(node.func), id(node.func.value)})
    found = []
    for node in ast.walk(tree):
        if id(node) not in unseen:
            where = tuple(getattr(node, k, None) or 0 for k in ("lineno", "col_offset", "end_lineno", "end_col_offset"))
            found += [(where, fact) for fact in _node_facts(node, aliases)]
    return [fact for _, fact in sorted(found, key=lambda item: item[0])]


def _node_facts(node: ast.AST, aliases: dict[str, str]):
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
    elif isinstance(node, ast.Call):
        yield from _call_facts(node, aliases)


def _import_facts(module: str):
    parts = module.split(".")
    yield f"import:{module}"
    yield from (f"name:{'.'.join(parts[:i])}" for i in range(1, len(parts) + 1))


def _call_facts(node: ast.Call, aliases: dict[str, str]):
    """getattr/setattr with a constant name, dynamic imports, IPython magics and shell commands,
    and `.forward(...)` called on anything but `super()`."""
    if (isinstance(node.func, ast.Attribute) and node.func.attr == "forward"
            and not (isinstance(node.func.value, ast.Call) and _dotted(node.func.value.func, aliases) == "super")):
        yield "call:forward"
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
    elif (isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Call)
          and _dotted(node.func.value.func, aliases) == "get_ipython"):
        method = node.func.attr
        if method in ("run_line_magic", "run_cell_magic") and const and const[0] is not None:
            yield f"magic:{const[0]}"
            body = const[-1] if len(const) >= 2 else None
            if body is not None and const[0] in PYTHON_MAGICS:
                yield from _cell_facts(body, aliases)[0]
            elif body is not None and const[0] in SHELL_MAGICS:
                yield f"shell:{body}"
        elif method in ("system", "getoutput") and const and const[0] is not None:
            yield f"shell:{const[0]}"


# --------------------------------------------------------------------------------------------
# nbgrader


class FlagIntegrity(NbGraderPreprocessor):
    """After SaveAutoGrades: a notebook whose code reaches into the grader awaits manual review."""

    def preprocess(self, nb: NotebookNode, resources: dict):
        flags = scan_notebook(nb)
        if not flags:
            return nb, resources
        ids = resources["nbgrader"]
        student, assignment, notebook = ids["student"], ids["assignment"], ids["notebook"]
        tests = [c.metadata.nbgrader["grade_id"] for c in nb.cells if _is_test_cell(c)]
        solutions = [c.metadata.nbgrader["grade_id"] for c in nb.cells if utils.is_solution(c)]
        with Gradebook(ids["db_url"]) as gb:
            if not solutions:  # all deleted: their comments are still in the gradebook
                solutions = sorted(c.name for c in gb.find_notebook(notebook, assignment).solution_cells)
            for grade_id in tests:
                gb.find_grade(grade_id, notebook, assignment, student).needs_manual_grade = True
            notes: dict[str, list[str]] = {}
            for flag in flags:
                if flag.cell in solutions:
                    notes.setdefault(flag.cell, []).append(flag.reason)
                elif solutions:
                    notes.setdefault(solutions[0], []).append(f"{flag.cell}: {flag.reason}")
            for grade_id, reasons in notes.items():
                comment = gb.find_comment(grade_id, notebook, assignment, student)
                comment.auto_comment = "\n".join([PREFIX + "; ".join(reasons), *_other_lines(comment.auto_comment)])
            gb.db.commit()
        self.log.warning("integrity flag: %s/%s/%s: %s", student, assignment, notebook,
                         "; ".join(f"{f.cell}: {f.reason}" for f in flags))
        return nb, resources


class HideIntegrityFlags(NbGraderPreprocessor):
    """For feedback, after GetGrades: the automatic flag is for the instructor, not the student."""

    def preprocess_cell(self, cell: NotebookNode, resources: dict, index: int):
        meta = cell.metadata.get("nbgrader", {})
        if isinstance(meta.get("comment"), str) and meta["comment"].startswith(PREFIX):
            meta["comment"] = "\n".join(_other_lines(meta["comment"])) or None
        return cell, resources


def _other_lines(comment: str | None) -> list[str]:
    return [line for line in (comment or "").splitlines() if not line.startswith(PREFIX)]


# --------------------------------------------------------------------------------------------
# Report

FIELDS = ["assignment", "student", "notebook", "reasons", "needs_manual_grade"]


def flagged_submissions(db_url: str) -> list[dict]:
    """One row per flagged submitted notebook: assignment, student, notebook, reasons, and whether
    it still needs manual grading (False once an instructor has scored every flagged cell)."""
    rows: dict[tuple[str, str, str], dict] = {}
    with Gradebook(db_url) as gb:
        for comment in gb.db.query(Comment).filter(Comment.auto_comment.like(PREFIX + "%")):
            lines = [line[len(PREFIX):] for line in comment.auto_comment.splitlines() if line.startswith(PREFIX)]
            if not lines:
                continue  # LIKE ignores case
            sub = comment.notebook
            key = (sub.assignment.name, sub.student.id, sub.name)
            row = rows.setdefault(key, dict(zip(FIELDS, key), reasons=[],
                                            needs_manual_grade=bool(sub.needs_manual_grade)))
            row["reasons"] += lines
    for row in rows.values():
        row["reasons"] = "; ".join(row["reasons"])
    return [rows[key] for key in sorted(rows)]


def course_db_url() -> str:
    """The gradebook URL of the course configuration, read the way nbgrader reads it."""
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    return CourseDirectory(config=config).db_url


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.integrity", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    report = commands.add_parser("report", help="list every flagged submission in the gradebook")
    report.add_argument("--db-url", help="gradebook URL (default: the course's, from nbgrader_config.py)")
    report.add_argument("--csv", type=Path, help="also write the list to this CSV file")
    scan = commands.add_parser("scan", help="scan notebooks without a gradebook")
    scan.add_argument("notebooks", nargs="+", type=Path)
    args = parser.parse_args(argv)

    if args.command == "scan":
        import nbformat

        for path in args.notebooks:
            for flag in scan_notebook(nbformat.read(path, as_version=4)):
                print(f"{path}: {flag.cell}: {flag.reason}")
        return 0

    db_url = args.db_url or course_db_url()
    if db_url.startswith("sqlite:///") and not Path(db_url[len("sqlite:///"):]).is_file():
        print(f"no gradebook at {db_url}", file=sys.stderr)  # do not create an empty one
        return 1
    rows = flagged_submissions(db_url)
    for row in rows:
        review = "needs manual grade" if row["needs_manual_grade"] else "reviewed"
        print(f"{row['assignment']}\t{row['student']}\t{row['notebook']}\t{row['reasons']}\t({review})")
    print(f"{len(rows)} flagged submission(s) in {db_url}", file=sys.stderr)
    if args.csv:
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        with args.csv.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=FIELDS)
            writer.writeheader()
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
