"""An assignment's definition (its notebooks and their grade, solution, source and task cells) as
plain data, read from the course gradebook and written into a task's throwaway gradebook, both
through nbgrader's public `Gradebook` API. The writer reads it once and ships it with every task,
so a worker never opens the course gradebook."""

from __future__ import annotations

import datetime as dt


def definition(db_url: str, course_id: str, assignment: str) -> dict:
    """The assignment as the course gradebook holds it (what `nbgrader generate_assignment` saved)."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(db_url, course_id) as gb:
        try:
            a = gb.find_assignment(assignment)
        except MissingEntry:
            raise SystemExit(
                f"assignment {assignment!r} is not in the gradebook: run "
                f"`nbgrader generate_assignment {assignment}` first"
            ) from None
        return {
            "name": a.name,
            "duedate": a.duedate.isoformat() if a.duedate else None,
            "notebooks": [
                {
                    "name": nb.name,
                    "kernelspec": nb.kernelspec,
                    "grade_cells": [
                        {"name": c.name, "max_score": c.max_score, "cell_type": c.cell_type} for c in nb.grade_cells
                    ],
                    "task_cells": [
                        {"name": c.name, "max_score": c.max_score, "cell_type": c.cell_type} for c in nb.task_cells
                    ],
                    "solution_cells": [{"name": c.name} for c in nb.solution_cells],
                    "source_cells": [
                        {
                            "name": c.name,
                            "cell_type": c.cell_type,
                            "locked": c.locked,
                            "source": c.source,
                            "checksum": c.checksum,
                        }
                        for c in nb.source_cells
                    ],
                }
                for nb in sorted(a.notebooks, key=lambda n: n.name)
            ],
        }


def notebooks(spec: dict) -> list[str]:
    return [nb["name"] for nb in spec["notebooks"]]


def seed(db_url: str, course_id: str, spec: dict) -> None:
    """Create the assignment of `spec` in a (new, empty) gradebook."""
    from nbgrader.api import Gradebook

    name = spec["name"]
    due = dt.datetime.fromisoformat(spec["duedate"]) if spec["duedate"] else None
    with Gradebook(db_url, course_id) as gb:
        gb.update_or_create_assignment(name, duedate=due)
        for nb in spec["notebooks"]:
            gb.update_or_create_notebook(nb["name"], name, kernelspec=nb["kernelspec"])
            for c in nb["grade_cells"]:
                gb.update_or_create_grade_cell(
                    c["name"], nb["name"], name, max_score=c["max_score"], cell_type=c["cell_type"]
                )
            for c in nb["task_cells"]:
                gb.update_or_create_task_cell(
                    c["name"], nb["name"], name, max_score=c["max_score"], cell_type=c["cell_type"]
                )
            for c in nb["solution_cells"]:
                gb.update_or_create_solution_cell(c["name"], nb["name"], name)
            for c in nb["source_cells"]:
                gb.update_or_create_source_cell(
                    c["name"],
                    nb["name"],
                    name,
                    cell_type=c["cell_type"],
                    locked=c["locked"],
                    source=c["source"],
                    checksum=c["checksum"],
                )
