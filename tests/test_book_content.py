"""The book's pages carry every section, passage, computation and widget of their lesson seeds.

Fast: reads the markdown sources, builds nothing (helpers in book_pages.py).
"""

from __future__ import annotations

import re

import pytest
import yaml
from book_pages import ALL_PAGES, BOOK, NOTEBOOK_PAGES, ROOT, blocks, code_cells, headings, read

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
        "The learning-rate schedules",
        "Post-norm against pre-norm",
        "Label smoothing and its loss floor",
        "Why the training loss sits above the validation loss",
        "How attention learns",
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
        "The KV cache in bytes",
        "What bounds a decode step",
        "Ask the trained model",
        "Sampling: temperature, top-k and top-p",
        "Exposure bias, measured",
        "Break it on purpose",
        "End-of-lesson deep checks",
        "Transfer questions",
        "Closed-book explanations",
        "Summary",
        "Further reading",
    ],
    "historical_notes": [
        "1. Its `DecoderBlock` check and the repository's block disagree",
        '2. A "sinusoid" formula that collapses',
        "3. Its saved accuracy does not say what it averages",
        "4. Inference that runs the decoder without the causal mask",
        "5. About 1 in 5 validation questions also appear in training",
    ],
    "index": ["For students", "For instructors"],
    "instructor_guide": [
        "Before grading: prerequisites",
        "1. Generate and release",
        "2. Collect",
        "3. Autograde",
        "4. Feedback",
        "5. Export",
    ],
}

# Inline checks and recall questions whose answers must sit in folded dropdowns.
MIN_DROPDOWNS = {"ch11_cross_attention": 10, "ch12_what_you_trained": 10, "ch13_generation": 8}

# The seed's numbers, each computed by a code cell (a fragment of the computing code must appear).
LIVE_COMPUTATIONS = {
    "ch11_cross_attention": [
        'load_run("modern")',
        "get_subsequent_mask(dec_in)",
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
        "make_optimizer(m, config)",  # zero gradient is not "not updated"
        "exact_match(model, unseen_q, unseen_a)",
        '["history"]',  # the loss curve
        "model(q32, model.positions(9), a32, model.positions(5))",
        "learning_rates(tc_run, steps_per_epoch, steps)",  # the schedules, as train builds them
        "smoothing_floor(V, eps)",  # label smoothing's loss floor
        "loss_by_mode(hist, data.train_questions, data.train_answers, eps)",  # train loss above validation
        '(EXPERIMENTS / "norms.json")',  # post-norm against pre-norm, read from its record
        '(EXPERIMENTS / "attention_learns.json")',  # one question's maps over training
    ],
    "ch13_generation": [
        "use_cache=True",
        "use_cache=False",
        "torch.equal(cached, uncached)",
        "Q @ K.T",
        "time.perf_counter()",
        'kwargs["caches"]',  # the package's own caches, read through a hook
        "kv_cache_bytes(c.num_dec_layers, c.num_heads",  # the cache in bytes, from the checkpoints' configs
        "bandwidth = 2 * big.nbytes / min(copy_seconds)",  # decode's bandwidth floor, against a measured step
        "sample_decode(m, many, 4, torch.Generator().manual_seed(0)",  # seeded sampling
        "prefix=forced[:, :2]",  # exposure bias: a forced wrong sign
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
    # the mask and cross-attention figures open on the decoder's input (the answer without EOS), the
    # softmax figure gets the cell's own scores, the cross-attention grid the trained model's weights;
    # the stepper a multi-token answer prefix
    "ch11_cross_attention": [
        "MaskToggle(tokens=a_words[:4])",
        "SoftmaxMaskCompare(scores=scores.tolist()",
        "CrossAttentionExplorer.from_model(model)",
        "AttentionMapViewer.from_model(model)",
        "ScoreExplorer()",
    ],
    "ch12_what_you_trained": ["ShiftTeacherForcing()", "CrossEntropySlider()"],
    "ch13_generation": [
        'PrefillDecodeStepper.from_run("modern", prefix="BOS POSITIVE")',
        'PrefillDecodeStepper.from_run("historical", mode="sample"',
        "AskTheModel()",
        "BreakIt()",
    ],
}
for _chapter in ("ch11_cross_attention", "ch12_what_you_trained", "ch13_generation"):
    WIDGETS[_chapter].append("QuickCheck([")  # the quick checks of "Before we start"


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
        assert re.search(rf"from encdec\.widgets import .*\b{name}\b", code), (
            f"{page}: {name} not imported from encdec.widgets"
        )


# Seed passages that are not headings (bold lead-ins, admonitions, named ideas).
SEED_PASSAGES = {
    "ch11_cross_attention": [
        "**Inline check.**",
        "Mental model · the encoder",
        "**What would I debug first today?**",
        "historical caveat",
        "Then I implemented:",
        "Now I understand:",
    ],
    "ch12_what_you_trained": [
        "**Inline check.**",
        "Mental model",
        "**Only the shift, no mask?**",
        "**Only the mask, no shift?**",
        "exposure bias",
        "Then I implemented:",
        "Now I understand:",
    ],
    "ch13_generation": ["`[a, b, c]`", "`[b, c, d]`", "**Prefill:**", "**Decode:**", "`[2, 512]`", "`[2, 4]`"],
}


@pytest.mark.parametrize("page", list(SEED_PASSAGES))
def test_seed_passages_present(page):
    text = read(page)
    for passage in SEED_PASSAGES[page]:
        assert passage in text, f"{page}: seed passage {passage!r} missing"
