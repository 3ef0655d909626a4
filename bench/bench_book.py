"""Benchmark of the course book: cold build, no-change rebuild, and widget click-to-update latency.

Builds into a fresh temporary folder (its own execution cache), so the figures do not depend on
_build/. Needs the checkpoints (`make checkpoints`) and node_modules (`npm ci`, or `make book`).

    .venv/bin/python bench/bench_book.py [--repeats 30] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests_support import browser_support

ROOT = Path(__file__).resolve().parent.parent


_support = browser_support()
PageLog, block_external, browser, serve, wait_for_widget, watch_page = (
    _support.PageLog,
    _support.block_external,
    _support.browser,
    _support.serve,
    _support.wait_for_widget,
    _support.watch_page,
)

BUILD = [str(ROOT / ".venv" / "bin" / "jupyter-book"), "build", str(ROOT), "--warningiserror", "--keep-going"]

# Runs in the page: time from a user event to the widget's new numbers in the DOM, and to the
# next painted frame. The widget redraws synchronously in its change handler.
LATENCY_JS = """
async ([selector, repeats]) => {
  const frame = () => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));  // after the next paint
  const dom = [], paint = [];
  for (let k = 0; k < repeats; k++) {
    const target = document.querySelector(selector.target);
    const before = document.querySelector(selector.readout).textContent;
    const t0 = performance.now();
    if (selector.kind === "click") target.click();
    else { target.value = String(selector.values[k % 2]); target.dispatchEvent(new Event("input", { bubbles: true })); }
    const after = document.querySelector(selector.readout).textContent;
    const t1 = performance.now();
    await frame();
    const t2 = performance.now();
    if (after === before) throw new Error("the widget did not update: " + selector.readout);
    dom.push(t1 - t0); paint.push(t2 - t0);
  }
  return { dom, paint };
}
"""

CASES = {
    "MaskToggle cell click": {
        "kind": "click",
        "target": ".encdec-widget[data-widget='MaskToggle'] td[data-row='2'][data-col='3']",
        "readout": ".encdec-widget[data-widget='MaskToggle'] td[data-row='2'][data-col='0'] .w",
    },
    "CrossEntropySlider slide": {
        "kind": "input",
        "values": [0.4, 0.2],
        "target": ".encdec-widget[data-widget='CrossEntropySlider'] [data-testid='p-slider']",
        "readout": ".encdec-widget[data-widget='CrossEntropySlider'] [data-testid='loss']",
    },
    "PrefillDecodeStepper next/back": {
        "kind": "click",
        "target": ".encdec-widget[data-widget='PrefillDecodeStepper'] [data-testid='reset']",
        "readout": ".encdec-widget[data-widget='PrefillDecodeStepper'] [data-testid='step-label']",
    },
}


def timed_build(out: Path) -> tuple[float, int]:
    """Seconds for one build into ``out``, and how many notebooks it executed (not from cache)."""
    t0 = time.perf_counter()
    proc = subprocess.run([*BUILD, "--path-output", str(out)], cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise SystemExit(f"book build failed (exit {proc.returncode})")
    return elapsed, (proc.stdout + proc.stderr).count("Executed notebook in")


def latency(html: Path, repeats: int) -> dict[str, tuple[float, float]]:
    results = {}
    with serve(html) as base, browser() as chromium:
        log = PageLog()
        context = chromium.new_context(viewport={"width": 1280, "height": 900})
        block_external(context, log)
        page = context.new_page()
        watch_page(page, log)
        page.goto(base + "book/widgets_gallery.html", wait_until="load")
        for name in ("MaskToggle", "CrossEntropySlider", "PrefillDecodeStepper"):
            wait_for_widget(page, name)
        # The stepper's reset only changes the label away from step 0: step forward before each reset.
        page.locator("[data-widget='PrefillDecodeStepper'] [data-testid='next']").click()
        for name, case in CASES.items():
            if name.startswith("PrefillDecodeStepper"):
                dom, paint = [], []
                for _ in range(repeats):
                    page.locator("[data-widget='PrefillDecodeStepper'] [data-testid='next']").click()
                    r = page.evaluate(LATENCY_JS, [case, 1])
                    dom += r["dom"]
                    paint += r["paint"]
            else:
                r = page.evaluate(LATENCY_JS, [case, repeats])
                dom, paint = r["dom"], r["paint"]
            results[name] = (statistics.median(dom), statistics.median(paint))
        if log.problems():
            raise SystemExit(f"page problems during the benchmark: {log.problems()}")
        context.close()
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--keep", type=Path, help="build here (kept) instead of a temporary folder")
    args = parser.parse_args(argv)
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "book_assets.py")], check=True, cwd=ROOT, stdout=subprocess.DEVNULL
    )
    tmp = Path(tempfile.mkdtemp(prefix="bench-book-")) if args.keep is None else args.keep
    try:
        shutil.rmtree(tmp / "_build", ignore_errors=True)
        cold = timed_build(tmp)
        warm = timed_build(tmp)
        html = tmp / "_build" / "html"
        lat = latency(html, args.repeats)
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    (cold, cold_runs), (warm, warm_runs) = cold, warm
    print(f"book cold build (fresh output and execution cache): {cold:7.1f} s  ({cold_runs} notebooks executed)")
    print(
        f"book no-change rebuild:                             {warm:7.1f} s  ({warm_runs} executed;"
        f" cold/rebuild = {cold / warm:.1f}x)"
    )
    for name, (dom, paint) in lat.items():
        print(
            f"widget latency, {name:32s} median {dom:6.2f} ms to new numbers in the DOM, {paint:6.2f} ms to the next frame"
            f" ({args.repeats} repeats)"
        )
    print(f"(cpu count {os.cpu_count()}; chromium headless; every non-localhost request blocked)")


if __name__ == "__main__":
    main()
