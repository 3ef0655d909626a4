"""Draws made ahead: a student's graded inputs drawn before they hand in, read back at grading.

A graded check's inputs are drawn from a seed only the grader can compute (``seeds.check_seed``:
the course secret, the student, the assignment, the check), so the roster gives every seed before
the deadline. kv_cache's are dear (its eight structure runs: some 5 to 7 CPU-s a student), and a class hands in
within minutes; drawn ahead, the grader only reads them. A record is bit for bit what
``judge.graded_inputs`` would draw at grading (``tests/test_grading_ahead.py``), so a score never
depends on whether its inputs were drawn ahead.

The records live beside the course secret they derive from (``<grading>/draws/``, mode 0700, the
grader's own): a record is read only when it is a regular file of the grader's, within ``MAX_BYTES``,
loaded by torch's weights-only reader, and made by these very judges (``version()``: their sources,
the package's and torch's version), for this check and seed; anything else is drawn again.

A drawn model is stored as what it differs by from the weights ``core.randomize_`` gives its seed
(its readout, its scaled embeddings): a few kB where the weights are megabytes.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import os
import stat
from pathlib import Path

import torch

from encdec.config import ModelConfig
from encdec.model import Transformer

FOLDER = "draws"  # beside the course secret
MAX_BYTES = 8 << 20  # a record of kv_cache's largest check is some 100 kB


@functools.cache
def version() -> str:
    """The judges', the package's and torch's fingerprint: a record made by other code is drawn again."""
    import encdec

    h = hashlib.sha256(torch.__version__.encode())
    for folder in (Path(__file__).resolve().parent, Path(encdec.__file__).resolve().parent):
        for path in sorted(folder.rglob("*.py")):
            h.update(str(path.relative_to(folder.parent)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:24]


def folder_of(secret_file: str | os.PathLike) -> Path:
    return Path(secret_file).parent / FOLDER


def _path(folder: Path, check_id: str, seed: int) -> Path:
    key = hashlib.sha256(f"{version()}\0{check_id}\0{seed}".encode()).hexdigest()[:32]
    return folder / f"{version()[:12]}-{key}.pt"


def prune(folder: Path) -> int:
    """Remove the records other judges made (their names start with another version): how many."""
    gone = 0
    for path in folder.glob("*.pt") if folder.is_dir() else ():
        if not path.name.startswith(f"{version()[:12]}-"):
            path.unlink(missing_ok=True)
            gone += 1
    return gone


# --- inputs <-> plain tensors, lists and dicts (what the weights-only reader loads) -----------------


def _encode(value):
    if isinstance(value, Transformer):
        seed = getattr(value, "randomized_from", None)
        if seed is None:
            raise TypeError("a model not drawn by core.randomize_")
        from .core import randomize_

        base = randomize_(Transformer(value.config), seed).state_dict()
        diff = {k: v.clone() for k, v in value.state_dict().items() if not torch.equal(v, base[k])}
        return {"__model__": dataclasses.asdict(value.config), "seed": seed, "diff": diff, "training": value.training}
    if isinstance(value, ModelConfig):
        return {"__config__": dataclasses.asdict(value)}
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, dict):
        if not all(isinstance(k, str) and not k.startswith("__") for k in value):
            raise TypeError("a dict with other keys than plain names")
        return {k: _encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_encode(v) for v in value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"{type(value).__name__} is not kept ahead")


def _decode(value):
    if isinstance(value, dict) and "__model__" in value:
        from .core import randomize_

        model = randomize_(Transformer(ModelConfig(**value["__model__"])), value["seed"])
        with torch.no_grad():
            state = model.state_dict()
            for k, v in value["diff"].items():
                state[k].copy_(v)
        return model.train(value["training"])
    if isinstance(value, dict) and "__config__" in value:
        return ModelConfig(**value["__config__"])
    if isinstance(value, dict):
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_decode(v) for v in value)
    return value


# --- the records -----------------------------------------------------------------------------------


def save(folder: Path, check_id: str, seed: int, inputs: dict) -> bool:
    """Keep ``inputs`` (drawn from ``seed``) for grading; False when they hold what is not kept ahead."""
    try:
        record = {"version": version(), "check": check_id, "seed": seed, "inputs": _encode(inputs)}
    except TypeError:
        return False
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    buf = io.BytesIO()
    torch.save(record, buf)
    path = _path(folder, check_id, seed)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(buf.getvalue())
    os.replace(tmp, path)  # complete or absent
    return True


def load(folder: Path, check_id: str, seed: int) -> dict | None:
    """The inputs kept for ``check_id`` and ``seed``, or None (none kept, or not to be trusted)."""
    try:
        fd = os.open(_path(folder, check_id, seed), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022 or st.st_size > MAX_BYTES:
            return None
        data = f.read(MAX_BYTES + 1)
    try:
        record = torch.load(io.BytesIO(data), weights_only=True)
    except Exception:  # a torn or foreign file: drawn again
        return None
    if not isinstance(record, dict) or (record.get("version"), record.get("check"), record.get("seed")) != (
        version(),
        check_id,
        seed,
    ):
        return None
    return _decode(record["inputs"])


def held(folder: Path, check_id: str, seed: int) -> bool:
    return _path(folder, check_id, seed).is_file()


def draw(folder: Path, secret: bytes, assignment: str, students: list[str]) -> dict[str, int]:
    """Draw and keep the graded inputs of ``assignment``'s checks for each of ``students`` not kept yet:
    {"drawn": n, "kept": n already, "not_kept": n whose inputs are not kept ahead (drawn at grading),
    "pruned": n records of other judges removed}."""
    from autograder import assignments

    from . import graded_inputs, of_assignment
    from .seeds import check_seed

    counts = {"drawn": 0, "kept": 0, "not_kept": 0, "pruned": prune(folder)}
    for student in students:
        for check_id in sorted(set(assignments.checks(assignment).values()) & set(of_assignment(assignment))):
            seed = check_seed(secret, student, assignment, check_id)
            if held(folder, check_id, seed):
                counts["kept"] += 1
            elif save(folder, check_id, seed, graded_inputs(check_id, seed, drawn_ahead=None)):
                counts["drawn"] += 1
            else:
                counts["not_kept"] += 1
    return counts


def _one_thread() -> None:
    torch.set_num_threads(1)


def _draw_in(jobs: int, folder: Path, secret: bytes, assignment: str, students: list[str]) -> dict[str, int]:
    """``draw`` over ``jobs`` processes, each a share of the students."""
    if jobs <= 1 or len(students) <= 1:
        return draw(folder, secret, assignment, students)
    from concurrent.futures import ProcessPoolExecutor

    shares = [students[i::jobs] for i in range(jobs)]
    with ProcessPoolExecutor(jobs, initializer=_one_thread) as pool:
        done = list(pool.map(draw, [folder] * jobs, [secret] * jobs, [assignment] * jobs, shares))
    return {k: sum(d[k] for d in done) for k in done[0]}


def gradebook_students(db_url: str) -> set[str]:
    """The gradebook's students, read only. A gradebook that is not made yet has none, and it is not
    made here: nbgrader makes one on first use, tables and all, and two processes making it at once
    collide (the service draws when it starts, as the instructor's first command makes it)."""
    from sqlalchemy import create_engine, inspect, text

    from autograder.environment import SQLITE

    if db_url.startswith(SQLITE):
        path = Path(db_url.removeprefix(SQLITE))
        if not path.is_file():
            return set()
        db_url = f"{SQLITE}file:{path}?mode=ro&uri=true"
    engine = create_engine(db_url)
    try:
        if "student" not in inspect(engine).get_table_names():
            return set()
        with engine.connect() as conn:
            return {row[0] for row in conn.execute(text("SELECT id FROM student"))}
    finally:
        engine.dispose()


def main(argv: list[str] | None = None) -> int:
    """``python -m autograder.judge.ahead ASSIGNMENT... [--student ID...]``, from the course root, as
    the grader's user: the roster's inputs drawn now (default: every student of the gradebook)."""
    import argparse

    from autograder.preprocessors import TrustedGrading
    from autograder.taskqueue.course import coursedir_for, load_config

    parser = argparse.ArgumentParser(prog="python -m autograder.judge.ahead", description=__doc__.split("\n\n")[0])
    parser.add_argument("assignments", nargs="+")
    parser.add_argument("--student", action="append", default=[], help="default: the gradebook's students")
    parser.add_argument("--group", help="and the members of this Linux group (the hub's students)")
    parser.add_argument("--course", type=Path, default=Path("."), help="the course root (default: here)")
    parser.add_argument("--nice", type=int, default=0, help="run at this niceness (a service's background work)")
    parser.add_argument("--jobs", type=int, default=1, help="processes drawing side by side, one thread each")
    args = parser.parse_args(argv)
    os.nice(args.nice)
    config = load_config(args.course)
    cd = coursedir_for(config)
    students = set(args.student) or gradebook_students(cd.db_url)
    if args.group:
        import grp

        try:
            students |= set(grp.getgrnam(args.group).gr_mem)
        except KeyError:
            parser.error(f"no group {args.group!r} on this machine")
    students = sorted(students)
    from .seeds import load_secret

    secret_file = TrustedGrading(config=config).secret_file
    torch.set_num_threads(1)
    for a in args.assignments:
        counts = _draw_in(args.jobs, folder_of(secret_file), load_secret(secret_file), a, students)
        print(
            f"{a}: {len(students)} students; inputs drawn {counts['drawn']}, kept already {counts['kept']}, "
            f"drawn at grading instead {counts['not_kept']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
