"""Grading at course scale: one grading unit (one student x one assignment), one writer of the
gradebook, and an RQ job queue that runs the unit on workers of any host.

    python -m autograder.taskqueue grade <assignment>...      # enqueue, then collect until done
    python -m autograder.taskqueue worker                     # an RQ worker (or: rq worker grading)

One module per part: `course.py` (nbgrader's loaded configuration, the folders it names, the
results store, fingerprints), `seed.py` (an assignment's definition as data, and a throwaway
gradebook seeded with it), `unit.py` (the unit: stock `Autograde` into a private folder, the
result published by one rename), `writer.py` (the single writer of the course gradebook, through
nbgrader's public API, idempotent), `jobs.py` (the unit as an RQ job: enqueue, collect), `cli.py`.
The local driver (`autograder.driver`) runs the same unit in a process pool.
"""
