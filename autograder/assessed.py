"""The assessed edition of `encdec` (issue 50): the package as students get it in an assessed term.

The self-study release ships ``encdec/`` whole, reference answers included. In an assessed term
(``ASSESSED=1`` for ``make student-release`` and ``make book``) the student wheel and the book's
code listings are made from this edition instead: the whole package, comments and all, where the
body of every graded answer is replaced by the exercise release's stub, ``raise
NotImplementedError(...)`` naming the exercises that ask for it, in both languages (``stub``) (signature kept, docstring dropped:
it can state the answer, as the grading edition's does). A graded answer is

- every target of every assignment (``encdec.targets`` of ``solutions/<a>/<a>.ipynb``, read by
  ``edition.targets``), and
- ``ELSEWHERE``: package code that answers a graded part though no grading edition stubs it by
  name (the grading edition leaves its whole module out).

Given code that called a removed target is switched to the grading edition's twin (``edition.TWINS``:
attention through torch's fused kernel), so the given heads still attend. The edition is made by
cutting the answers' lines out of the source (``ast`` finds them), never by hand.

The term-start edition (``ASSESSED=1``) folds out every assignment's answers, the given
``DecoderBlock.forward`` among them (decoder_block's answer), which kv_cache's and target_slicing's
checks run; a later release of the term names the assignments still open (``ASSESSED=kv_cache,target_slicing``)
and keeps the answers of the closed ones.

    python -m autograder.assessed DEST [--assessed 1|a,b]   # DEST/encdec: the assessed edition
"""

from __future__ import annotations

import argparse
import ast
import shutil
import sys
from pathlib import Path

from encdec.grading.messages import MESSAGES

from . import edition

# Package code whose body answers a graded part of an assignment under another name or signature.
ELSEWHERE = {
    "encdec.sampling.sampling_probs": ("warmup",),  # part 4, the same function
    "encdec.padding.padding_mask": ("warmup",),  # part 3's padding mask, for a (N, K) `real`
    "encdec.sampling.sample_decode": ("kv_cache",),  # greedy_decode's cached loop with another pick
    "encdec.beam.beam_search": ("kv_cache",),  # part 4, the same function
    # DecoderBlock.forward with its norms moved before the sublayers: the answer but for that order
    "encdec.model.PreNormDecoderBlock.forward": ("decoder_block",),
    # scaled_dot_product_attention with the mask after the softmax: the answer but for one swap
    "encdec.broken.attention_mask_after_softmax": ("decoder_block", "warmup"),
}


def answers(solutions: Path = edition.SOLUTIONS) -> dict[str, tuple[str, ...]]:
    """Every graded answer in the package: dotted name -> the assignments that ask for it."""
    found: dict[str, tuple[str, ...]] = {}
    for a in edition.assignments(solutions):
        for name in edition.targets(a, solutions):
            found[name] = (*found.get(name, ()), a)
    for name, where in ELSEWHERE.items():
        found[name] = tuple(sorted({*found.get(name, ()), *where}))
    return found


def stub(name: str, where: tuple[str, ...]) -> str:
    """The statement that stands for an answer's body: it names the exercise that asks for it, in
    every language of the course (the wheel serves both editions; words: ``messages.yours_to_write``)."""
    short, exercises = ".".join(name.split(".")[2:]), ", ".join(where)
    said = " / ".join(MESSAGES[lang]["yours_to_write"].format(name=short, exercises=exercises) for lang in MESSAGES)
    return f"raise NotImplementedError({said!r})"


def _span(lines: list[str], fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[int, int]:
    """Lines [start, end) of a function's body with the comments around it, after its signature."""
    start = fn.body[0].lineno - 1
    while (
        start - 1 >= fn.lineno
        and lines[start - 1].strip()[:1] in ("", "#")
        and not lines[start - 1].rstrip().endswith(":")
    ):
        start -= 1
    end = fn.end_lineno
    while (
        end < len(lines)
        and lines[end].lstrip().startswith("#")
        and len(lines[end]) - len(lines[end].lstrip()) > fn.col_offset
    ):
        end += 1
    return start, end


def fold(text: str, names: dict[str, tuple[str, ...]], removed: set[str], filename: str) -> str:
    """A module's source with the bodies of ``names`` (in this module) replaced by their stubs and
    the twins of ``edition.TWINS`` applied where a target in ``removed`` is gone."""
    tree = ast.parse(text, filename=filename)
    lines = text.splitlines(keepends=True)
    edits: list[tuple[int, int, list[str]]] = []  # (start, end, new lines), 0-based, end exclusive
    for name, where in names.items():
        fn = edition._find(tree, name.split(".")[2:], name)
        start, end = _span(lines, fn)
        edits.append((start, end, [" " * fn.body[0].col_offset + stub(name, where) + "\n"]))
    module = Path(filename).stem
    for twin in edition.TWINS:
        if not twin.when & removed or twin.inside in removed or twin.inside.split(".")[1] != module:
            continue
        fn = edition._find(tree, twin.inside.split(".")[2:], twin.inside)
        for old, new in twin.swap.items():
            want = ast.dump(ast.parse(old).body[0])
            spots = [s for block in edition._blocks(fn) for s in block if ast.dump(s) == want]
            if len(spots) != 1:
                raise edition.EditionError(
                    f"the twin of {twin.inside} expects `{old}` there once, "
                    f"found {len(spots)}: update edition.TWINS to the package"
                )
            s = spots[0]
            edits.append((s.lineno - 1, s.end_lineno, [" " * s.col_offset + new + "\n"]))
        top = next(n for n in tree.body if getattr(n, "name", None) == twin.inside.split(".")[2])
        at = min([top.lineno, *(d.lineno for d in getattr(top, "decorator_list", []))]) - 1
        edits.append((at, at, [twin.helper.strip("\n") + "\n\n\n"]))
    for start, end, new in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        lines[start:end] = new
    out = "".join(lines)
    compile(out, filename, "exec")
    return out


def still_open(setting: str, solutions: Path = edition.SOLUTIONS) -> set[str]:
    """The assignments an ``ASSESSED`` setting keeps open: ``1`` every one, else a comma-separated list
    of them (a later release of the term, once the others are closed); ``0`` is the self-study edition."""
    known = set(edition.assignments(solutions))
    named = known if setting == "1" else {a.strip() for a in setting.split(",") if a.strip()}
    if not named or named - known:
        raise edition.EditionError(
            f"ASSESSED is 0, 1 or a comma-separated list of assignments ({', '.join(sorted(known))}), not {setting!r}"
        )
    return named


def build(
    dest: Path, setting: str = "1", source: Path = edition.PACKAGE, solutions: Path = edition.SOLUTIONS
) -> dict[str, tuple]:
    """Write the assessed edition of ``source`` to ``dest`` (a folder named like the package), with the
    answers of the assignments ``setting`` keeps open folded out (``still_open``); return those."""
    open_ = still_open(setting, solutions)
    found = {name: where for name, where in answers(solutions).items() if open_ & set(where)}
    by_module: dict[str, dict[str, tuple[str, ...]]] = {}
    for name, where in found.items():
        by_module.setdefault(name.split(".")[1], {})[name] = where
    twinned = {t.inside.split(".")[1] for t in edition.TWINS if t.when & set(found)}
    dest = Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("__pycache__"))
    for module in sorted(set(by_module) | twinned):
        path = dest / f"{module}.py"
        if not path.is_file():
            raise edition.EditionError(f"an answer names encdec.{module}, which is not a module of {source}")
        path.write_text(fold(path.read_text(), by_module.get(module, {}), set(found), f"encdec/{module}.py"))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.assessed", description=__doc__.split("\n\n")[0])
    parser.add_argument("dest", type=Path, help="the folder to write the edition to (its name: encdec)")
    parser.add_argument(
        "--assessed",
        default="1",
        help="ASSESSED: 1 (every assignment open) or a comma-separated list of the assignments still open; default 1",
    )
    args = parser.parse_args(argv)
    try:
        found = build(args.dest, args.assessed)
    except edition.EditionError as err:
        print(f"assessed edition: {err}", file=sys.stderr)
        return 1
    print(f"assessed edition in {args.dest}: {len(found)} answers folded out")
    return 0


if __name__ == "__main__":
    sys.exit(main())
