"""Issue 10, correctness: no claim the record does not support, ch13's counts and wording, the
book's configuration, and an instructor guide whose commands and regex work.

Fast: reads the markdown sources, builds nothing (helpers in book_pages.py).
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from book_pages import ALL_PAGES, NOTEBOOK_PAGES, PACKAGE, ROOT, paragraphs, read


def test_no_page_announces_a_lesson_the_book_does_not_have():
    for page in ALL_PAGES:
        for para in paragraphs(read(page)):
            if re.search(r"next lesson|next chapter", para, flags=re.I):
                assert "{doc}`" in para, f"{page} announces a next lesson without linking it: {para[:120]!r}"


def test_historical_claims_stay_within_the_record():
    notes = read("historical_notes")
    for claim in ("failed even correct solutions", "a correct block does not pass", "counted only the last batch"):
        assert claim not in notes, f"historical_notes claims {claim!r}, which lesson cards 11 and 12 do not record"
    ch12 = read("ch12_what_you_trained")
    assert "the same model and schedule as the notebook" not in ch12
    assert "measured\nlike the notebook's figure" not in ch12 and "measured like the notebook's figure" not in ch12
    assert "five things the original assignment notebook got wrong" not in read("index")


def test_ch13_decoder_steps_and_token_counts_agree():
    """The "Decoder step k" list feeds k tokens at step k, and the Q example names its step and its size."""
    text = read("ch13_generation")
    steps = re.findall(r"\*\*Decoder step (\d):\*\* input `\[([^\]]*)\]`", text)
    assert [int(k) for k, _ in steps] == [1, 2, 3]
    for k, tokens in steps:
        assert len(tokens.split(",")) == int(k), f"decoder step {k} feeds {tokens!r}"
    example = " ".join(text.split())
    m = re.search(
        r"predicts the (\w+) token \(decoder step (\d) in the flow below\), its input is `\[([^\]]*)\]`, (\w+) "
        r"tokens; .*? a `\[(\d), 512\]` matrix",
        example,
    )
    assert m, "ch13: the sentence on the decoder input (the source of Q) is missing"
    ordinal, step, tokens, count, rows = m.groups()
    assert dict(steps)[step] == tokens, "the Q example's input differs from the step list"
    n = len(tokens.split(","))
    assert ["first", "second", "third"].index(ordinal) + 1 == int(step) == n == int(rows)
    assert count == ["one", "two", "three"][n - 1]


def test_prefill_wording_does_not_call_the_answer_prefix_the_prompt():
    js = "".join(
        (PACKAGE / "widgets" / name).read_text(encoding="utf-8") for name in ("prefill_decode.js", "prefill_run.js")
    )
    words = (PACKAGE / "widgets" / "strings" / "en.json").read_text(encoding="utf-8")  # the stepper's words
    for source, text in (("ch13", read("ch13_generation")), ("prefill_decode.js", js), ("strings/en.json", words)):
        assert "whole prompt" not in text and "feed the prompt" not in text, source
        assert "Far less computation than prefill" not in text, source
    assert "K = V = torch.randn" not in read("ch13_generation"), "K and V are projections of the memory"


def test_book_config_merges_streams_and_dates_the_footer():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["sphinx"]["config"]["nb_merge_streams"] is True
    assert str(config["copyright"]).startswith("2026"), "the footer would show Jupyter Book's default year"
    for page in NOTEBOOK_PAGES:
        assert "merge_streams" not in read(page), f"{page}: set merge_streams once, in _config.yml"


def test_zip_collect_regex_gives_nbgrader_the_groups_it_requires():
    from nbgrader.plugins.zipcollect import FileNameCollectorPlugin

    guide = read("instructor_guide")
    regex = re.search(r'named_regexp = r"([^"]+)"', guide).group(1)
    example = re.search(r"`(decoder_block_\w+_attempt_[0-9-]+_\w+\.ipynb)`", guide).group(1)
    found = FileNameCollectorPlugin(named_regexp=regex).collect(
        f"/srv/course/downloaded/decoder_block/extracted/{example}"
    )
    assert found and {"student_id", "file_id"} <= set(found), f"{regex!r} gives {found}"
    released = ROOT / "exercises" / "decoder_block" / (Path(found["file_id"]).stem + ".ipynb")
    assert released.is_file(), f"file_id {found['file_id']!r} names no released notebook"
    assert found["student_id"] == "jdoe"


def test_instructor_guide_commands_exist():
    guide = read("instructor_guide")
    targets = set()
    for mk in [ROOT / "Makefile", *(ROOT / "mk").glob("*.mk")]:
        targets |= set(re.findall(r"^([\w-]+):", mk.read_text(), flags=re.M))
    named = set(re.findall(r"make ([\w-]+)", guide))
    assert {"system", "sandbox-check", "exercises", "grading-test"} <= named, named
    assert named <= targets, f"the guide names make targets that do not exist: {named - targets}"
    for path in set(re.findall(r"tests/test_\w+\.py", guide)):
        assert (ROOT / path).is_file(), path


def test_bulk_downloads_are_ignored_by_git():
    import subprocess

    probe = "downloaded/decoder_block/archive/submissions.zip"
    result = subprocess.run(["git", "check-ignore", "-q", probe], cwd=ROOT)
    assert result.returncode == 0, f"{probe} is not ignored: student work could be committed"
