"""The generation view's in-page model (encdec/widgets/prefill_decode.js) against the package, in node.

Greedy: on a sample of the task's questions, after every forced prefix of the right answer (P = 1 to
4 tokens), the page's tokens equal PyTorch's cached ``greedy_decode`` with that prefix, for both
shipped checkpoints; each step's work, computed from the shapes, equals what ``watch_greedy`` counts
through hooks. Sampling: on many steps of many seeded runs (several temperatures, top-k and top-p),
the distribution each step draws from equals ``encdec.sampling.sampling_probs``, both of the page's
own logits (to 1e-12) and of PyTorch's logits for the same prefix (to 1e-5); the page's random
numbers are mulberry32's (the Python twin), and its sampled runs are ``sample_trace``'s. No browser.
"""

from __future__ import annotations

import json
import subprocess

import pytest
import torch
from node_support import node_folder

from encdec.data import ANSWER_LEN, EOS_ID, VOCAB, decode, problem_space
from encdec.generate import greedy_decode
from encdec.sampling import sampling_probs
from encdec.train import load_run
from encdec.widgets import PrefillDecodeStepper
from encdec.widgets.prefill_decode import mulberry32, sample_trace, step_work

PRESETS = ("modern", "historical")
GREEDY_SAMPLE = slice(0, None, 97)  # 203 questions spread over the space, each after 4 prefixes
SAMPLED = slice(7, None, 401)  # 49 questions, each run under every setting below
SETTINGS = [  # (temperature, top_k, top_p, seed)
    (1.0, None, None, 0),
    (2.0, None, None, 1),
    (2.0, 3, None, 2),
    (2.0, None, 0.9, 3),
    (0.7, 5, 0.8, 4),
    (3.0, 2, 0.95, 5),
    (0.0, None, None, 6),
    (1.5, 1, None, 7),
]
LOGITS_TOL = 1e-5

RUNNER = r"""
import { readFileSync, writeFileSync } from "node:fs";
import { pageRun, loadModel, mulberry32 } from "./generation.mjs";
const [weightsPath, inputPath, outPath] = process.argv.slice(2);
const net = loadModel(JSON.parse(readFileSync(weightsPath, "utf8")));
const { greedy, sampled, settings } = JSON.parse(readFileSync(inputPath, "utf8"));
const greedyOut = greedy.map(([q, prefix]) => {
  const run = pageRun(net, q, prefix);
  return { tokens: run.tokens, work: run.work, rows: run.self_cache_lens, cross: run.cross_cache_lens };
});
const sampledOut = [];
for (const q of sampled) {
  for (const [temperature, topK, topP, seed] of settings) {
    const run = pageRun(net, q, [14], { mode: "sample", temperature, topK, topP, seed });
    sampledOut.push({ tokens: run.tokens, dists: run.dists, logits: run.logits });
  }
}
const random = mulberry32(12345);
writeFileSync(outPath, JSON.stringify({ greedy: greedyOut, sampled: sampledOut,
  uniforms: Array.from({ length: 1000 }, () => random()) }));
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Both presets' page runs (one node process each) and the inputs they were given."""
    folder = tmp_path_factory.mktemp("generation_js")
    node, weights = node_folder(
        folder,
        "generation.mjs",
        ("prefill_run.js", "model_forward.js", "task.js"),
        ("pageRun", "loadModel", "mulberry32"),
        RUNNER,
        PRESETS,
    )
    questions, answers = problem_space()  # (19602, Kq), (19602, Ka)
    greedy = [
        (q, a[:P])
        for q, a in zip(questions[GREEDY_SAMPLE].tolist(), answers[GREEDY_SAMPLE].tolist())
        for P in range(1, ANSWER_LEN)
    ]
    sampled = questions[SAMPLED].tolist()
    (folder / "input.json").write_text(json.dumps({"greedy": greedy, "sampled": sampled, "settings": SETTINGS}))
    procs = {
        preset: subprocess.Popen([node, "run.mjs", str(path), "input.json", f"{preset}.out.json"], cwd=folder)
        for preset, path in zip(PRESETS, weights)
    }
    for preset, proc in procs.items():
        assert proc.wait(timeout=300) == 0, f"{preset}: the node run failed"
    out = {preset: json.loads((folder / f"{preset}.out.json").read_text()) for preset in PRESETS}
    return {"greedy": greedy, "sampled": sampled, "out": out}


@pytest.mark.parametrize("preset", PRESETS)
def test_the_page_decodes_greedily_as_pytorch_after_every_prefix(runs, preset):
    model, _ = load_run(preset)
    got = runs["out"][preset]["greedy"]
    L, Kq = len(model.decoder.layers), 9
    equal = 0
    for P in range(1, ANSWER_LEN):
        rows = [k for k, (_, prefix) in enumerate(runs["greedy"]) if len(prefix) == P]
        ques = torch.tensor([runs["greedy"][k][0] for k in rows])  # (n, Kq)
        prefix = torch.tensor([runs["greedy"][k][1] for k in rows])  # (n, P)
        want = greedy_decode(model, ques, ANSWER_LEN - P, prefix=prefix).tolist()  # (n, Ka), EOS-padded
        for k, row in zip(rows, want):
            tokens = got[k]["tokens"]
            assert tokens == row[: row.index(EOS_ID) + 1] if EOS_ID in row else row, (preset, runs["greedy"][k])
            equal += 1
            steps = len(tokens) - P
            # the prefill leaves P rows in every layer's cache, each decode step one more; the cross cache Kq
            assert got[k]["rows"] == [[P + s] * L for s in range(steps)]
            assert got[k]["cross"] == [[Kq] * L] * steps
            assert got[k]["work"] == [
                step_work(model.config, Kq, P if s == 0 else 1, P + s, s == 0) for s in range(steps)
            ]
    print(f"\n{preset}: {equal} of {len(runs['greedy'])} page runs (P = 1..4) equal greedy_decode's tokens")
    assert equal == len(runs["greedy"])


@pytest.mark.parametrize("preset", PRESETS)
def test_the_work_from_the_shapes_is_what_the_hooks_count(preset):
    model, _ = load_run(preset)
    for prefix in ("BOS", "BOS POSITIVE", "BOS POSITIVE 0", "BOS POSITIVE 0 4"):
        w = PrefillDecodeStepper.from_model(model, prefix=prefix)
        P = len(prefix.split())
        assert w.work == [step_work(model.config, 9, P if s == 0 else 1, P + s, s == 0) for s in range(len(w.steps))]


@pytest.mark.parametrize("preset", PRESETS)
def test_every_sampled_step_draws_from_sampling_probs(runs, preset):
    """Of the page's logits, sampling_probs gives the page's distribution to 1e-12 (the same function);
    of PyTorch's logits for the same prefix (teacher-forced, float32), to 1e-5: the distribution each
    step draws from is the package's. The draw is mulberry32's number through the inverse CDF."""
    model, _ = load_run(preset)
    got = runs["out"][preset]["sampled"]
    settings = [s for _ in runs["sampled"] for s in SETTINGS]
    questions = [q for q in runs["sampled"] for _ in SETTINGS]
    assert len(got) == len(settings)
    ques, answers, rows = [], [], []  # every sampled step as a teacher-forced row: question, tokens so far
    worst_self = worst_torch = 0.0
    steps = 0
    for q, (T, k, p, seed), run in zip(questions, settings, got):
        random = mulberry32(seed)
        tokens = run["tokens"]
        for s, dist in enumerate(run["dists"]):
            mine = sampling_probs(torch.tensor([run["logits"][s]], dtype=torch.float64), T, k, p)[0]
            worst_self = max(worst_self, (mine - torch.tensor(dist["q"], dtype=torch.float64)).abs().max().item())
            assert dist["u"] == next(random)
            cum = torch.tensor(dist["q"], dtype=torch.float64).cumsum(0)
            assert tokens[s + 1] == int((cum <= dist["u"]).sum()), "the first token whose cumulative mass passes u"
            known = tokens[: s + 1]
            ques.append(q)
            answers.append(known + [EOS_ID] * (ANSWER_LEN - len(known)))
            rows.append(len(known) - 1)
            steps += 1
    with torch.no_grad():
        logits = model(
            torch.tensor(ques), model.positions(9), torch.tensor(answers), model.positions(ANSWER_LEN)
        )  # (n, Ka-1, V)
    last = logits[torch.arange(len(rows)), torch.tensor(rows)]  # (n, V): each step's last position
    k = 0
    for (T, top_k, top_p, _), run in zip(settings, got):
        for s, dist in enumerate(run["dists"]):
            page_logits = torch.tensor(run["logits"][s], dtype=torch.float64)
            assert (page_logits - last[k].double()).abs().max().item() <= LOGITS_TOL * max(
                1.0, page_logits.abs().max().item()
            )
            theirs = sampling_probs(last[k : k + 1], T, top_k, top_p)[0].double()  # PyTorch, float32
            worst_torch = max(worst_torch, (theirs - torch.tensor(dist["q"], dtype=torch.float64)).abs().max().item())
            k += 1
    print(
        f"\n{preset}: {steps} sampled steps in {len(got)} runs; |page - sampling_probs(page logits)| "
        f"{worst_self:.1e}, |page - sampling_probs(torch logits)| {worst_torch:.1e}"
    )
    assert worst_self < 1e-12 and worst_torch < LOGITS_TOL
    assert steps > 1000


def test_the_page_draws_mulberry32s_numbers_and_samples_as_sample_trace(runs):
    assert runs["out"]["modern"]["uniforms"] == [u for u, _ in zip(mulberry32(12345), range(1000))]
    model, _ = load_run("historical")
    got = runs["out"]["historical"]["sampled"]
    q = runs["sampled"][0]
    for (T, k, p, seed), run in zip(SETTINGS, got[: len(SETTINGS)]):
        trace = sample_trace(model, decode(q), "BOS", T, k, p, seed)
        assert trace["steps"] == [VOCAB[i] for i in run["tokens"][1:]], (T, k, p, seed)
