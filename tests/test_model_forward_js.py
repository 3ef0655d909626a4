"""The browser's forward pass (encdec/widgets/model_forward.js) against the package, in node.

Every question of the task (all 19,602) for both shipped checkpoints: the JavaScript's greedy
answers equal ``encdec.generate.greedy_decode``'s, with and without the cache on a sample, and its
logits agree with PyTorch's to 1e-5 on a sample (step by step, and teacher-forced). No browser.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from node_support import node_folder

from encdec.data import BOS_ID, EOS_ID, TOKEN_TO_ID, encode_question, problem_space
from encdec.generate import greedy_decode
from encdec.train import load_run

pytestmark = pytest.mark.slow  # the whole space twice in node: about half a minute of two cores
ROOT = Path(__file__).resolve().parent.parent
PRESETS = ("modern", "historical")
SAMPLE = slice(0, None, 97)  # 203 questions spread over the space, for logits and the uncached path
LOGITS_TOL = 1e-5

RUNNER = r"""
import { readFileSync, writeFileSync } from "node:fs";
import { loadModel, greedyGenerate, teacherForced, EOS_ID } from "./forward.mjs";
const [weightsPath, questionsPath, outPath, sampleStep] = process.argv.slice(2);
const model = loadModel(JSON.parse(readFileSync(weightsPath, "utf8")));
const { questions, answers } = JSON.parse(readFileSync(questionsPath, "utf8"));
const start = performance.now();
// every answer padded with EOS to 5 tokens, as greedy_decode pads a finished row
const greedy = questions.map((q) => {
  const ids = greedyGenerate(model, q, { record: false }).tokens;
  while (ids.length < 5) ids.push(EOS_ID);
  return ids;
});
const seconds = (performance.now() - start) / 1000;
const sample = questions.filter((_, i) => i % Number(sampleStep) === 0);
const traced = sample.map((q) => greedyGenerate(model, q).steps.map((s) => s.logits));
const uncached = sample.map((q) => greedyGenerate(model, q, { useCache: false }));
const forced = sample.map((q, i) => teacherForced(model, q, answers[i * Number(sampleStep)]));
writeFileSync(outPath, JSON.stringify({ greedy, seconds, traced, forced,
  uncached: uncached.map((r) => r.tokens), uncachedPositions: uncached.map((r) => r.positionsComputed) }));
"""


def write_runner(folder: Path, presets=PRESETS) -> list[Path]:
    """The forward pass as an ES module, the runner, and each preset's exported weights in ``folder``."""
    return node_folder(
        folder,
        "forward.mjs",
        ("model_forward.js",),
        ("loadModel", "greedyGenerate", "teacherForced", "EOS_ID", "checkQuestionIds"),
        RUNNER,
        presets,
    )[1]


@pytest.fixture(scope="module")
def space():
    return problem_space()  # (19602, Kq), (19602, Ka)


@pytest.fixture(scope="module")
def js_runs(tmp_path_factory, space):
    """Both presets' JavaScript runs over the whole space, side by side (one node process each), and
    meanwhile PyTorch's greedy answers to the same questions."""
    node = shutil.which("node")
    assert node, "node is needed (the book build needs it too: install Node.js)"
    folder = tmp_path_factory.mktemp("forward_js")
    weights = write_runner(folder)
    questions, answers = space
    (folder / "questions.json").write_text(json.dumps({"questions": questions.tolist(), "answers": answers.tolist()}))
    procs = {
        preset: subprocess.Popen(
            [node, "run.mjs", str(path), "questions.json", f"{preset}.out.json", str(SAMPLE.step)], cwd=folder
        )
        for preset, path in zip(PRESETS, weights)
    }
    py = {preset: greedy_decode(load_run(preset)[0], questions, max_new_tokens=4) for preset in PRESETS}  # meanwhile
    for preset, proc in procs.items():
        assert proc.wait(timeout=300) == 0, f"{preset}: the node run failed"
    return {
        preset: {**json.loads((folder / f"{preset}.out.json").read_text()), "python": py[preset]} for preset in PRESETS
    }


@pytest.mark.parametrize("preset", PRESETS)
def test_javascript_answers_every_question_as_python_does(js_runs, space, preset):
    questions, answers = space
    _, metrics = load_run(preset)
    js = js_runs[preset]
    py = js["python"]  # greedy_decode on the whole space, (19602, Ka)
    got = torch.tensor(js["greedy"])
    differ = (got != py).any(dim=1)
    print(
        f"\n{preset}: {len(questions) - int(differ.sum())} of {len(questions)} answers equal "
        f"(JS {js['seconds']:.1f} s for all)"
    )
    assert int(differ.sum()) == 0, f"{preset}: JS differs on {questions[differ][:5].tolist()}"
    # right or wrong as the shipped run claims (modern: all 19,602)
    right = int((got == answers).all(dim=1).sum())
    assert right == round(metrics["space_exact_match"] * len(questions)), (preset, right)


@pytest.mark.parametrize("preset", PRESETS)
def test_javascript_logits_agree_with_pytorch(js_runs, space, preset):
    """Step by step and teacher-forced, on the sample. PyTorch computes in float32, the page in
    float64 on the same float32 weights: their difference is PyTorch's rounding, which grows with
    the logit (1e-6 of it), so against float32 the bound is 1e-5 of the row's largest logit (at
    least 1e-5); against the same model in float64 it is 1e-5 outright."""
    questions, answers = space
    sample_q, sample_a = questions[SAMPLE], answers[SAMPLE]
    js = js_runs[preset]
    model, _ = load_run(preset)
    for dtype in (torch.float32, torch.float64):
        m = model.to(dtype)
        seen = []  # the projection's output at each greedy step: (n, V)
        hook = m.proj_to_vocab.register_forward_hook(
            lambda mod, args, out, seen=seen: seen.append(out.detach().double())
        )
        greedy_decode(m, sample_q, max_new_tokens=4)
        hook.remove()
        diffs, scales = [], []
        for i, steps in enumerate(js["traced"]):
            for s, logits in enumerate(steps):
                diffs.append((torch.tensor(logits) - seen[s][i]).abs().max().item())
                scales.append(max(1.0, seen[s][i].abs().max().item()))
        forced = m(sample_q, m.positions(9), sample_a, m.positions(5)).double()  # (n, Ka-1, V)
        forced_diff = (torch.tensor(js["forced"]) - forced).abs().amax(dim=-1)  # (n, Ka-1)
        forced_scale = forced.abs().amax(dim=-1).clamp(min=1.0)
        worst = max(diffs)
        print(
            f"\n{preset} vs torch {dtype}: logits max |JS - torch| {worst:.2e} over {len(diffs)} greedy steps "
            f"(largest |logit| {max(scales):.1f}), {forced_diff.max().item():.2e} teacher-forced"
        )
        if dtype == torch.float64:
            assert worst < LOGITS_TOL and forced_diff.max().item() < LOGITS_TOL
        else:
            assert all(d <= LOGITS_TOL * s for d, s in zip(diffs, scales))
            assert bool((forced_diff <= LOGITS_TOL * forced_scale).all())
    model.float()


@pytest.mark.parametrize("preset", PRESETS)
def test_without_the_cache_the_tokens_are_the_same_and_every_step_recomputes(js_runs, preset):
    js = js_runs[preset]
    sample = js["greedy"][SAMPLE]
    trimmed = [row[: row.index(EOS_ID) + 1] if EOS_ID in row else row for row in sample]
    assert js["uncached"] == trimmed
    for tokens, positions in zip(js["uncached"], js["uncachedPositions"]):
        steps = len(tokens) - 1  # one decoder call per produced token
        assert positions == steps * (steps + 1) // 2  # 1 + 2 + ...: the whole prefix at every step


def test_javascript_refuses_what_is_not_a_question(tmp_path):
    node = shutil.which("node")
    write_runner(tmp_path, presets=())
    good = encode_question("BOS NEGATIVE 30 subtract NEGATIVE 34 EOS")
    bad = [good[:8], [*good[:2], 5, 0, *good[4:]], [*good[:4], TOKEN_TO_ID["POSITIVE"], *good[5:]], "BOS", [BOS_ID] * 9]
    (tmp_path / "run.mjs").write_text(
        "import { checkQuestionIds } from './forward.mjs';\n"
        f"const ok = checkQuestionIds({json.dumps(good)});\n"
        f"const codes = {json.dumps(bad)}.map((ids) => {{ try {{ checkQuestionIds(ids); return null; }}"
        " catch (e) { return e.code; } });\n"
        "console.log(JSON.stringify({ ok, codes }));\n"
    )
    out = json.loads(
        subprocess.run([node, str(tmp_path / "run.mjs")], capture_output=True, text=True, check=True).stdout
    )
    assert out == {"ok": good, "codes": ["bad_question_ids"] * len(bad)}
