"""The grader's own memory on the worst records a kernel can hand it, against an honest submission.

    python bench/bench_grader_memory.py [--limit-mb 2500] [CASE ...]

Everything the kernel saves for a check reaches the grader as a file of at most ``wire.MAX_BYTES``,
and the grader judges it in its own, unconfined process (``TrustedVerdict``). Each case here is one
assignment's graded checks as the grader meets them: the files of every check read and held at
once (as ``GradedExecute`` keeps them), then judged one after the other with ``judge.verify``.
The files are made first, by the honest solution or a hostile one run here on the graded inputs
(the kernel's side, ``encdec.grading.checks.run``), or written directly (a forged record); the
judging runs in a fresh process whose peak resident size (``ru_maxrss``) is the figure. A guard
stops a judging process above ``--limit-mb`` (it prints "over the limit").

Cases: the honest solution of each assignment (the floor); a wrong block whose record holds calls
on (5000, 1, M) and (1, 5000, M) (the stage diagnosis once broadcast them to 5000 x 5000 x M);
forged records of the same kind at 11,000 (8 GB if broadcast); 60,000 and 1,990 stage records; kv_cache
step records at the file limit (fed tokens, cache lengths, cache shapes, decoder lengths); every
check's file at the size limit, with the block's output under the expected name.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SEED = 4242  # the graded inputs' seed (as a student's would be)


def assignment_checks(assignment: str) -> list[str]:
    from autograder import judge

    return [c for c in judge.checks() if c.startswith(assignment + ".")]


def honest_impls(assignment: str, edits: dict | None = None) -> dict:
    """The names a test cell hands to ``checks.run`` (the solution, with ``edits`` applied), from
    the instructor notebook's solution cells run here."""
    import nbformat

    from autograder.fixtures.make import apply

    nb = apply(assignment, edits or {})
    ns: dict = {}
    for cell in nbformat.from_dict(nb).cells if not isinstance(nb, str) else []:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and not (meta.get("grade") and not meta.get("solution")):
            exec(compile(cell.source, f"<{assignment}:{meta.get('grade_id', 'cell')}>", "exec"), ns)
    return ns


def impl_names(assignment: str) -> dict[str, str]:
    """Check id -> the name its test cell hands to ``checks.run`` (the instructor notebook's)."""
    import re

    text = (ROOT / "solutions" / assignment / f"{assignment}.ipynb").read_text()
    return dict(re.findall(r'checks\.run\(\\"([\w.]+)\\", (\w+)\)', text))


def graded_files(check_id: str) -> list[tuple[str, dict]]:
    """(file name, inputs) of the file the kernel saves for a check."""
    from autograder import judge

    return [(check_id, judge.graded_inputs(check_id, SEED))]


def kernel_files(assignment: str, folder: Path, edits: dict | None = None) -> None:
    """What a kernel running the solution (with ``edits``) saves for every check of ``assignment``."""
    import contextlib
    import io

    from autograder import judge
    from autograder.preprocessors import deliver, withdraw
    from encdec.grading import checks

    ns, names = honest_impls(assignment, edits), impl_names(assignment)
    work = Path(tempfile.mkdtemp(prefix="kernel-", dir=folder))
    for check_id in assignment_checks(assignment):
        for name, inputs in graded_files(check_id):
            deliver(work, check_id, judge.wire_bytes(check_id, inputs))
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    checks.run(check_id, ns[names[check_id]], work)
            except AssertionError:
                pass  # a graded run raises when the student's code did: its outputs are saved
            saved = withdraw(work, check_id)
            if saved is not None:
                (folder / f"{name}.npz").write_bytes(saved)


def forged(folder: Path, check_ids: list[str], arrays_for) -> None:
    """Files written directly (a kernel can write anything in its folder): ``arrays_for(check_id, inputs)``."""
    from encdec.grading import wire

    for check_id in check_ids:
        for name, inputs in graded_files(check_id):
            data = wire.to_bytes({"status": "ok"}, arrays_for(check_id, inputs))
            (folder / f"{name}.npz").write_bytes(data[: wire.MAX_BYTES])


def _block_shape(inputs: dict) -> tuple:
    return tuple(inputs["dec"].shape)  # (N, Ka, M)


def broadcast_record(k: int):
    def arrays(check_id, inputs):
        n, ka, m = _block_shape(inputs)
        out = np.zeros((n, ka, m), np.float32)
        return {
            "out": out,
            "out_again": out,
            "out_changed": out,
            "trace/out/00/attention_self/query": out,
            "trace/out/01/layer_norm_2/output": np.ones((k, 1, m), np.float32),
            "trace/out/02/feed_forward/output": np.ones((1, k, m), np.float32),
            "trace/out/03/layer_norm_1/output": np.ones((k, 1, m), np.float32),
            "trace/out/04/attention_cross/output": np.ones((1, k, m), np.float32),
        }

    return arrays


def many_records(n_records: int):
    def arrays(check_id, inputs):
        n, ka, m = _block_shape(inputs)
        out = np.zeros((n, ka, m), np.float32)
        record = {f"trace/out/{i:05d}/layer_norm_1/input": np.zeros((1, 1, 1), np.float32) for i in range(n_records)}
        return {"out": out, "out_again": out, **record}

    return arrays


def step_records(check_id, inputs):
    from encdec.grading import wire

    per = wire.MAX_BYTES // 8
    return {
        "tokens": np.zeros((2, 6), np.int64),
        "step_logits": np.zeros((5, 2, 3), np.float32),
        **{f"fed/{t}": np.zeros((2, 1, 16), np.float32) for t in range(5)},
        "decoder_lengths": np.ones(per // 2, np.int64),
        "cache_held": np.ones((per // 64, 8), np.int64),
        "cache_shapes": np.ones((per // 64, 2, 4), np.int64),
        "encoder_calls": np.ones(per // 32, np.int64),
    }


def at_limit(check_id, inputs):
    from encdec.grading import wire

    big = np.ones((wire.MAX_BYTES - 4096) // 4, np.float32)  # the whole file, under the expected name
    return {"out": big}


def judge_folder(assignment: str, folder: Path, limit_mb: int) -> dict:
    """Run in a fresh process: hold every file, judge every check; the peak resident size."""
    code = f"""
import json, os, resource, sys, threading, time
sys.path.insert(0, {str(ROOT)!r})
limit = {limit_mb} * 2**20
def guard():
    page = os.sysconf("SC_PAGE_SIZE")
    while True:
        with open("/proc/self/statm") as f:
            if int(f.read().split()[1]) * page > limit:
                print(json.dumps({{"over": True}}), flush=True)
                os._exit(3)
        time.sleep(0.005)
threading.Thread(target=guard, daemon=True).start()
from pathlib import Path
from autograder import judge
from encdec.grading import wire
folder = Path({str(folder)!r})
ids = [c for c in judge.checks() if c.startswith({assignment!r} + ".")]
inputs = {{c: judge.graded_inputs(c, {SEED}) for c in ids}}
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
def read(name):
    try:
        return wire.read_bounded(folder / (name + ".npz"))
    except (OSError, ValueError):
        return None
saved = {{c: read(c) for c in ids}}
t0 = time.perf_counter()
ok = [judge.verify(c, saved[c], inputs[c]).ok for c in ids]
print(json.dumps({{"before_kb": before, "peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "seconds": time.perf_counter() - t0, "passed": sum(ok), "checks": len(ok)}}))
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    lines = [ln for ln in run.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise RuntimeError(run.stderr[-3000:])
    return json.loads(lines[-1])


def cases() -> dict:
    from autograder.fixtures.payloads import HUGE_BROADCAST
    from autograder.fixtures.table import forward

    block_checks = [
        "decoder_block.output",
        "decoder_block.output_hidden",
        "decoder_block.causal_hidden",
        "decoder_block.question_hidden",
    ]  # the checks whose record the stage diagnosis reads
    return {
        "honest decoder_block": ("decoder_block", lambda f: kernel_files("decoder_block", f)),
        "honest target_slicing": ("target_slicing", lambda f: kernel_files("target_slicing", f)),
        "honest kv_cache": ("kv_cache", lambda f: kernel_files("kv_cache", f)),
        "block recorded on (5000, 1, M) and (1, 5000, M)": (
            "decoder_block",
            lambda f: kernel_files("decoder_block", f, {"block_solution": forward(HUGE_BROADCAST)}),
        ),
        "forged record, (11000, 1, M) and (1, 11000, M)": (
            "decoder_block",
            lambda f: forged(f, block_checks, broadcast_record(11_000)),
        ),
        "60,000 stage records (refused unread)": (
            "decoder_block",
            lambda f: forged(f, block_checks, many_records(60_000)),
        ),
        "1,990 stage records (under the file's array limit)": (
            "decoder_block",
            lambda f: forged(f, block_checks, many_records(1_990)),
        ),
        "kv_cache step records at the file limit": (
            "kv_cache",
            lambda f: forged(f, assignment_checks("kv_cache"), step_records),
        ),
        "every decoder_block file at the size limit": (
            "decoder_block",
            lambda f: forged(f, assignment_checks("decoder_block"), at_limit),
        ),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--limit-mb", type=int, default=2500, help="stop a judging process above this resident size")
    p.add_argument("only", nargs="*", help="substrings of the case names to run (default: all)")
    args = p.parse_args(argv)
    from encdec.grading import wire

    print(
        f"file limit (wire.MAX_BYTES): {wire.MAX_BYTES / 1e6:.0f} MB; judging process stopped above {args.limit_mb} MB"
    )
    print(f"{'case':52s} {'files MB':>8s} {'peak MB':>8s} {'judging MB':>10s} {'passed':>7s} {'s':>6s}")
    floor = None
    worst = 0.0
    for name, (assignment, make) in cases().items():
        if args.only and not any(o in name for o in args.only):
            continue
        with tempfile.TemporaryDirectory(prefix="grader-memory-") as tmp:
            folder = Path(tmp)
            try:
                make(folder)
            except Exception as err:
                print(f"{name:52s} could not be made: {type(err).__name__}: {err}")
                continue
            size = sum(p.stat().st_size for p in folder.glob("*.npz")) / 1e6
            r = judge_folder(assignment, folder, args.limit_mb)
        if r.get("over"):
            print(f"{name:52s} {size:8.1f}   over the limit ({args.limit_mb} MB)")
            worst = float("inf")
            continue
        peak, judging = r["peak_kb"] / 1024, (r["peak_kb"] - r["before_kb"]) / 1024
        floor = peak if name.startswith("honest") and (floor is None or peak > floor) else floor
        worst = max(worst, peak) if not name.startswith("honest") else worst
        print(
            f"{name:52s} {size:8.1f} {peak:8.0f} {judging:10.0f} {r['passed']:>3d}/{r['checks']:<3d} {r['seconds']:6.1f}"
        )
    if floor is not None:
        print(
            f"honest floor {floor:.0f} MB; worst hostile {worst:.0f} MB (+{worst - floor:.0f} MB); "
            f"the bound is 1024 MB: {'kept' if worst < 1024 else 'NOT kept'}"
        )
    return 0 if worst < 1024 else 1


if __name__ == "__main__":
    sys.exit(main())
