"""The page's broken models (brokenGenerate in encdec/widgets/break_it.js) against encdec.broken, in node.

For every mistake that runs, on every third question of the task (6,534; every one of the 19,602
under ENCDEC_SPACE_ALL=1, `make test-all`), the JavaScript's greedy answers with the mistake switched
in equal PyTorch's with the same mistake on the same path, so the count the figure shows (PyTorch's,
``mistake_table``) is the page's too; the mistake that cannot run
(Q from the encoder) fails in both. The loop with no mistake equals greedyGenerate on a sample. No browser.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import torch
from node_support import node_folder

from encdec.broken import MISTAKES, broken_answers
from encdec.data import problem_space
from encdec.train import load_run

pytestmark = pytest.mark.slow  # four mistakes over the whole space in node, on two cores: about a minute
SPACE_STEP = 1 if os.environ.get("ENCDEC_SPACE_ALL") == "1" else 3  # every third question: a third of it
PRESET = "modern"  # the figure's first checkpoint
RUN = [name for name in MISTAKES if name not in ("intact", "q_from_encoder")]
SAMPLE_STEP = 97

RUNNER = r"""
import { readFileSync, writeFileSync } from "node:fs";
import { loadModel, brokenGenerate, greedyGenerate, EOS_ID } from "./broken.mjs";
const [weightsPath, questionsPath, outPath, names, step] = process.argv.slice(2);
const model = loadModel(JSON.parse(readFileSync(weightsPath, "utf8")));
const { questions, paths } = JSON.parse(readFileSync(questionsPath, "utf8"));
const pad = (ids) => { while (ids.length < 5) ids.push(EOS_ID); return ids; };
const out = {};
for (const name of names.split(",")) out[name] = questions.map((q) => pad(brokenGenerate(model, q, name, paths[name])));
const sample = questions.filter((_, i) => i % Number(step) === 0);
out.loop = sample.map((q) => pad(brokenGenerate(model, q, "intact", true)));
out.greedy = sample.map((q) => pad(greedyGenerate(model, q, { record: false }).tokens));
out.refused = sample.map((q) => { try { brokenGenerate(model, q, "q_from_encoder", false); return null; } catch (e) { return e.code; } });
writeFileSync(outPath, JSON.stringify(out));
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Node runs the mistakes over the whole space in two processes; meanwhile PyTorch does."""
    folder = tmp_path_factory.mktemp("broken_js")
    node, [weights] = node_folder(
        folder,
        "broken.mjs",
        ("break_it.js", "model_forward.js", "task.js"),
        ("loadModel", "brokenGenerate", "greedyGenerate", "EOS_ID"),
        RUNNER,
        (PRESET,),
    )
    questions = problem_space()[0][::SPACE_STEP]  # (19602 / SPACE_STEP, Kq)
    paths = {name: MISTAKES[name].use_cache for name in MISTAKES}
    (folder / "questions.json").write_text(json.dumps({"questions": questions.tolist(), "paths": paths}))
    halves = [RUN[0::2], RUN[1::2]]  # an uncached mistake and a cached one in each
    procs = [
        subprocess.Popen(
            [node, "run.mjs", str(weights), "questions.json", f"out{k}.json", ",".join(names), str(SAMPLE_STEP)],
            cwd=folder,
        )
        for k, names in enumerate(halves)
    ]
    model, _ = load_run(PRESET)
    py = {name: broken_answers(model, questions, name)[0] for name in RUN}  # meanwhile
    refused = broken_answers(model, questions[::SAMPLE_STEP], "q_from_encoder")
    js = {}
    for k, proc in enumerate(procs):
        assert proc.wait(timeout=600) == 0, "the node run failed"
        js.update(json.loads((folder / f"out{k}.json").read_text()))
    return js, py, refused


@pytest.mark.parametrize("name", RUN)
def test_javascript_breaks_the_model_as_pytorch_does_on_every_question(runs, name):
    js, py, _ = runs
    got = torch.tensor(js[name])  # (19602 / SPACE_STEP, Ka)
    differ = (got != py[name]).any(dim=1)
    print(f"\n{name}: {len(got) - int(differ.sum())} of {len(got)} answers equal")
    assert int(differ.sum()) == 0


def test_the_loop_without_a_mistake_is_greedy_generate(runs):
    js, _, _ = runs
    assert js["loop"] == js["greedy"]


def test_q_from_the_encoder_fails_in_both(runs):
    js, _, (got, error) = runs
    assert got is None and error.startswith("ValueError")
    assert set(js["refused"]) == {"rows_differ"}
