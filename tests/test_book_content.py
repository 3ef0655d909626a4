"""The book's pages carry every section of their lesson seeds, import the package instead of
redefining it, and show package code only through ``literalinclude`` targets that exist.

Fast: reads the markdown sources, builds nothing.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
PACKAGE = ROOT / "encdec"

NOTEBOOK_PAGES = ["ch11_cross_attention", "ch12_what_you_trained", "ch13_generation", "historical_notes"]
ALL_PAGES = ["index", *NOTEBOOK_PAGES, "instructor_guide"]

# The sections of each seed, in the seed's order (a heading must start with each entry).
EXPECTED_SECTIONS = {
    "ch11_cross_attention": [
        "30-second recall",
        "Before we start",
        "The problem",
        "Stage 1",
        "Stage 2",
        "Stage 3",
        "Cross-attention in the trained model",
        "Thought experiment in reverse",
        "Your code",
        "Why do we still need the residual",
        "Misconception diagnosis",
        "Deep dive",
        "End-of-lesson deep checks",
        "Transfer questions",
        "Closed-book explanations",
        "Then I implemented",
        "Summary",
        "Further reading",
        "Connection",
    ],
    "ch12_what_you_trained": [
        "30-second recall",
        "Before we start",
        "The problem",
        "Shift, mask and teacher forcing are not synonyms",
        "Why can training run in parallel",
        "Worked backward",
        "Who trains, and who does not",
        "Your code",
        "Historical experiment evidence",
        "Misconception diagnosis",
        "Deep dive",
        "End-of-lesson deep checks",
        "Transfer questions",
        "Closed-book explanations",
        "Then I implemented",
        "Summary",
        "Further reading",
        "Connection",
    ],
    "ch13_generation": [
        "30-second recall",
        "Before we start",
        "Attention: what one forward call does",
        "Inference",
        "Why is the output",
        "The key technique: causal masking",
        "Training: teacher forcing",
        "Encoder–decoder",
        "1. What is right",
        "2. The puzzle",
        "3. The corrected flow",
        "The KV cache",
        "Measured",
        "End-of-lesson deep checks",
        "Transfer questions",
        "Closed-book explanations",
        "Summary",
        "Further reading",
    ],
    "historical_notes": [
        "1. Its `DecoderBlock` check and the repository's block disagree",
        "2. Its \"sinusoid\" formula collapsed",
        "3. Its saved accuracy does not say what it averages",
        "4. Its inference ran the decoder without the causal mask",
        "5. About 1 in 5 validation questions also appeared in training",
    ],
    "index": ["For students", "For instructors"],
    "instructor_guide": ["Before grading: prerequisites", "1. Generate and release", "2. Collect", "3. Autograde",
                         "4. Feedback", "5. Export"],
}

# Inline checks and recall questions whose answers must sit in folded dropdowns.
MIN_DROPDOWNS = {"ch11_cross_attention": 10, "ch12_what_you_trained": 10, "ch13_generation": 8}

# The seed's numbers, each computed by a code cell (a fragment of the computing code must appear).
LIVE_COMPUTATIONS = {
    "ch11_cross_attention": [
        'load_run("modern")',
        "get_subsequent_mask(ans_b)",
        "masked_softmax(scores, row_mask)",
        ".last_attention",
        "A[:, 0, 3, 7]",
        "cross(enc_states, dec_states, dec_states)",  # reversed Q: (N, Kq, Ka)
        "torch.randn(1, 196, M)",  # captioning
        "attention_cross.forward = zero",  # cross-attention removed
        "causal | padding",
    ],
    "ch12_what_you_trained": [
        "shift_targets(ans_b)",
        "-math.log(0.20)",
        "-math.log(p_correct)",
        "F.one_hot",
        ".backward()",
        'load_run("overfit")',
        'load_run("historical")',
        "_optimizer(m, get_preset(preset)[1])",  # zero gradient is not "not updated"
        "exact_match(model, unseen_q, unseen_a)",
        '["history"]',  # the loss curve
        "model(q32, model.positions(9), a32, model.positions(5))",
    ],
    "ch13_generation": [
        "use_cache=True",
        "use_cache=False",
        "torch.equal(cached, uncached)",
        "Q @ K.T",
        "time.perf_counter()",
        "new_caches(model)",
    ],
    "historical_notes": [
        "position_encoding_sinusoid(K, M)",
        "int(2i / M)",
        "n_correct / total",
        "num_correct / total",
        "unseen_mask",
        "model.decoder(x, memory, None)",
    ],
}

WIDGETS = {
    # the softmax figure gets the cell's own scores; the stepper a multi-token answer prefix
    "ch11_cross_attention": ["MaskToggle()", "SoftmaxMaskCompare(scores=scores.tolist()", "CrossAttentionExplorer()",
                             "AttentionMapViewer.from_model(model)"],
    "ch12_what_you_trained": ["ShiftTeacherForcing()", "CrossEntropySlider()"],
    "ch13_generation": ['PrefillDecodeStepper.from_model(model, prefix="BOS POSITIVE")'],
}
for _chapter in ("ch11_cross_attention", "ch12_what_you_trained", "ch13_generation"):
    WIDGETS[_chapter].append("QuickCheck([")  # the quick checks of "Before we start"

FENCE = re.compile(r"^(`{3,}|~{3,})(.*)$")


def read(page: str) -> str:
    return (BOOK / f"{page}.md").read_text(encoding="utf-8")


def blocks(text: str) -> list[tuple[str, str, list[str]]]:
    """Top-level fenced blocks as (fence info, body); nested fences stay inside their parent."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info = m.group(1), m.group(2).strip()
        body, i = [], i + 1
        while i < len(lines) and lines[i].rstrip() != fence:
            body.append(lines[i])
            i += 1
        out.append((info, "\n".join(body), body))
        i += 1
    return out


def nested_blocks(text: str) -> list[tuple[str, str, list[str]]]:
    """Every fenced block, top-level or inside another (a literalinclude folded in a dropdown)."""
    out = []
    for info, body, lines in blocks(text):
        out.append((info, body, lines))
        out += nested_blocks(body)
    return out


def headings(text: str) -> list[str]:
    """Markdown headings outside fenced blocks (a `#` comment in a code cell is not a heading)."""
    found, fence = [], None
    for line in text.splitlines():
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
        elif fence is not None and line.rstrip() == fence:
            fence = None
        elif fence is None and line.startswith("#"):
            found.append(line.lstrip("#").strip())
    return found


CELL_OPTION = re.compile(r"\A(?::\w[\w-]*:.*\n)+\n?")  # leading `:tags: [...]` lines of a MyST cell


def code_cells(text: str) -> list[str]:
    return [CELL_OPTION.sub("", body) for info, body, _ in blocks(text) if info.startswith("{code-cell}")]


def package_names() -> tuple[set[str], set[str]]:
    """Classes and top-level functions the package defines."""
    classes, functions = set(), set()
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                classes.add(node.name)
            elif isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                functions.add(node.name)
    return classes, functions


def find_pyobject(path: Path, dotted: str) -> bool:
    """True when ``dotted`` (``name`` or ``Class.method``) is defined in the module at ``path``."""
    nodes = ast.parse(path.read_text(encoding="utf-8")).body
    for part in dotted.split("."):
        match = [n for n in nodes if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == part]
        if not match:
            return False
        nodes = match[0].body
    return True


def test_toc_lists_every_page():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]] + [ch["file"] for part in toc["parts"] for ch in part["chapters"]]
    mine = [f for f in files if f.removeprefix("book/") in ALL_PAGES]
    assert mine == [f"book/{p}" for p in ALL_PAGES], "the course pages are missing or out of order"
    for page in ALL_PAGES:
        assert (BOOK / f"{page}.md").is_file(), page


@pytest.mark.parametrize("page", NOTEBOOK_PAGES)
def test_notebook_pages_are_myst_notebooks(page):
    text = read(page)
    assert text.startswith("---\n"), f"{page}: no front matter"
    header = yaml.safe_load(text.split("---\n")[1])
    assert header["jupytext"]["text_representation"]["format_name"] == "myst"
    assert header["kernelspec"]["name"] == "python3"
    assert code_cells(text), f"{page}: no code cells"


@pytest.mark.parametrize("page", list(EXPECTED_SECTIONS))
def test_sections_in_seed_order(page):
    found = headings(read(page))
    position = -1
    for section in EXPECTED_SECTIONS[page]:
        hits = [i for i, h in enumerate(found) if h.startswith(section) and i > position]
        assert hits, f"{page}: section {section!r} missing or out of order (headings: {found})"
        position = hits[0]


@pytest.mark.parametrize("page", list(MIN_DROPDOWNS))
def test_answers_are_folded(page):
    dropdowns = [info for info, _, _ in blocks(read(page)) if info.startswith("{dropdown}")]
    assert len(dropdowns) >= MIN_DROPDOWNS[page], f"{page}: {len(dropdowns)} dropdowns"


@pytest.mark.parametrize("page", list(LIVE_COMPUTATIONS))
def test_seed_numbers_are_computed_by_cells(page):
    code = "\n".join(code_cells(read(page)))
    for fragment in LIVE_COMPUTATIONS[page]:
        assert fragment in code, f"{page}: no code cell computes {fragment!r}"


@pytest.mark.parametrize("page", list(WIDGETS))
def test_widgets_are_placed_where_they_teach(page):
    code = "\n".join(code_cells(read(page)))
    for widget in WIDGETS[page]:
        assert widget in code, f"{page}: widget {widget} not used"
        name = widget.split("(")[0].split(".")[0]
        assert re.search(rf"from encdec\.widgets import .*\b{name}\b", code), f"{page}: {name} not imported from encdec.widgets"


@pytest.mark.parametrize("page", NOTEBOOK_PAGES)
def test_code_cells_parse_and_never_redefine_the_package(page):
    classes, functions = package_names()
    assert {"DecoderBlock", "Transformer", "KVCache"} <= classes and "get_subsequent_mask" in functions
    for cell in code_cells(read(page)):
        tree = ast.parse(cell)  # every cell is valid Python
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                assert node.name not in classes, f"{page} redefines class {node.name}"
            if isinstance(node, ast.FunctionDef):
                assert node.name not in functions, f"{page} redefines function {node.name}"


@pytest.mark.parametrize("page", ALL_PAGES)
def test_literalincludes_point_at_package_objects(page):
    includes = [(info, body) for info, body, _ in nested_blocks(read(page)) if info.startswith("{literalinclude}")]
    for info, body in includes:
        target = (BOOK / info.split(None, 1)[1].strip()).resolve()
        assert target.is_file(), f"{page}: {target} does not exist"
        assert PACKAGE in target.parents, f"{page}: includes {target}, outside the package"
        options = dict(re.findall(r"^:(\w+):\s*(.*)$", body, flags=re.M))
        assert "pyobject" in options, f"{page}: literalinclude of {target.name} without :pyobject:"
        assert find_pyobject(target, options["pyobject"]), f"{page}: {options['pyobject']} not in {target.name}"


def test_chapters_show_the_lesson_code_through_literalinclude():
    expected = {
        "ch11_cross_attention": {("model.py", "DecoderBlock.forward"), ("attention.py", "get_subsequent_mask")},
        "ch12_what_you_trained": {("model.py", "Transformer.forward"), ("model.py", "shift_targets")},
        "ch13_generation": {("generate.py", "greedy_decode"), ("attention.py", "KVCache")},
        "historical_notes": {("model.py", "position_encoding_sinusoid")},
    }
    for page, wanted in expected.items():
        found = set()
        for info, body, _ in nested_blocks(read(page)):
            if info.startswith("{literalinclude}"):
                pyobject = re.search(r"^:pyobject:\s*(\S+)", body, flags=re.M)
                found.add((Path(info.split(None, 1)[1]).name, pyobject.group(1) if pyobject else None))
        assert wanted <= found, f"{page}: missing {wanted - found}"


def test_no_outputs_or_machine_paths_committed():
    """book/*.ipynb are the launch buttons' copies of the MyST notebooks: in step, without outputs."""
    import jupytext

    assert sorted(p.stem for p in BOOK.glob("*.ipynb")) == sorted(NOTEBOOK_PAGES + ["widgets_gallery"])
    for copy in BOOK.glob("*.ipynb"):
        nb, md = jupytext.read(copy), jupytext.read(copy.with_suffix(".md"))
        assert not any(c.get("outputs") for c in nb.cells), f"{copy.name} has outputs"
        assert [(c.cell_type, c.source) for c in nb.cells] == [(c.cell_type, c.source) for c in md.cells], \
            f"{copy.name} lags behind its .md: run `make book-notebooks`"
    for page in ALL_PAGES:
        text = read(page)
        for literal in ("/work/", "/tmp/", "/root/", "/home/"):
            assert literal not in text, f"{page} names a machine path {literal!r}"


def test_training_never_runs_at_build_time():
    for page in NOTEBOOK_PAGES:
        code = "\n".join(code_cells(read(page)))
        assert not re.search(r"(?<![.\w])train\(", code), f"{page} calls encdec.train.train"
        assert "torch.optim" not in code and "python -m encdec.train" not in code, f"{page} trains"


def test_cross_references_resolve():
    for page in ALL_PAGES:
        for target in re.findall(r"\{doc\}`([^`<]+?)(?:\s*<[^>]+>)?`", read(page)):
            assert (BOOK / f"{target.strip()}.md").is_file(), f"{page}: {{doc}}`{target}` points nowhere"


# Seed passages that are not headings (bold lead-ins, admonitions, named ideas).
SEED_PASSAGES = {
    "ch11_cross_attention": ["**Inline check.**", "Mental model · the encoder", "**What would I debug first today?**",
                             "historical caveat", "Then I implemented:", "Now I understand:"],
    "ch12_what_you_trained": ["**Inline check.**", "Mental model", "**Only the shift, no mask?**",
                              "**Only the mask, no shift?**", "exposure bias", "Then I implemented:", "Now I understand:"],
    "ch13_generation": ["`[a, b, c]`", "`[b, c, d]`", "**Prefill:**", "**Decode:**", "`[2, 512]`", "`[2, 4]`"],
}


@pytest.mark.parametrize("page", list(SEED_PASSAGES))
def test_seed_passages_present(page):
    text = read(page)
    for passage in SEED_PASSAGES[page]:
        assert passage in text, f"{page}: seed passage {passage!r} missing"


# --- issue 10, correctness: claims the record does not support, and the instructor guide ------------


def paragraphs(text: str) -> list[str]:
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", text)]


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
    m = re.search(r"predicts the (\w+) token \(decoder step (\d) in the flow below\), its input is `\[([^\]]*)\]`, (\w+) "
                  r"tokens; .*? a `\[(\d), 512\]` matrix", example)
    assert m, "ch13: the sentence on the decoder input (the source of Q) is missing"
    ordinal, step, tokens, count, rows = m.groups()
    assert dict(steps)[step] == tokens, "the Q example's input differs from the step list"
    n = len(tokens.split(","))
    assert ["first", "second", "third"].index(ordinal) + 1 == int(step) == n == int(rows)
    assert count == ["one", "two", "three"][n - 1]


def test_prefill_wording_does_not_call_the_answer_prefix_the_prompt():
    js = (PACKAGE / "widgets" / "prefill_decode.js").read_text(encoding="utf-8")
    for source, text in (("ch13", read("ch13_generation")), ("prefill_decode.js", js)):
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
    found = FileNameCollectorPlugin(named_regexp=regex).collect(f"/srv/course/downloaded/decoder_block/extracted/{example}")
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


# The package code of every exercise target: folded as the reference solution, after an exercise box.
EXERCISE_TARGETS = {
    "ch11_cross_attention": ("decoder_block", {"DecoderBlock.forward", "get_subsequent_mask", "masked_softmax"}),
    "ch12_what_you_trained": ("target_slicing", {"Transformer.forward", "shift_targets", "sequence_loss"}),
    "ch13_generation": ("kv_cache", {"KVCache", "greedy_decode"}),
}


@pytest.mark.parametrize("page", list(EXERCISE_TARGETS))
def test_exercise_targets_are_folded_reference_solutions(page):
    assignment, targets = EXERCISE_TARGETS[page]
    top = blocks(read(page))
    unfolded = {re.search(r"^:pyobject:\s*(\S+)", body, flags=re.M).group(1)
                for info, body, _ in top if info.startswith("{literalinclude}")}
    assert not targets & unfolded, f"{page} prints the answer unfolded: {targets & unfolded}"
    folded = [i for i, (info, _, _) in enumerate(top) if info.startswith("{dropdown}") and "Reference solution" in info]
    assert len(folded) == 1, f"{page}: expected one reference-solution dropdown"
    i = folded[0]
    shown = {re.search(r"^:pyobject:\s*(\S+)", body, flags=re.M).group(1)
             for info, body, _ in nested_blocks(top[i][1]) if info.startswith("{literalinclude}")}
    assert shown == targets, f"{page}: the reference solution shows {shown}, expected {targets}"
    info, body, _ = top[i - 1]  # the block right before the dropdown
    assert info.startswith("{admonition} Exercise"), f"{page}: no exercise box before the reference solution"
    link = re.search(r"\{download\}`[^`<]*<(\.\./exercises/[^>]+\.ipynb)>`", body)
    assert link and link.group(1) == f"../exercises/{assignment}/{assignment}.ipynb", f"{page}: box does not link the notebook"
    assert (BOOK / link.group(1)).resolve().is_file()


@pytest.mark.parametrize("page", ALL_PAGES)
def test_no_backtick_in_a_backtick_fence_title(page):
    """CommonMark ends such a fence's info string early: the directive renders as plain text, silently."""
    for line in read(page).splitlines():
        m = FENCE.match(line)
        if m and m.group(1).startswith("`"):
            assert "`" not in m.group(2), f"{page}: {line!r}"


# --- issue 10, teaching: quick checks the page marks, ch13's scaffolding, summaries, reading ------


@pytest.mark.parametrize("page", list(EXERCISE_TARGETS))
def test_quick_checks_are_page_marked_widgets(page):
    """'Before we start' holds one QuickCheck, input hidden (its code names the answers), with
    valid questions of both kinds."""
    section = read(page).split("## Before we start", 1)[1].split("\n## ", 1)[0]
    cells = [body for info, body, _ in blocks(section) if info.startswith("{code-cell}") and "QuickCheck([" in body]
    assert len(cells) == 1, f"{page}: expected one QuickCheck under 'Before we start', found {len(cells)}"
    assert re.match(r":tags: \[remove-input\]", cells[0]), f"{page}: the answers would show"
    tree = ast.parse(CELL_OPTION.sub("", cells[0]))
    namespace: dict = {}
    exec(compile(ast.Module(tree.body[:-1], []), page, "exec"), namespace)
    widget = eval(compile(ast.Expression(tree.body[-1].value), page, "eval"), namespace)
    assert len(widget.questions) >= 3 and {q["kind"] for q in widget.questions} == {"choice", "number"}
    assert all(q["explain"] for q in widget.questions), f"{page}: a quick check without its explanation"
    assert not re.search(r"\{dropdown\}", section), f"{page}: quick-check answers also printed in a dropdown"


def test_ch13_links_back_instead_of_reteaching_mask_and_teacher_forcing():
    text = read("ch13_generation")
    for heading, chapter in (("### The key technique: causal masking", "ch11_cross_attention"),
                             ("### Training: teacher forcing", "ch12_what_you_trained")):
        section = text.split(heading, 1)[1].split("\n#", 1)[0]
        prose = "\n".join(line for line in section.split("```")[0::2][0].splitlines())
        assert f"{{doc}}`{chapter}`" in prose, f"ch13 {heading!r} does not link {chapter}"
        assert len(prose.split()) <= 90, f"ch13 {heading!r} re-teaches ({len(prose.split())} words)"


@pytest.mark.parametrize("page", list(EXERCISE_TARGETS))
def test_chapters_end_with_summary_and_real_further_reading(page):
    text = read(page)
    summary = text.split("## Summary", 1)[1].split("\n## ", 1)[0]
    assert len(re.findall(r"^\d+\. ", summary, flags=re.M)) >= 3, f"{page}: the summary has fewer than 3 points"
    reading = text.split("## Further reading", 1)[1].split("\n## ", 1)[0]
    items = re.findall(r"^- ", reading, flags=re.M)
    assert len(items) >= 3, f"{page}: fewer than 3 references"
    assert "Attention Is All You Need" in reading and "arXiv:1706.03762" in reading
    for label, url in re.findall(r"\[([^\]]+)\]\((https?://[^)]+)\)", reading):
        host = url.split("/")[2]
        assert host in {"arxiv.org", "nlp.seas.harvard.edu"}, f"{page}: unexpected link {url}"
        if host == "arxiv.org":
            assert re.fullmatch(r"https://arxiv\.org/abs/\d{4}\.\d{4,5}", url) and label == f"arXiv:{url.rsplit('/', 1)[1]}", url


def test_welcome_page_states_the_prerequisites():
    text = read("index")
    box = next(body for info, body, _ in blocks(text) if info.startswith("{admonition}") and "assumes" in info)
    assert "lesson 11" in box and len(re.findall(r"^- ", box, flags=re.M)) >= 3
    assert text.index("{admonition}") < text.index("## For students")


# --- issue 10, from a page to running code: launch buttons and publishing ------------------------


def test_launch_buttons_come_from_one_repository_setting():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", config["repository"]["url"])
    launch = config["launch_buttons"]
    assert {"colab_url", "binderhub_url", "jupyterhub_url"} <= set(launch) and launch.get("thebe") is False
    assert "book/*.ipynb" in config["exclude_patterns"], "Sphinx would see two sources per chapter"
    assert config["html"]["use_download_button"] is True


def test_publishing_workflow_builds_the_book_and_sets_the_repository():
    import subprocess

    flow = yaml.safe_load((ROOT / ".github" / "workflows" / "book.yml").read_text())
    build = [step for step in flow["jobs"]["build"]["steps"]]
    runs = [step.get("run", "") for step in build]
    assert any(r.strip() == "make book" for r in runs), "the workflow does not build as the README says"
    upload = next(s for s in build if str(s.get("uses", "")).startswith("actions/upload-pages-artifact"))
    assert upload["with"]["path"] == "_build/html"
    assert any(str(s.get("uses", "")).startswith("actions/deploy-pages") for s in flow["jobs"]["deploy"]["steps"])
    assert flow["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}
    # The step that sets the one repository setting really rewrites it (run its sed on a copy).
    script = next(r for r in runs if "_config.yml" in r).replace("sed -i", "sed").replace("_config.yml", "")
    env = {"GITHUB_REPOSITORY": "someone/some-course", "DEFAULT_BRANCH": "trunk", "PATH": "/usr/bin:/bin"}
    out = subprocess.run(["bash", "-c", script], input=(ROOT / "_config.yml").read_text(), env=env,
                         capture_output=True, text=True, check=True).stdout
    assert yaml.safe_load(out)["repository"] == {**yaml.safe_load((ROOT / "_config.yml").read_text())["repository"],
                                                  "url": "https://github.com/someone/some-course", "branch": "trunk"}
