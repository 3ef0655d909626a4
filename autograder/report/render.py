"""The class report as rows, CSV and one static HTML page.

One row per assignment, graded item and label (``autograder.judge.labels``): how many students
got it, their mean score on the item and one anonymised example of the feedback they read. A
notebook that could not be read is a row of its own. The HTML page is self-contained (inline
style, no script, no remote resource; a content security policy forbids both), and every piece of
text in it is escaped: the examples quote student code's output, which is untrusted.
"""

from __future__ import annotations

import csv
import html
from dataclasses import dataclass
from pathlib import Path

from autograder.judge.labels import PASSED, describe, kind

from .collect import Assignment, anonymise, anonymous_names

NOTEBOOK_ITEM = "(whole notebook)"
COLUMNS = [
    "assignment",
    "item",
    "points",
    "label",
    "kind",
    "meaning",
    "students",
    "of_students",
    "mean_score",
    "example_student",
    "example",
]


@dataclass
class Row:
    assignment: str
    item: str
    points: float | None
    label: str
    students: int
    of_students: int
    mean_score: float | None
    example_student: str
    example: str

    def as_dict(self, lang: str = "en") -> dict[str, str]:
        return {
            "assignment": self.assignment,
            "item": self.item,
            "points": "" if self.points is None else f"{self.points:g}",
            "label": self.label,
            "kind": kind(self.label) if self.item != NOTEBOOK_ITEM else "unreadable",
            "meaning": describe(self.label, lang) if self.item != NOTEBOOK_ITEM else self.example,
            "students": str(self.students),
            "of_students": str(self.of_students),
            "mean_score": "" if self.mean_score is None else f"{self.mean_score:.3g}",
            "example_student": self.example_student,
            "example": self.example,
        }


def rows(assignments: list[Assignment]) -> list[Row]:
    """Every (assignment, item, label) with its count and one example, students anonymised."""
    names = anonymous_names(s for a in assignments for s in a.students)
    out = []
    for a in assignments:
        for item in a.items:
            outcomes = a.outcomes.get(item.grade_id, [])
            groups: dict[str, list] = {}
            for o in sorted(outcomes, key=lambda o: int(names[o.student].split()[-1])):
                groups.setdefault(o.label, []).append(o)
            order = sorted(groups, key=lambda lab: (lab != PASSED, -len(groups[lab]), lab))
            for label in order:
                group = groups[label]
                scores = [o.score for o in group if o.score is not None]
                first = group[0]
                out.append(
                    Row(
                        a.name,
                        item.grade_id,
                        item.points,
                        label,
                        len(group),
                        len(outcomes),
                        sum(scores) / len(scores) if scores else None,
                        names[first.student],
                        anonymise(first.text, names),
                    )
                )
        for p in a.problems:
            out.append(
                Row(a.name, NOTEBOOK_ITEM, None, "unreadable", 1, 1, None, names[p.student], anonymise(p.what, names))
            )
    return out


@dataclass
class KeyCount:
    """One mistake's key over a whole assignment: how many students made it, on how many items."""

    assignment: str
    label: str
    students: int
    of_students: int
    items: tuple[str, ...]


KEY_COLUMNS = ["assignment", "label", "kind", "meaning", "students", "of_students", "items"]


def by_key(assignments: list[Assignment]) -> list[KeyCount]:
    """Per assignment, every misconception key and observation a student got on any item, the most
    common first: a student counts once per key, however many items showed it."""
    out = []
    for a in assignments:
        who: dict[str, set[str]] = {}
        where: dict[str, set[str]] = {}
        for item, outcomes in a.outcomes.items():
            for o in outcomes:
                if kind(o.label) in ("named", "observed"):
                    who.setdefault(o.label, set()).add(o.student)
                    where.setdefault(o.label, set()).add(item)
        for label in sorted(who, key=lambda lab: (-len(who[lab]), lab)):
            out.append(KeyCount(a.name, label, len(who[label]), len(a.students), tuple(sorted(where[label]))))
    return out


def write_csv(path: Path, report: list[Row], lang: str = "en") -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for row in report:
            w.writerow({k: _csv_safe(v) for k, v in row.as_dict(lang).items()})


def write_key_csv(path: Path, counts: list[KeyCount], lang: str = "en") -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=KEY_COLUMNS)
        w.writeheader()
        for c in counts:
            w.writerow(
                {
                    "assignment": c.assignment,
                    "label": c.label,
                    "kind": kind(c.label),
                    "meaning": _csv_safe(describe(c.label, lang)),
                    "students": str(c.students),
                    "of_students": str(c.of_students),
                    "items": " ".join(c.items),
                }
            )


def _csv_safe(value: str) -> str:
    """A spreadsheet runs a cell that starts with = + - @ as a formula: quote student text out of it."""
    return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


_STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:75em;color:#222}
table{border-collapse:collapse;width:100%;margin-bottom:2em}th,td{border:1px solid #ccc;padding:.3em .5em;
vertical-align:top;text-align:left}th{background:#f0f0f0}td.n{text-align:right;white-space:nowrap}
tr.passed td{background:#f3faf3}tr.named td.label{color:#8a1c1c}tr.observed td.label{color:#8a5a00}
td:first-child,td:last-child summary{white-space:nowrap}
pre{white-space:pre-wrap;font-size:.85em;margin:.3em 0;max-height:30em;overflow:auto}code{font-size:.95em}"""


def write_html(path: Path, report: list[Row], assignments: list[Assignment], lang: str = "en") -> None:
    e = html.escape
    counts = by_key(assignments)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        # no script, no remote resource, no form, even if escaping were ever missed
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        "form-action 'none'; base-uri 'none'\">",
        "<title>Misconception report</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>Misconception report</h1>",
        "<p>Per assignment and graded item: how many students got each verdict (passed, a named "
        "misconception, an observation the grader could not name, or another failure), their mean score on "
        "the item, and the feedback one of them read. Students are numbered anonymously, the same number "
        "across assignments. Each assignment opens with its mistakes by key, the most common first.</p>",
    ]
    for a in assignments:
        mine = [r for r in report if r.assignment == a.name]
        parts.append(
            f"<h2>{e(a.name)}</h2><p>{len(a.students)} student(s); {len(a.problems)} notebook(s) could not be read.</p>"
        )
        keys = [c for c in counts if c.assignment == a.name]
        if keys:
            parts.append("<table><thead><tr><th>mistake (key)</th><th>students</th><th>items</th></tr></thead><tbody>")
            for c in keys:
                parts.append(
                    f'<tr class="{e(kind(c.label))}"><td class="label"><code>{e(c.label)}</code><br>'
                    f'{e(describe(c.label, lang))}</td><td class="n">{c.students} of {c.of_students}</td>'
                    f"<td>{e(', '.join(c.items))}</td></tr>"
                )
            parts.append("</tbody></table>")
        parts.append(
            "<table><thead><tr><th>item</th><th>verdict</th><th>students</th><th>mean score</th>"
            "<th>example</th></tr></thead><tbody>"
        )
        for r in mine:
            d = r.as_dict(lang)
            item = e(r.item) + (f" <small>({e(d['points'])} pt)</small>" if d["points"] else "")
            verdict = f"<code>{e(r.label)}</code><br>{e(d['meaning'])}"
            parts.append(
                f'<tr class="{e(d["kind"])}"><td>{item}</td><td class="label">{verdict}</td>'
                f'<td class="n">{r.students} of {r.of_students}</td><td class="n">{e(d["mean_score"])}</td>'
                f"<td><details><summary>{e(r.example_student)}</summary><pre>{e(r.example)}</pre>"
                "</details></td></tr>"
            )
        parts.append("</tbody></table>")
    parts.append("</body></html>")
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")
