"""A student's name in the gradebook from their account (autograder/roster.py): a plain full name
is split into first and last name, a name the gradebook already holds is kept, and a full name
that is not plain text (markup above all: the formgrader writes names into its pages unescaped;
a formula for a spreadsheet) leaves the student without a name. No student is ever created. The hub's round trip (tests/test_hub.py) does the same with
real accounts, through nbgrader, the formgrader's button and the formgrader's page."""

from __future__ import annotations

import pwd

import pytest
from nbgrader.api import Gradebook

from autograder import roster

PLAIN = ["Ada Lovelace", "Jean-Luc O'Brien", "José Núñez", "Zoë d\u2019Arc", "李雷", "J. R. R. Tolkien", "Plato"]
NOT_PLAIN = [
    "<img src=x onerror=alert(1)>",
    "Ada & Bob",
    "Ada\tLovelace",
    "Ada\u202eecalevoL",
    "Ada `x`",
    "[x](javascript:alert(1))",
    "Ada $x$",
    "",
    "A" * 129,
    "Ada\u200bLovelace",
    "Ada; Bob",
]


def account(gecos: str):
    return pwd.struct_passwd(("u", "x", 1000, 1000, gecos, "/home/u", "/bin/sh"))


@pytest.fixture
def accounts(monkeypatch):
    """Student id -> GECOS of the accounts the test pretends exist."""
    known: dict[str, str] = {}

    def getpwnam(name):
        if name not in known:
            raise KeyError(name)
        return account(known[name])

    monkeypatch.setattr(roster.pwd, "getpwnam", getpwnam)
    return known


@pytest.mark.parametrize("name", PLAIN)
def test_a_plain_full_name_is_taken(accounts, name):
    accounts["s"] = f"{name},room 1,555-0100,,"  # GECOS: the full name, then the other fields
    first, _, last = name.rpartition(" ")
    assert roster.account_name("s") == (first, last)


@pytest.mark.parametrize("name", NOT_PLAIN)
def test_a_full_name_that_is_not_plain_is_left_out(accounts, name):
    accounts["s"] = name
    assert roster.account_name("s") is None


def test_no_account_and_runs_of_spaces(accounts):
    assert roster.account_name("nobody-here") is None
    assert roster.account_name("a\0b") is None
    accounts["s"] = "  Ada   Lovelace  "
    assert roster.account_name("s") == ("Ada", "Lovelace")


@pytest.mark.parametrize("name", ["-Ada Lovelace", "'Ada", ".Ada", "\u0301Ada", "Ada=1"])
def test_a_name_a_spreadsheet_could_read_as_a_formula_is_left_out(accounts, name):
    accounts["s"] = name
    assert roster.account_name("s") is None


def test_fill_names_students_of_the_gradebook_only_and_keeps_a_roster(accounts, tmp_path):
    accounts.update({"ada": "Ada Lovelace", "bob": "Bob Baker", "eve": "<script>x</script>", "zed": "Zed Z"})
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gb:
        gb.add_student("bob", first_name="Robert", last_name="Baker-Smith")  # the instructor's roster
        for student in ("ada", "eve"):
            gb.add_student(student)
        roster.fill(gb, ["ada", "bob", "eve", "zed", "*"])
        names = {s.id: (s.first_name, s.last_name) for s in gb.students}
    assert names == {"ada": ("Ada", "Lovelace"), "bob": ("Robert", "Baker-Smith"), "eve": (None, None)}


def test_autograde_names_the_student_it_grades_and_adds_no_row(accounts, tmp_path):
    """The step names the student of the notebook being graded, and nobody else; a student the
    gradebook does not hold is not created (an export's rows stay what they were)."""
    accounts.update({"ada": "Ada Lovelace", "bob": "Bob Baker", "cy": "Cy Young"})
    db_url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with Gradebook(db_url) as gb:
        for student in ("ada", "bob"):
            gb.add_student(student)
    step = roster.NameStudent()
    for student in ("ada", "cy"):
        step.preprocess(None, {"nbgrader": {"student": student, "db_url": db_url}})
    with Gradebook(db_url) as gb:
        assert {s.id: (s.first_name, s.last_name) for s in gb.students} == {
            "ada": ("Ada", "Lovelace"),
            "bob": (None, None),
        }
