"""How a grading edition is put in place (``edition.py``: the package's, per assignment, and torch's):
built in a private folder, renamed into place under its digest, and ``<out>/<name>`` a link swapped
atomically onto it, so graders running side by side never see half an edition; a forced rebuild
keeps an intact edition where it is, and puts a damaged one's replacement beside it; superseded ones
are pruned once no kernel started from them can still be reading them."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import time
from pathlib import Path

STAMP = "STAMP"
KEEP_OLD_S = 3600  # a kernel started from a superseded edition may still be reading it


class EditionError(RuntimeError):
    """The grading edition cannot be built (a missing target, an omitted module imported, ...)."""


def publish(assignment: str, out_root: Path, stamp: str, generate, force: bool) -> Path:
    """``<out_root>/<assignment>``, a link to the edition of digest ``stamp`` (made by
    ``generate(folder)`` unless current): built privately, renamed into place, linked atomically."""
    out_root.mkdir(parents=True, exist_ok=True)
    link = out_root / assignment
    try:
        current = (link / STAMP).read_text().strip()
    except OSError:  # none yet, or pruned by another grader
        current = None
    if not force and current == stamp:
        return link
    tmp = Path(os.path.realpath(out_root)) / f".{assignment}-tmp-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        tmp.mkdir()
    except PermissionError as err:  # a grader that may not write there (a plain user, root's build/)
        raise EditionError(
            f"the edition in {out_root} is out of date (the package, solutions or torch changed) and this user "
            f"may not rebuild it there; its owner rebuilds it with `python -m autograder.edition`"
        ) from err
    try:
        generate(tmp)
        (tmp / STAMP).write_text(stamp + "\n")
        _readable(tmp)
        version = tmp.with_name(f".{assignment}-{stamp[:20]}")
        try:
            os.rename(tmp, version)
        except OSError:  # that edition is there already: another grader built it first
            if force and not _same_files(tmp, version):  # damaged: rebuilt beside it (a kernel may read it)
                version = version.with_name(f"{version.name}-{secrets.token_hex(4)}")
                os.rename(tmp, version)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    previous = os.readlink(link) if link.is_symlink() else None
    swap = out_root / f".{assignment}-link-{os.getpid()}-{secrets.token_hex(4)}"
    os.symlink(version.name, swap)  # relative: the zygote reads it under another mount point
    if link.is_dir() and not link.is_symlink():
        shutil.rmtree(link)  # a plain folder from elsewhere: a link replaces it
    os.replace(swap, link)
    if previous not in (None, version.name):
        try:  # superseded now: kept KEEP_OLD_S from this moment, however old its files are
            os.utime(out_root / previous)
        except OSError:
            pass  # pruned already, or another grader's
    _prune(assignment, out_root, keep=version.name)
    return link


def _same_files(a: Path, b: Path) -> bool:
    """Two folders hold the same files, byte for byte (a forced rebuild of an intact edition keeps it)."""

    def files(root: Path) -> dict[str, bytes]:
        return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}

    try:
        return files(a) == files(b)
    except OSError:
        return False


def _prune(assignment: str, out_root: Path, keep: str) -> None:
    """Remove superseded editions and abandoned builds of ``assignment`` (old enough)."""
    pattern = re.compile(rf"\.{re.escape(assignment)}-([0-9a-f]{{20}}(-[0-9a-f]{{8}})?|tmp-.*|link-.*)")
    for entry in out_root.iterdir():
        if entry.name == keep or not pattern.fullmatch(entry.name):
            continue
        try:
            if time.time() - entry.lstat().st_mtime < KEEP_OLD_S:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        except OSError:
            pass  # another grader pruned it first


def _readable(root: Path) -> None:
    """The kernel's uid reads the edition: folders 0755, files 0644, whatever the umask."""
    for folder, _dirs, files in os.walk(root):
        os.chmod(folder, 0o755)
        for f in files:
            os.chmod(os.path.join(folder, f), 0o644)
