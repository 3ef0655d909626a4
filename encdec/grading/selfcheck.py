"""The student's own run of a visible check: compare with the stored reference, name the mistake,
and say so when the solution called the package's own implementation of the exercise.

Everything compared here was computed ahead of time on fixed inputs and stored in
``reference/<check_id>.npz`` (expected outputs and the outputs of known mistakes); no reference
code runs in the kernel. A graded run never comes here: it only saves outputs for the grader.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from . import language
from .compare import is_exact, mismatch_details, same
from .misconceptions import MISCONCEPTIONS, base_name
from .wire import section

# Calls of a target that the *given* parts make themselves (multi-head attention runs the
# package's masked softmax in the student's own environment): (target, calling function).
GIVEN_INTERNAL = {
    ("encdec.attention.masked_softmax", "scaled_dot_product_attention"),
    ("encdec.attention.scaled_dot_product_attention", "forward"),
}
_WRAPPERS = ("torch/utils/_contextlib.py", "contextlib.py")  # @torch.no_grad() and friends


def _resolve(dotted: str):
    parts = dotted.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            obj = getattr(obj, name)
        return obj
    raise ImportError(dotted)


@contextmanager
def watch_targets(targets: list[str]):
    """Record every call the student's code makes to the package's version of a target.

    Catches every route (``super().forward``, ``ref.DecoderBlock.forward(self, ...)``, a
    function imported under another name) because it matches code objects, not names.
    """
    codes = {}
    for name in targets:
        try:
            fn = inspect.unwrap(_resolve(name))
        except (ImportError, AttributeError):
            continue
        if hasattr(fn, "__code__"):
            codes[fn.__code__] = name
    seen: list[str] = []

    def profile(frame, event, arg):
        if event != "call" or frame.f_code not in codes:
            return
        name = codes[frame.f_code]
        caller = frame.f_back
        while caller is not None and caller.f_code.co_filename.endswith(_WRAPPERS):
            caller = caller.f_back
        if (
            caller is not None
            and (name, caller.f_code.co_name) in GIVEN_INTERNAL
            and Path(caller.f_code.co_filename).name == "attention.py"
        ):
            return
        if name not in seen:
            seen.append(name)

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield seen
    finally:
        sys.setprofile(previous)


def delegation_message(check_id: str, called: list[str]) -> str:
    names = ", ".join(called)
    return language.fill(language.text("delegation", check_id=check_id, names=names))


def diagnosis(name: str | None) -> str:
    """'\\nDiagnosis: ...' wrapped to 88 columns (feedback HTML does not wrap), or ''."""
    if name is None:
        return ""
    key = base_name(name)
    if key not in MISCONCEPTIONS:
        return ""
    return language.diagnosis_line(key)


def judge(check_id: str, meta: dict, got: dict[str, np.ndarray], stored: dict[str, np.ndarray]) -> tuple[bool, str]:
    """Compare ``got`` with the stored expected outputs; name a known mistake that fits. Returns
    whether it passed and the line to show."""
    title = meta.get("title", check_id)
    expected = section(stored, "expected")
    shape_only = set(meta.get("shape_only", []))
    hints = {tuple(shape): key for shape, key in meta.get("shape_hints", [])}
    for key, exp in sorted(expected.items()):
        g = got.get(key)
        if g is None:
            return False, language.text("not_produced", check_id=check_id, title=title, what=key)
        if key in shape_only:
            if g.shape == exp.shape and np.isfinite(g).all():
                continue
            return False, language.text(
                "shape_only", check_id=check_id, title=title, what=key, shape=tuple(exp.shape), got=tuple(g.shape)
            ) + diagnosis(hints.get(g.shape))
        if same(g, exp, is_exact(exp)):
            continue
        name = _known_mistake(got, stored)
        larger = meta.get("when_larger", {}).get(key)
        if name is None and larger and g.shape == exp.shape and (g > exp).any():
            name = larger
        if name is None and g.shape != exp.shape:
            name = hints.get(g.shape)
        lines = [language.text("did_not_match", check_id=check_id, title=title, what=key) + diagnosis(name)]
        return False, "\n".join(str(line) for line in lines + mismatch_details(g, exp, is_exact(exp)))
    return True, language.text("passed", message=language.text("matched_all", title=title))


def _known_mistake(got: dict[str, np.ndarray], stored: dict[str, np.ndarray]) -> str | None:
    """The first stored known-buggy variant whose every output equals the student's."""
    names = sorted({k.split("/")[1] for k in stored if k.startswith("variant/")})
    for name in names:
        outs = section(stored, f"variant/{name}")
        if outs and all(k in got and same(got[k], v, is_exact(v)) for k, v in outs.items()):
            return name
    return None
