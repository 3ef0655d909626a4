"""`python -m autograder.integrity report|scan`: list flagged submissions, scan notebooks offline."""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from .review import FIELDS, course_db_url, flagged_submissions
from .scan import scan_notebook

DESCRIPTION = "Integrity flags: submissions whose code reaches into the grader's machinery, marked for review."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.integrity", description=DESCRIPTION)
    commands = parser.add_subparsers(dest="command", required=True)
    report = commands.add_parser("report", help="list every flagged submission in the gradebook")
    report.add_argument("--db-url", help="gradebook URL (default: the course's, from nbgrader_config.py)")
    report.add_argument("--csv", type=Path, help="also write the list to this CSV file")
    scan = commands.add_parser("scan", help="scan notebooks without a gradebook")
    scan.add_argument("notebooks", nargs="+", type=Path)
    args = parser.parse_args(argv)

    if args.command == "scan":
        import nbformat

        for path in args.notebooks:
            for flag in scan_notebook(nbformat.read(path, as_version=4)):
                print(f"{path}: {flag.cell}: {flag.reason}")
        return 0

    db_url = args.db_url or course_db_url()
    if db_url.startswith("sqlite:///") and not Path(db_url[len("sqlite:///") :]).is_file():
        print(f"no gradebook at {db_url}", file=sys.stderr)  # do not create an empty one
        return 1
    rows = flagged_submissions(db_url)
    for row in rows:
        review = "needs manual grade" if row["needs_manual_grade"] else "reviewed"
        print(f"{row['assignment']}\t{row['student']}\t{row['notebook']}\t{row['reasons']}\t({review})")
    print(f"{len(rows)} flagged submission(s) in {db_url}", file=sys.stderr)
    if args.csv:
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        with args.csv.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=FIELDS)
            writer.writeheader()
            writer.writerows(rows)
    return 0
