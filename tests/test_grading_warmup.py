"""The warm-up's hidden inputs (autograder/judge/warmup.py), for every student: every known mistake
gives other outputs than the lesson's on them, so each can be told apart and named; the sizes keep
the rules the notebook states (Lq != Lk, one head and several, padded and full rows, Tq != Tk), and no
row's cumulative probability lies near top-p's p, so float32 and float64 keep the same tokens."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from grading_support import graded

from autograder import judge as J
from autograder.judge import sampling as S
from autograder.judge import warmup as W
from encdec.grading import wire

pytestmark = pytest.mark.grading
SEEDS = range(8)
HIDDEN = ("shapes", "causal_mask", "causal_softmax", "padding_mask", "combined_mask", "sdpa_mask", "sampling")


def _outputs(check_id: str, seed: int) -> tuple[dict, dict, dict]:
    """A hidden check's inputs, the reference and every known mistake's outputs on them."""
    check = J.checks()[check_id]
    inputs = J.graded_inputs(check_id, seed)
    ref = J.reference(check, inputs)
    variants = {"causal_softmax": W._softmax_variants, "sampling": S.variants}.get(
        check_id.split(".")[1].removesuffix("_hidden"), check.variants
    )(inputs)
    return inputs, ref, variants


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and bool(np.allclose(a, b, atol=1e-4, equal_nan=True))


@pytest.mark.parametrize("name", HIDDEN)
def test_every_known_mistake_changes_the_outputs_on_every_seed(name):
    for seed in SEEDS:
        _, ref, variants = _outputs(f"warmup.{name}_hidden", seed)
        for mistake, outs in variants.items():
            assert not all(_same(outs[k], ref[k]) for k in ref), (name, seed, mistake)


def test_the_hidden_sizes_keep_the_rules_the_notebook_states():
    visible = J.checks()["warmup.shapes"]
    first = visible.build(visible.seed)["cases"][0]  # the student's own run: N != H from its first case
    assert first["N"] != first["H"] and first["Lq"] != first["H"], first
    for seed in SEEDS:
        cases = J.graded_inputs("warmup.shapes_hidden", seed)["cases"]
        assert all(c["Lq"] != c["Lk"] and c["M"] % c["H"] == 0 and c["N"] != c["H"] for c in cases), seed
        assert {c["H"] == 1 for c in cases} == {True, False}, seed  # one head and several
        for check_id in ("warmup.padding_mask_hidden", "warmup.combined_mask_hidden"):
            inputs = J.graded_inputs(check_id, seed)
            for L, (Tq, Tk) in zip(inputs["lengths"], inputs["sizes"]):
                assert int(L.min()) >= 1 and int(L.max()) == Tk and int(L.min()) < Tk, (check_id, seed)
                assert (Tq == Tk) == (check_id == "warmup.combined_mask_hidden"), (check_id, seed)


def test_top_p_is_clear_of_every_rows_cumulative_mass():
    for seed in SEEDS:
        inputs = J.graded_inputs("warmup.sampling_hidden", seed)
        for logits, s in zip(inputs["logits"], inputs["settings"]):
            if s["top_p"] is None:
                continue
            probs = S._probs(logits.double(), s["temperature"], s["top_k"], None)
            cum = probs.sort(dim=-1, descending=True).values.cumsum(-1)
            assert float((cum - s["top_p"]).abs().min()) > S.MARGIN, seed


@pytest.fixture
def workdir(tmp_path):
    return tmp_path


def test_a_float32_solution_passes_and_the_masks_empty_rows_are_named_whatever_the_fill(workdir):
    """The lesson's functions in float32 pass every hidden check; a mask that forbids a whole row is
    named with -inf (a NaN row) and with the lowest float (a uniform row) alike."""

    def diagonal(fill):
        def causal_softmax(scores):
            T = scores.shape[-1]
            return torch.softmax(scores.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool)), fill), dim=-1)

        return causal_softmax

    verdict, _ = graded("warmup.causal_softmax_hidden", lambda s: W._softmax_masked(s, W.triu(s.shape[-1], 1)), workdir)
    assert verdict.ok, verdict.message
    for fill in (float("-inf"), torch.finfo(torch.float32).min):
        verdict, _ = graded("warmup.causal_softmax_hidden", diagonal(fill), workdir)
        assert verdict.label == "mask_diagonal", verdict.message
    verdict, _ = graded("warmup.sampling_hidden", S._probs, workdir)
    assert verdict.ok, verdict.message


# --- every row of the fixture table, judged in process --------------------------------------------


def _test_cells() -> list[tuple[str, str, str, float]]:
    """(grade id, check id, the object it hands in, points) of every test cell of the warm-up."""
    import re

    import nbformat

    from autograder import ROOT, assignments

    (warmup,) = [a for a in assignments.find() if a.name == "warmup"]
    out = []
    for cell in nbformat.read(ROOT / "solutions" / "warmup" / "warmup.ipynb", as_version=4).cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade"):
            check_id, name = re.search(r'checks\.run\("([\w.]+)", (\w+)\)', cell.source).groups()
            out.append((meta["grade_id"], check_id, name, warmup.points[meta["grade_id"]]))
    return out


def _rows() -> list:
    from autograder.fixtures.table import FIXTURES

    return [f for f in FIXTURES if f.assignment == "warmup" and not f.hostile]


@pytest.mark.parametrize("row", _rows(), ids=lambda f: f.name)
def test_every_fixture_row_scores_and_is_named_in_process(row, workdir):
    """The submission a row makes (its solution cells as handed in) through each check in this
    process: its expected score, its label among those recorded, no other misconception named. `make
    test` hands a sample of these rows to stock nbgrader (tests/test_grading_fixtures.py), `make
    test-all` all of them."""
    from autograder.fixtures.make import apply
    from autograder.judge import labels

    nb = apply("warmup", row.edits)
    scope: dict = {}
    for cell in nb.cells:  # the imports and the solution cells, as the kernel runs them (on past an error)
        if cell.cell_type == "code" and not cell.metadata.get("nbgrader", {}).get("grade"):
            try:
                exec(compile(cell.source, f"<{row.name}>", "exec"), scope)
            except ImportError:  # a module handed in beside the notebook: a graded kernel has none
                pass
    score, found = 0.0, []
    for _, check_id, name, points in _test_cells():
        if name not in scope:  # its cell defined nothing: the check did not run
            found.append("did_not_run")
            continue
        verdict, _ = graded(check_id, scope[name], workdir)
        score += points * verdict.credit
        found.append(verdict.label)
    assert score == row.score, (row.name, score, found)
    assert row.label is None or row.label in found, (row.name, found)
    named = {k for k in found if labels.kind(k) == "named"}
    assert named <= ({row.label} if row.label else set()), (row.name, found)


@pytest.mark.parametrize("lang", ["", "zh"])
def test_own_run_names_the_mistake_in_the_releases_language(lang, tmp_path):
    """A student's own run of the released notebook's visible checks (stored references of the
    release, its language) names a known mistake in that language."""
    import re
    import shutil

    from autograder import ROOT
    from encdec.grading import checks
    from encdec.grading.misconceptions import MISCONCEPTIONS
    from encdec.grading.misconceptions_zh import MISCONCEPTIONS_ZH

    shutil.copytree(ROOT / "exercises" / lang / "warmup" / "reference", tmp_path / "reference")

    def padding_mask(key_lengths, Tq, Tk):  # the padding put on the readers' axis
        i = torch.arange(Tq)
        return (i[None, :] >= key_lengths[:, None])[:, None, :, None].expand(len(key_lengths), 1, Tq, Tk)

    def attention_shapes(N, Lq, Lk, M, H):  # K Q^T
        return {
            "Q": (N, H, Lq, M // H),
            "K": (N, H, Lk, M // H),
            "V": (N, H, Lk, M // H),
            "scores": (N, H, Lk, Lq),
            "out": (N, Lq, M),
        }

    def top_p_crossing(logits, temperature=1.0, top_k=None, top_p=None):  # the token that crosses p dropped
        return S._probs(logits, temperature, top_k, top_p, "top_p_crossing_token")

    def top_k_unnormalised(logits, temperature=1.0, top_k=None, top_p=None):
        return S._probs(logits, temperature, top_k, top_p, "top_k_not_renormalised")

    for check_id, impl, key in (
        ("warmup.padding_mask", padding_mask, "padding_on_queries"),
        ("warmup.shapes", attention_shapes, "scores_transposed"),
        ("warmup.sampling", top_p_crossing, "top_p_crossing_token"),
        ("warmup.sampling", top_k_unnormalised, "top_k_not_renormalised"),
    ):
        with pytest.raises(AssertionError) as err:
            checks.run(check_id, impl, tmp_path)
        said = re.sub(r"\s+", "", str(err.value))
        sentence = (MISCONCEPTIONS_ZH if lang else MISCONCEPTIONS)[key]
        assert re.sub(r"\s+", "", sentence) in said, str(err.value)


# --- every check draws per student; a name needs every case; by hand means no attention operator ---

VISIBLE = ("shapes", "causal_mask", "causal_softmax", "padding_mask", "combined_mask", "sampling")


@pytest.mark.parametrize("name", VISIBLE)
def test_the_visible_checks_draw_each_students_inputs(name):
    """A visible check's graded inputs come from the student's seed, as a hidden one's: two students
    get different ones, and the student's own run stores the draw of the check's fixed seed."""
    from autograder.judge import reference_file

    check = J.checks()[f"warmup.{name}"]
    wired = [J.wire_bytes(check.id, J.graded_inputs(check.id, seed)) for seed in (101, 202)]
    assert wired[0] != wired[1]
    meta, stored = reference_file(check.id, [])
    assert meta == {**meta, **check.wire(check.build(check.seed))[0]}
    assert any(k.startswith("variant/") for k in stored)  # the known mistakes, named in the own run


def test_a_mistake_is_named_only_when_every_case_agrees():
    """The outputs of one known mistake on one case and of another on the other cases name neither
    (the top-p mistake that gave on one seed what a top-k mistake gives); the outputs of one mistake
    on every case name it."""
    check = J.checks()["warmup.sampling_hidden"]
    inputs = J.graded_inputs(check.id, 3)
    ref, outs = J.reference(check, inputs), S.variants(J.draws.in_double(inputs))
    one = wire.case("probs", 1)  # top-k alone: the top-p mistake gives the reference there
    mixed = {**outs["top_p_crossing_token"], one: outs["top_k_off_by_one"][one]}
    verdict = J.verify(check.id, _saved(mixed), inputs)
    assert not verdict.ok and verdict.label == "mismatch", verdict.message
    for mistake in ("top_p_crossing_token", "top_k_not_renormalised", "sampling_not_renormalised_top_p"):
        verdict = J.verify(check.id, _saved(outs[mistake]), inputs)
        assert verdict.label == mistake.removesuffix("_top_p"), (mistake, verdict.message)
    assert J.verify(check.id, _saved(ref), inputs).ok


def _saved(outputs: dict) -> bytes:
    return wire.to_bytes({"status": "ok"}, {k: np.asarray(v, dtype=np.float32) for k, v in outputs.items()})


def _sdpa_routes():
    """The causal softmax through torch's attention operator, by every route a student could take."""
    import threading

    from torch.nn.attention import SDPBackend, sdpa_kernel

    def weights(attend):
        def causal_softmax(scores):
            eye = torch.eye(scores.shape[-1], dtype=scores.dtype)  # keys and values: the weights come out
            return attend(scores, eye, eye)

        return causal_softmax

    def in_thread(q, k, v):
        out = {}

        def attend():
            try:
                out["w"] = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0)
            except RuntimeError as err:
                out["error"] = err

        t = threading.Thread(target=attend)
        t.start()
        t.join()
        if "error" in out:
            raise out["error"]
        return out["w"]

    def math_backend(q, k, v):
        with sdpa_kernel(SDPBackend.MATH):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0)

    aten = torch.ops.aten
    return {
        "private": weights(
            lambda q, k, v: torch._C._nn.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0)
        ),
        "ops": weights(lambda q, k, v: aten.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0)),
        "math_decomposed": weights(
            lambda q, k, v: aten._scaled_dot_product_attention_math.default.decompose(
                q, k, v, None, 0.0, True, None, scale=1.0
            )[0]
        ),
        "thread": weights(in_thread),
        "math_backend": weights(math_backend),
    }


@pytest.mark.parametrize("route", sorted(_sdpa_routes()))
def test_a_by_hand_part_runs_with_no_attention_operator(route, workdir):
    """Outside a by-hand check each route gives the causal softmax; inside, none runs, and the given
    attention works again once the check returns."""
    impl = _sdpa_routes()[route]
    scores = torch.randn(2, 5, 5)
    assert torch.allclose(impl(scores), W._softmax_masked(scores, W.triu(5, 1)), atol=1e-5)
    verdict, _ = graded("warmup.causal_softmax_hidden", impl, workdir)
    assert not verdict.ok and verdict.label in ("package_code", "raised"), verdict.message
    assert torch.allclose(impl(scores), W._softmax_masked(scores, W.triu(5, 1)), atol=1e-5)
