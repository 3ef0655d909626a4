"""What a structure run may cost (the kv_cache structure items, chapter 13).

A cached and an uncached decoder return the same tokens, so "the encoder runs once", "one new token
per decoder step" and "the prefill is one call" are judged by what the kernel had to compute: the
grader reads the kernel's CPU time from outside it (its cgroup, else its process tree:
``GradedExecute._cpu``) around the test cell, on inputs where the wrong structure
costs ten times the lesson's or more (``run_draws.RUNS``; ``bench/bench_structure.py`` prints the
ratios). The bound is calibrated on the same machine, within the minute: before the first run of its
sizes in the notebook, the grader times the package's own structure on those inputs, unless it did in
the last ``FRESH`` seconds (the cost is the sizes':
EOS is never chosen, every row decodes every token), through the kernel's own path (the inputs file read,
the model built, the counters, the outputs packed), on one thread, in CPU time, and allows
``FACTORS[part]`` times that plus ``SLACK``. CPU time, not wall time: a loaded machine changes little, and
threads and child processes the kernel starts are counted with it.
"""

from __future__ import annotations

import time

from autograder.sandbox.policy import MALLOC
from encdec.grading import calls, wire

from .decode_draws import one_thread

# Per run, the room on both sides alike (bench_structure.py, quiet machine, times the lesson's): on
# "encoder" an honest float64 model costs 2.9-4.0 (its float64 scores suffer most on a busy machine:
# 6.5 seen under `make test`) and a wrong structure 25; on "cache" honest styles 1.6, wrong 17.7; on
# "prefill" honest 3.2, wrong 11.1 (where SLACK alone is some 4 times the lesson's). Each bound is
# then at least twice the dearest honest style and under three quarters of the cheapest wrong structure.
FACTORS = {"encoder": 8.0, "cache": 5.0, "prefill": 4.0}
SLACK = 0.2  # s: the kernel's own work around the call (the inputs file, IPython, its messages: up to 0.12 s seen)
# s: a timing of the lesson on some sizes serves this process's next notebooks for so long. Timing it
# costs about 1 CPU-s a kv_cache notebook (a quarter of its grading); the machine's speed for one
# thread's CPU time changes little within a minute, and never with what a student hands in.
FRESH = 60.0
_TIMED: dict[object, tuple[float, float]] = {}  # key -> (when, by time.monotonic; CPU seconds)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameters (malloc.h)


def steady_allocator() -> bool:
    """The graded kernels' allocator (``sandbox.policy.MALLOC``) in this process, the grader's, where
    the lesson is timed (mallopt, where the C library is glibc); False where it is not."""
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        return bool(
            libc.mallopt(_M_MMAP_THRESHOLD, MALLOC["mmap_threshold"])
            and libc.mallopt(_M_TRIM_THRESHOLD, MALLOC["trim_threshold"])
        )
    except (OSError, AttributeError):
        return False


def lesson_cpu(check, inputs: dict, key: object = None) -> float:
    """CPU seconds of the package's own structure (``check.lesson``) on ``inputs``, through the
    kernel's path, on one thread: the lesser of two timings (the first may pay for the heap to grow).
    With a ``key`` (the sizes: the cost is theirs), a timing this process made under the same key
    less than ``FRESH`` seconds ago is used again."""
    if key is not None and key in _TIMED and time.monotonic() - _TIMED[key][0] < FRESH:
        return _TIMED[key][1]
    cpu = _time_lesson(check, inputs)
    if key is not None:
        _TIMED[key] = (time.monotonic(), cpu)
    return cpu


def _time_lesson(check, inputs: dict) -> float:
    from . import wire_bytes

    data = wire_bytes(check.id, inputs)
    steady_allocator()

    def once() -> float:
        start = time.thread_time()
        meta, arrays = wire.loads(data, "inputs.npz")
        wire.to_bytes({"status": "ok"}, calls.call(meta, arrays, check.lesson))
        return time.thread_time() - start

    with one_thread():
        return min(once(), once())


def bound(lesson: float, part: str) -> float:
    """The CPU seconds a run of ``part`` (``run_draws.RUNS``) may use, from the lesson's."""
    return FACTORS[part] * lesson + SLACK
