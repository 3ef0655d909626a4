"""Benchmark of what each page of the built book costs a reader: its weight and its time to load.

Every page of both editions (and Sphinx's search and index pages) is opened in headless Chromium
from the built site as published (`make book`, with the repository and launch buttons:
tests/book_published.py) served on 127.0.0.1, three ways: unthrottled, then as a mid-range
phone on a 4G connection and on a slow one (Chromium's network and CPU emulation, profiles below).
For each page it prints the bytes requested (as served here, uncompressed, and as gzip would send
them: a static host such as GitHub Pages compresses text), the number of requests, and the time to
the load event and to the page's widgets drawn, before the reader does anything (the "ask the
model" figure loads the trained weights only when asked). The budget of tests/test_browser_reader.py
is 1.5 MB a page; `genindex`, the theme with no content, is the floor each page is divided by.

    .venv/bin/python bench/bench_pages.py [--pages book/ch13_generation ...]
"""

from __future__ import annotations

import argparse
import os
import time
import zlib
from pathlib import Path

from tests_support import browser_support

ROOT = Path(__file__).resolve().parent.parent


_support = browser_support()
# (name, download bytes/s, upload bytes/s, round trip ms, CPU slowdown): a mid-range phone
PROFILES = [
    ("unthrottled", None, None, 0, 1),
    ("4G phone", 9_000_000 / 8, 1_500_000 / 8, 85, 4),
    ("slow 4G phone", 1_600_000 / 8, 750_000 / 8, 150, 4),
]
FLOOR = "genindex"


def visit(chromium, url: str, profile) -> dict:
    name, down, up, rtt, cpu = profile
    context = chromium.new_context(viewport={"width": 390, "height": 844} if down else {"width": 1280, "height": 900})
    log = _support.PageLog()
    _support.block_external(context, log)
    page = context.new_page()
    cdp = context.new_cdp_session(page)
    if down:
        cdp.send("Network.enable")
        cdp.send(
            "Network.emulateNetworkConditions",
            {"offline": False, "latency": rtt, "downloadThroughput": down, "uploadThroughput": up},
        )
        cdp.send("Emulation.setCPUThrottlingRate", {"rate": cpu})
    requests = []
    page.on("requestfinished", lambda request: requests.append(request))  # noqa: PLW0108 (Playwright wraps a Python function, not a builtin method)
    start = time.perf_counter()
    page.goto(url, wait_until="load", timeout=180_000)
    loaded = time.perf_counter() - start
    views = page.locator('script[type="application/vnd.jupyter.widget-view+json"]').count()
    page.wait_for_function("n => document.querySelectorAll('.encdec-widget').length >= n", arg=views, timeout=180_000)
    drawn = time.perf_counter() - start
    sizes = []
    for request in requests:
        response = request.response()
        body = response.body() if response else b""
        sizes.append((len(body), len(zlib.compress(body, 6)) if body else 0))
    context.close()
    if log.problems():
        raise SystemExit(f"{url}: {log.problems()}")
    return {
        "bytes": sum(s for s, _ in sizes),
        "gzip": sum(g for _, g in sizes),
        "requests": len(sizes),
        "load": loaded,
        "drawn": drawn,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", nargs="*", help="pages to measure (default: every page)")
    args = parser.parse_args(argv)
    pages = args.pages or _support.site_pages()
    html = browser_support("book_published").published_book()
    with _support.browser() as chromium, _support.serve(html) as base:
        floor = visit(chromium, f"{base}{FLOOR}.html", PROFILES[0])
        print(
            f"floor: {FLOOR} loads {floor['bytes'] / 1e6:.2f} MB ({floor['gzip'] / 1e6:.2f} MB gzip) in {floor['requests']} requests"
        )
        print(
            f"{'page':32s} {'MB':>5s} {'gzip':>5s} {'x floor':>7s} {'req':>4s}  "
            + "  ".join(f"{name + ' load / drawn s':>26s}" for name, *_ in PROFILES)
        )
        for path in pages:
            runs = [visit(chromium, f"{base}{path}.html", profile) for profile in PROFILES]
            first = runs[0]
            print(
                f"{path:32s} {first['bytes'] / 1e6:5.2f} {first['gzip'] / 1e6:5.2f} {first['bytes'] / floor['bytes']:7.2f} "
                f"{first['requests']:4d}  " + "  ".join(f"{r['load']:12.2f} / {r['drawn']:6.2f}    " for r in runs),
                flush=True,
            )
    print(f"(cpu count {os.cpu_count()}; served uncompressed on 127.0.0.1; gzip = each response compressed at level 6)")


if __name__ == "__main__":
    main()
