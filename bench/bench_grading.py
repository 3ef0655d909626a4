"""Class-scale grading speed: stock sequential `nbgrader autograde` vs `autograder.driver` vs the
RQ queue (`autograder.taskqueue`) with 1 and 2 workers.

    .venv/bin/python bench/bench_grading.py [--students 20] [--workers 2]

Builds two identical copies of the course in a temporary folder with a batch of `--students`
students handing in a notebook for every assignment (half of them one fewer: correct ones,
correct in another style, one-bug ones and untouched stubs, taken from autograder/fixtures/),
then, in the same run:

1. the floor: start a kernel and `import torch, encdec` in it, then shut it down (median of 3),
   for a plain ipykernel, the sandboxed kernel (fresh bwrap) and the sandboxed kernel forked
   from the zygote;
2. stock nbgrader, sequential, as an instructor runs it from the course root (the course config
   puts every kernel in the sandbox): `nbgrader autograde <assignment>` for each assignment, once
   with a fresh bwrap per kernel (ENCDEC_SANDBOX_PREFORK=0) and once with the default zygote;
3. the driver: `python -m autograder.driver <all assignments> --workers N` (sandbox on);
4. the queue: a Redis on 127.0.0.1 (tests/redis_server.py), `python -m autograder.taskqueue enqueue`,
   1 then 2 `python -m autograder.taskqueue worker --burst` processes, and `collect --wait` as the
   single writer; timed from enqueue to the last result applied.

It prints the wall times, the throughput (notebooks per minute), the worker-seconds per notebook
(wall x workers / notebooks: the worker time one notebook takes, what sizes a cluster), the
throughput ratios, the minutes a class of 1,500 notebooks takes at that throughput (target <= 40
with the driver and the queue on 2 cores), the driver's cost per notebook against the plain
floor (target <= 1.5x), and checks that every run graded every notebook to the same score.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autograder import assignments as course
from autograder.fixtures import table
from autograder.fixtures.make import graded_notebook

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENTS = course.names()  # from the solutions' nbgrader metadata
PY = sys.executable
# a class of 500 handing in three notebooks, and the time it may take on a 2-core machine
CLASS_NOTEBOOKS = 1500
CLASS_MINUTES = 40


def make_course(dest: Path) -> Path:
    dest.mkdir(parents=True)
    shutil.copy(ROOT / "nbgrader_config.py", dest / "nbgrader_config.py")
    shutil.copytree(ROOT / "solutions", dest / "solutions")
    ignore = shutil.ignore_patterns(
        "__pycache__",
        "hostile",
        "fixtures",
        "submitted",
        "autograded",
        "feedback",
        "gradebook.db*",
        "export",
        "exchange",
    )
    shutil.copytree(ROOT / "autograder", dest / "autograder", ignore=ignore)
    for a in ASSIGNMENTS:
        subprocess.run(
            [PY, "-m", "nbgrader", "generate_assignment", a, "--force"], cwd=dest, check=True, capture_output=True
        )
    return dest


def batch(n_students: int) -> dict[tuple[str, str], Path]:
    """(student, assignment) -> the notebook handed in; about 60% correct, 40% broken."""
    picks: dict[tuple[str, str], Path] = {}
    manifest = table.grading()
    for a in ASSIGNMENTS:
        mine = sorted(n for n, spec in manifest.items() if spec["assignment"] == a)
        good = [graded_notebook(n).parent for suffix in ("_pass_all", "_style") for n in mine if n.endswith(suffix)]
        bugs = [graded_notebook(n).parent for n in mine if "_bug_" in n]
        if not good or not bugs:
            raise SystemExit(
                f"bench needs fixtures of {a} that pass all (*_pass_all, *_style) and one-bug ones (*_bug_*)"
            )
        for i in range(n_students):
            if a == ASSIGNMENTS[-1] and i % 2:  # half the class hands in every notebook, half one fewer
                continue
            kind = i % 5
            if kind in (0, 1, 2):
                src = good[i % len(good)] / f"{a}.ipynb"
            elif kind == 3:
                src = bugs[i % len(bugs)] / f"{a}.ipynb"
            else:
                src = None  # the untouched stub from exercises/
            picks[(f"s{i:02d}", a)] = src
    return picks


def submit(course: Path, picks) -> None:
    from autograder.taskqueue.course import coursedir_for, load_config, submission_dir

    cd = coursedir_for(load_config(course))
    for (student, a), src in picks.items():
        d = submission_dir(cd, a, student)
        d.mkdir(parents=True)
        shutil.copy(src or course / "exercises" / a / f"{a}.ipynb", d / f"{a}.ipynb")


def floor(kind: str, cwd: Path, repeat: int = 3) -> float:
    """Seconds to start a kernel, run `import torch, encdec` in it and shut it down."""
    from jupyter_client.manager import KernelManager

    times = []
    for _ in range(repeat):
        work = Path(tempfile.mkdtemp(dir=cwd))
        t = time.perf_counter()
        if kind in ("bwrap", "zygote"):
            from jupyter_core.utils import run_sync

            from autograder.sandbox.kernel import SandboxKernelManager

            km = SandboxKernelManager(prefork=kind == "zygote")
            km.assignment = "decoder_block"  # the kernel imports that assignment's grading edition
            run_sync(km.start_kernel)(cwd=str(work))
            kc = km.client()
            kc.start_channels()
            run_sync(kc.wait_for_ready)(timeout=60)
            run_sync(kc.execute_interactive)("import torch, encdec.model", timeout=60)
            kc.stop_channels()
            run_sync(km.shutdown_kernel)()
            run_sync(km.cleanup_resources)()
        else:
            km = KernelManager(kernel_name="python3")
            km.start_kernel(
                cwd=str(work),
                env=dict(os.environ, OMP_NUM_THREADS="1"),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            kc = km.client()
            kc.start_channels()
            kc.wait_for_ready(timeout=60)
            kc.execute_interactive("import torch, encdec", timeout=60)
            kc.stop_channels()
            km.shutdown_kernel()
        times.append(time.perf_counter() - t)
        shutil.rmtree(work, ignore_errors=True)
    return statistics.median(times)


def scores(course: Path) -> dict[tuple[str, str], float]:
    from nbgrader.api import Gradebook

    from autograder.taskqueue.course import coursedir_for, load_config

    cd = coursedir_for(load_config(course))
    out = {}
    with Gradebook(cd.db_url, cd.course_id) as gb:
        for a in ASSIGNMENTS:
            for sub in gb.find_assignment(a).submissions:
                for nb in sub.notebooks:
                    out[(sub.student.id, nb.name)] = float(nb.score)
    return out


def queue_run(course: Path, url: str, workers: int, *worker_args: str) -> tuple[float, float]:
    """Seconds from enqueue to the last result applied, with `workers` RQ workers (burst mode), and
    the seconds the workers were busy with jobs."""
    from redis import Redis

    Redis.from_url(url).flushdb()  # a fresh queue for each run
    q = [PY, "-m", "autograder.taskqueue", "--redis", url]
    t = time.perf_counter()
    subprocess.run([*q, "enqueue", *ASSIGNMENTS], cwd=course, capture_output=True, check=True)
    procs = [
        subprocess.Popen(
            [*q, "worker", "--burst", *worker_args, "--name", f"b{workers}-{i}"],
            cwd=course,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for i in range(workers)
    ]
    subprocess.run([*q, "collect", *ASSIGNMENTS, "--wait"], cwd=course, capture_output=True)
    elapsed = time.perf_counter() - t
    for p in procs:
        p.wait()
    return elapsed, busy_seconds(url)


def busy_seconds(url: str) -> float:
    """The workers' busy time: the sum of every finished job's run time, as RQ recorded it."""
    from redis import Redis
    from rq import Queue
    from rq.job import Job
    from rq.registry import FinishedJobRegistry

    conn = Redis.from_url(url)
    ids = FinishedJobRegistry(queue=Queue("grading", connection=conn)).get_job_ids()
    return sum((j.ended_at - j.started_at).total_seconds() for j in Job.fetch_many(ids, connection=conn) if j)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=20)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-grading-"))
    try:
        picks = batch(args.students)
        n = len(picks)
        stock, stock_bwrap, ours, queue1, queue2, queue2s = (
            make_course(tmp / n) for n in ("stock", "stock_bwrap", "driver", "queue1", "queue2", "queue2s")
        )
        for course in (stock, stock_bwrap, ours, queue1, queue2, queue2s):
            submit(course, picks)
        print(
            f"batch: {args.students} students, {n} notebooks "
            f"({sum(1 for s in picks.values() if s and '_bug_' not in s.parent.name)} correct, "
            f"{sum(1 for s in picks.values() if s and '_bug_' in s.parent.name)} one-bug, "
            f"{sum(1 for s in picks.values() if s is None)} stubs); {os.cpu_count()} CPUs"
        )

        floor_plain = floor("plain", tmp)
        floor_bwrap = floor("bwrap", tmp)
        floor("zygote", tmp, repeat=1)  # starts the zygote
        floor_zygote = floor("zygote", tmp)
        print(
            f"floor (kernel start + import torch, encdec + shutdown, median of 3): plain ipykernel "
            f"{floor_plain:.2f} s, sandbox (fresh bwrap) {floor_bwrap:.2f} s, sandbox (zygote) {floor_zygote:.2f} s"
        )

        def stock_run(course: Path, prefork: str) -> float:
            env = dict(os.environ, ENCDEC_SANDBOX_PREFORK=prefork)
            t = time.perf_counter()
            for a in ASSIGNMENTS:
                subprocess.run([PY, "-m", "nbgrader", "autograde", a], cwd=course, capture_output=True, env=env)
            return time.perf_counter() - t

        t_stock_bwrap = stock_run(stock_bwrap, "0")
        t_stock = stock_run(stock, "1")

        t = time.perf_counter()
        run = subprocess.run(
            [PY, "-m", "autograder.driver", *ASSIGNMENTS, "--workers", str(args.workers)],
            cwd=ours,
            capture_output=True,
            text=True,
        )
        t_ours = time.perf_counter() - t

        sys.path.insert(0, str(ROOT / "tests"))
        from redis_server import redis_server

        with redis_server() as url:
            t_queue1 = queue_run(queue1, url, 1)
            t_queue2 = queue_run(queue2, url, 2)
            t_queue2s = queue_run(queue2s, url, 2, "--simple")

        runs = [scores(c) for c in (stock, stock_bwrap, ours, queue1, queue2, queue2s)]
        keys = set().union(*runs)
        differ = sorted(k for k in keys if len({r.get(k) for r in runs}) != 1)
        per_ours = t_ours * args.workers / n
        for name, t_run in [
            ("stock nbgrader autograde, fresh bwrap per kernel", t_stock_bwrap),
            ("stock nbgrader autograde, zygote (default)    ", t_stock),
        ]:
            print(f"{name}: {t_run:7.1f} s  ({n / t_run * 60:5.1f} notebooks/min, {t_run / n:.2f} s per notebook)")
        print(
            f"autograder.driver, {args.workers} workers, zygote                 : {t_ours:7.1f} s  "
            f"({n / t_ours * 60:5.1f} notebooks/min, {per_ours:.2f} worker-s per notebook)"
        )
        for k, kind, (t_q, busy) in ((1, "forking", t_queue1), (2, "forking", t_queue2), (2, "simple ", t_queue2s)):
            print(
                f"autograder.taskqueue (RQ), {k} {kind} worker{'s' if k > 1 else ' '}, collect writes: {t_q:7.1f} s  "
                f"({n / t_q * 60:5.1f} notebooks/min, {t_q * k / n:.2f} worker-s per notebook, "
                f"{busy / n:.2f} s busy in jobs)"
            )
        print(f"stock nbgrader (zygote), 1 process: {t_stock / n:.2f} worker-s per notebook")
        print(
            f"queue's default (forking) workers, worker-s per notebook / the driver's ({args.workers} workers): "
            f"2 workers {t_queue2[0] * 2 / n / per_ours:.2f}x, 1 worker {t_queue1[0] / n / per_ours:.2f}x "
            f"(target <= 1.2x)"
        )
        print(
            f"throughput ratio: driver / stock with fresh bwrap {t_stock_bwrap / t_ours:.2f}x, "
            f"driver / stock with zygote {t_stock / t_ours:.2f}x"
        )
        print(
            f"a class of {CLASS_NOTEBOOKS:,} notebooks at this run's throughput: driver "
            f"{CLASS_NOTEBOOKS * t_ours / n / 60:.0f} min, queue (2 forking workers) "
            f"{CLASS_NOTEBOOKS * t_queue2[0] / n / 60:.0f} min, stock (zygote) "
            f"{CLASS_NOTEBOOKS * t_stock / n / 60:.0f} min (target <= {CLASS_MINUTES} min, driver and queue)"
        )
        print(
            f"cost per notebook / plain floor: driver {per_ours / floor_plain:.2f}x, stock with zygote "
            f"{t_stock / n / floor_plain:.2f}x, stock with fresh bwrap {t_stock_bwrap / n / floor_plain:.2f}x "
            f"(target <= 1.5x)"
        )
        print(
            f"same scores in all six runs: {'yes' if not differ else 'NO: ' + str(differ[:5])} "
            f"({len(runs[2])} notebooks graded)"
        )
        if run.returncode not in (0, 1):
            print(run.stdout[-2000:], run.stderr[-2000:])
        return 0 if not differ else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
