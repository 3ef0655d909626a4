"""The "ask the model" figure (chapter 13) in Chromium: how long one answer takes in the page.

Opens the figure's static page from file:// (its saved widget state with both checkpoints' weights,
rendered by the book's offline widget assets; tests/browser_support.py) and times
``window.encdec.generate`` on random questions of the task, per checkpoint: the whole greedy answer,
encoder included, in the page's JavaScript (target: well under 50 ms). The peer measured in the same
run is PyTorch answering the same questions one at a time (``greedy_decode``, one thread), printed
as a ratio; also the time from a typed question to the figure's redrawn answers (both checkpoints,
the step view and both experiments).

    .venv/bin/python bench/bench_ask_model.py [--questions 200]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

import torch
from tests_support import browser_support

ROOT = Path(__file__).resolve().parent.parent

TIME_JS = """
([preset, questions]) => {
  const ms = [];
  for (const q of questions) {
    const t0 = performance.now();
    window.encdec.generate(preset, q);
    ms.push(performance.now() - t0);
  }
  return ms;
}
"""

# From a typed question (the form's submit) to the figure's new answers in the DOM.
TYPED_JS = """
(texts) => {
  const root = document.querySelector(".encdec-widget[data-widget='AskTheModel']");
  const input = root.querySelector("[data-testid='question-input']");
  const form = input.form;
  return texts.map((text) => {
    input.value = text;
    const t0 = performance.now();
    form.requestSubmit();
    const shown = root.querySelector("[data-testid='answer-modern']").getAttribute("data-ids");
    if (!shown) throw new Error("no answer");
    return performance.now() - t0;
  });
}
"""


def quantile(values, q):
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=200)
    args = parser.parse_args(argv)
    support = browser_support()
    from encdec.generate import greedy_decode
    from encdec.train import load_run
    from encdec.widgets import AskTheModel, parse_question

    rng = random.Random(0)
    texts = [f"{rng.randint(-49, 49)} {rng.choice('+-')} {rng.randint(-49, 49)}" for _ in range(args.questions)]
    questions = [parse_question(q)[0] for q in texts]
    torch.set_num_threads(1)
    results = {}
    with tempfile.TemporaryDirectory() as folder, support.browser() as chromium:
        page_path = support.standalone_widget_page([AskTheModel()], Path(folder), "ask")
        context = chromium.new_context(viewport={"width": 1280, "height": 900})
        log = support.PageLog()
        support.block_external(context, log)
        page = context.new_page()
        support.watch_page(page, log)
        start = time.perf_counter()
        page.goto(page_path.as_uri(), wait_until="load")
        support.wait_for_widget(page, "AskTheModel")
        print(
            f"page {page_path.stat().st_size / 1e6:.2f} MB, open to rendered figure {time.perf_counter() - start:.2f} s"
        )
        page.evaluate(TIME_JS, ["modern", questions[:20]])  # warm the JIT
        for preset in ("modern", "historical"):
            js = page.evaluate(TIME_JS, [preset, questions])
            model, _ = load_run(preset)
            py = []
            with torch.no_grad():
                for q in questions:
                    t0 = time.perf_counter()
                    greedy_decode(model, torch.tensor([q]), max_new_tokens=4)
                    py.append((time.perf_counter() - t0) * 1000)
            med_js, med_py = statistics.median(js), statistics.median(py)
            results[preset] = med_js
            print(
                f"{preset}: one answer in Chromium median {med_js:.2f} ms, p95 {quantile(js, 0.95):.2f} ms, "
                f"max {max(js):.2f} ms (target well under 50 ms); PyTorch one question {med_py:.2f} ms: "
                f"page / PyTorch {med_js / med_py:.2f}"
            )
        typed = page.evaluate(TYPED_JS, texts[:50])
        print(
            f"typed question to redrawn figure (both checkpoints, step view, experiments): median "
            f"{statistics.median(typed):.1f} ms, p95 {quantile(typed, 0.95):.1f} ms"
        )
        if log.problems():
            raise SystemExit(f"the page reported problems: {log.problems()}")
        context.close()
    return results


if __name__ == "__main__":
    main()
