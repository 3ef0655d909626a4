"""The exercises' test cells call ``checks.run(check_id, impl)``: this is all that runs in the kernel.

- **A graded run** (the grader has put this check's inputs in ``.grading-in/<check_id>.npz``,
  just before the cell ran): call the student's code on them and save what came out to
  ``.grading/<check_id>.npz``. Nothing is compared here; the grader computes the expected
  answer outside the sandbox (``autograder.judge``) and decides.
- **The student's own run**: call the student's code on the visible check's fixed inputs stored
  in ``reference/<check_id>.npz``, compare with the outputs stored there, and name the mistake
  when it is a known one; a solution that calls the package's own implementation of the
  exercise is told so by name. Hidden checks exist only in graded runs.

Chapters 11-13 teach what is checked.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from . import language, wire
from .calls import PartialRun, call, raised_in
from .compare import cache_blame, error_match, where
from .selfcheck import delegation_message, diagnosis, judge, watch_targets

HIDDEN_SUFFIX = "_hidden"  # hidden checks' ids end with it (their cells are stripped from the release)


def run(check_id: str, impl: Any, workdir: str | os.PathLike = ".") -> None:
    """Run one check on the student's ``impl``; raise AssertionError when it fails."""
    __tracebackhide__ = True  # IPython shows the student's frames and the message, not this one
    wd = Path(workdir)
    graded = wd / wire.INPUTS_DIR / f"{check_id}.npz"
    if graded.exists():
        _graded_run(check_id, impl, wd, graded)
        return
    stored = wd / wire.REFERENCE_DIR / f"{check_id}.npz"
    if check_id.endswith(HIDDEN_SUFFIX):
        # The instructor's own run of the source notebook: the inputs exist only when graded.
        with language.speaking(release_language(wd)):
            print(language.text("hidden_own_run", check_id=check_id))
        return
    if not stored.exists():
        with language.speaking(release_language(wd)):
            missing = language.text("no_reference", check_id=check_id)
        raise FileNotFoundError(missing)
    meta, arrays = wire.load(stored)
    task = meta.get("task", check_id)
    with language.speaking(meta.get("language")):  # a release's language (autograder/release.py)
        with watch_targets(meta.get("targets", [])) as called:
            got = _call(check_id, task, meta, arrays, impl, save_to=None)
        if called:
            _fail(delegation_message(check_id, called))
        ok, message = judge(check_id, meta, got, arrays)
        if not ok:
            _fail(message)
        print(message)


def _graded_run(check_id: str, impl: Any, wd: Path, path: Path) -> None:
    __tracebackhide__ = True
    meta, arrays = wire.load(path)
    out = wd / wire.OUTPUTS_DIR / f"{check_id}.npz"
    # what the kernel prints here is the student's to read only: the grader replaces it (autograder.preprocessors)
    with language.speaking(meta.get("language") or release_language(wd)):
        got = _call(check_id, meta.get("task", check_id), meta, arrays, impl, save_to=out)
        wire.save(out, {"status": "ok"}, got)
        print(language.text("graded_run_done", check_id=check_id))


def release_language(workdir: Path) -> str | None:
    """The language of the release the notebook came from, for a run without a stored file of its
    own (a hidden check, a missing reference, a graded run): the one the visible checks' stored
    files next to it say (``reference/*.npz``, ``autograder/release.py``); None (keep the current
    language) when none says one."""
    for ref in sorted((workdir / wire.REFERENCE_DIR).glob("*.npz")):
        try:
            lang = wire.load_meta(ref).get("language")
        except Exception:
            continue
        if isinstance(lang, str):
            return lang
    return None


def _call(check_id: str, task: str, meta: dict, arrays: dict, impl: Any, save_to: Path | None) -> dict[str, np.ndarray]:
    __tracebackhide__ = True
    try:
        return call(meta, arrays, impl)
    except NotImplementedError as exc:
        if save_to is not None:
            wire.save(save_to, {"status": "not_implemented"}, {})
        # a part an assessed term's package folds out says whose exercise it is (autograder/assessed.py)
        _fail(
            language.text("not_implemented", check_id=check_id, task=task)
            + language.text("not_implemented_hint")
            + (f"\n{exc}" if str(exc) else "")
        )
    except Exception as exc:
        partial = exc if isinstance(exc, PartialRun) else None
        exc = partial.error if partial else exc
        msg = f"{type(exc).__name__}: {exc}"
        origin = raised_in(exc)
        if save_to is not None:  # what ran before the failure goes to the grader too
            wire.save(
                save_to,
                {"status": "error", "error": msg[:4000], "error_class": type(exc).__name__, "raised_in": origin},
                partial.observed if partial else {},
            )
        blame = None
        if partial and meta.get("kind") in ("decode", "prefill"):
            H = int(meta["config"]["num_heads"])
            blame = cache_blame(
                partial.observed.get("cache_shapes"),
                int(arrays["in/ques"].shape[0]),
                H,
                int(meta["config"]["emb_dim"]) // H,
                origin,
            )
        _fail(
            language.text("raised", check_id=check_id, task=task, msg=msg)
            + where(origin)
            + (f"\n{blame}" if blame else "")
            + diagnosis(error_match(meta.get("error_patterns", {}), msg)),
            cause=exc,
        )
    raise AssertionError("unreachable")


def _fail(message: str, cause: BaseException | None = None) -> None:
    """Raise the check's AssertionError (IPython hides ``run``'s frame, not the last one)."""
    raise AssertionError(str(message)) from cause  # worded now, in the language spoken here
