"""Helpers of the browser tests and the book benchmark: serve the built book on 127.0.0.1, drive
Debian's chromium with Playwright, and block (and record) every request to another host."""

from __future__ import annotations

import contextlib
import functools
import http.server
import math
import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from urllib.parse import urlparse

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The site under test: `make book`'s output, or another build named by $ENCDEC_BOOK_HTML.
BOOK_HTML = Path(os.environ.get("ENCDEC_BOOK_HTML") or ROOT / "_build" / "html")
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


def toc_pages(toc: Path = ROOT / "_toc.yml") -> list[str]:
    """Every page of the book, in _toc.yml order (root first)."""
    import yaml

    data = yaml.safe_load(toc.read_text())
    pages = [data["root"]]
    for part in data.get("parts", []):
        pages += [chapter["file"] for chapter in part.get("chapters", [])]
    return pages


def site_pages() -> list[str]:
    """Every page a reader can open: the book's pages of both editions (_toc.yml) and Sphinx's own
    search and index pages (the site's root index.html only redirects to book/index)."""
    return toc_pages() + ["search", "genindex"]


# The gallery's interactions are tested one by one; every other page is loaded and checked.
GALLERY = "book/widgets_gallery"
# One widget per gallery cell that imports from encdec.widgets (every figure, and a quick check).
GALLERY_WIDGETS = (ROOT / f"{GALLERY}.md").read_text(encoding="utf-8").count("\nfrom encdec.widgets import ")
CHAPTERS = [page for page in toc_pages() if page != GALLERY]


def require_built_book(html: Path = BOOK_HTML) -> Path:
    """The built site, or a clear failure: the browser tests test the build, they never skip it."""
    if not (html / "book" / "widgets_gallery.html").is_file():
        raise AssertionError(f"the built book is missing ({html}): run `make book` first")
    return html


def chromium_path() -> str:
    path = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    if path is None:
        raise AssertionError("Debian's chromium is missing: run `make system` (apt-get install chromium)")
    return path


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output clean
        pass


@contextlib.contextmanager
def serve(folder: Path):
    """Serve ``folder`` on 127.0.0.1 (a free port) in a thread; yield the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class PageLog:
    """What went wrong on a page: uncaught errors, console errors, blocked or failed requests."""

    page_errors: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def problems(self) -> dict[str, list[str]]:
        return {k: v for k, v in vars(self).items() if v}


def is_local(url: str) -> bool:
    parsed = urlparse(url)
    if parsed.scheme in {"file", "data", "blob", "about"}:
        return True
    return parsed.hostname in LOCAL_HOSTS


def block_external(context, log: PageLog) -> None:
    """Abort every request whose host is not 127.0.0.1/localhost, and record it."""

    def handle(route):
        url = route.request.url
        if is_local(url):
            route.continue_()
        else:
            log.blocked.append(url)
            route.abort()

    context.route("**/*", handle)


def watch_page(page, log: PageLog) -> None:
    page.on("pageerror", lambda exc: log.page_errors.append(str(exc)))
    page.on("console", lambda msg: log.console_errors.append(msg.text) if msg.type == "error" else None)
    page.on("requestfailed", lambda req: log.failed.append(f"{req.url} ({req.failure})") if is_local(req.url) else None)


@contextlib.contextmanager
def browser():
    """A headless chromium (Debian's) with no network access beyond what the test routes allow."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium_path(), headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


WIDGET_SELECTOR = ".encdec-widget[data-widget='{name}']"


def wait_for_widget(page, name: str, timeout_ms: int = 20000):
    """The rendered root element of the first widget called ``name`` on the page."""
    locator = page.locator(WIDGET_SELECTOR.format(name=name)).first
    locator.wait_for(state="visible", timeout=timeout_ms)
    return locator


@contextlib.contextmanager
def jupyterlab(root_dir: Path, timeout_s: float = 60.0):
    """A JupyterLab server on 127.0.0.1 serving ``root_dir`` (no token, own config and runtime
    folders); yield its base URL. Stopped (terminate, then kill) on exit."""
    import socket
    import subprocess
    import sys
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(root_dir / ".cfg"), JUPYTER_RUNTIME_DIR=str(root_dir / ".runtime"))
    jupyter = Path(sys.executable).parent / "jupyter"
    log = open(root_dir / "jupyterlab.log", "w")  # noqa: SIM115 (the server writes it until the fixture ends)
    proc = subprocess.Popen(
        [
            str(jupyter),
            "lab",
            "--no-browser",
            "--allow-root",
            f"--port={port}",
            "--ServerApp.ip=127.0.0.1",
            "--IdentityProvider.token=",
            "--ServerApp.password=",
            f"--ServerApp.root_dir={root_dir}",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ],
        cwd=root_dir,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                urllib.request.urlopen(base + "/api/status", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"JupyterLab did not start: see {root_dir / 'jupyterlab.log'}") from None
                time.sleep(0.5)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def widget_states(page, trait: str) -> list[dict]:
    """The saved state of every widget view on the page that has ``trait``, in page order: what
    the static page's widget manager renders (the page's own widget-state script)."""
    return page.evaluate(
        """trait => {
          const saved = JSON.parse(document.querySelector(
            'script[type="application/vnd.jupyter.widget-state+json"]').textContent).state;
          return [...document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]')]
            .map((view) => saved[JSON.parse(view.textContent).model_id].state)
            .filter((state) => trait in state);
        }""",
        trait,
    )


def notebook_pages() -> list[str]:
    """Pages of the book that are notebooks (a jupytext header): the ones with launch buttons."""
    return [
        page for page in toc_pages() if (ROOT / f"{page}.md").read_text(encoding="utf-8").startswith("---\njupytext:")
    ]


def expected_launch_links(page: str) -> dict[str, tuple[str, dict]]:
    """(address, query) of each launch button of ``page``, from the book's repository (_config.yml's
    `repository.url`, else the checkout's GitHub origin: scripts/book_repository.py): Colab, Binder
    and JupyterHub open the page's notebook copy, ``<page>.ipynb``. None at all where no repository
    is known, and no JupyterHub button while its address is a placeholder."""
    import sys

    import yaml

    sys.path.insert(0, str(ROOT / "scripts"))
    from book_repository import PLACEHOLDER_HOST, repository_url

    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    repo_url = repository_url(ROOT)
    if repo_url is None:
        return {}
    repo_url, branch = repo_url.rstrip("/"), config["repository"]["branch"]
    org, repo = urlparse(repo_url).path.strip("/").split("/")
    launch, notebook = config["launch_buttons"], f"{page}.ipynb"
    links = {
        "Colab": (f"{launch['colab_url']}/github/{org}/{repo}/blob/{branch}/{notebook}", {}),
        "Binder": (f"{launch['binderhub_url']}/v2/gh/{org}/{repo}/{branch}", {"urlpath": [f"lab/tree/{notebook}"]}),
        "JupyterHub": (
            f"{launch['jupyterhub_url']}/hub/user-redirect/git-pull",
            {"repo": [repo_url], "branch": [branch], "urlpath": [f"lab/tree/{repo}/{notebook}"]},
        ),
    }
    if PLACEHOLDER_HOST.match(launch.get("jupyterhub_url") or ""):
        del links["JupyterHub"]
    return links


def fmt(x: float, digits: int = 3) -> str:
    """As JavaScript's toFixed: exact ties round away from zero (Python's format rounds them to even)."""
    return str(Decimal(x).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def softmax(row):
    top = max(row)
    exps = [math.exp(x - top) for x in row]
    return [e / sum(exps) for e in exps]


# A widget's tones: its background's and its text's brightness (0-255, Rec. 709 weights on the
# sRGB values). A widget drawn dark has a background under DARK_TONE and text over it.
WIDGET_TONES_JS = """(w) => {
  const lum = (c) => { const [r, g, b] = c.match(/[\\d.]+/g).map(Number); return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const s = getComputedStyle(w);
  return [lum(s.backgroundColor), lum(s.color)];
}"""
DARK_TONE = 80


SWITCH_THEME_JS = """async (mode) => {
  document.documentElement.dataset.theme = mode;
  document.documentElement.dataset.mode = mode;
  const frame = () => new Promise((done) => requestAnimationFrame(() => done()));
  await frame(); await frame();  // the new colours' transitions have started
  await Promise.all(document.getAnimations().filter((a) => a instanceof CSSTransition).map((a) => a.finished.catch(() => null)));
}"""


def switch_theme(page, mode: str) -> None:
    """Switch the page to the theme's ``mode`` ('light' or 'dark') as its switch does, and return
    once every colour has arrived: the theme eases colours over 0.15 s, and a check read mid-way
    (a machine under load) sees neither theme's colours."""
    if mode not in ("light", "dark"):
        raise ValueError(f"a theme mode is 'light' or 'dark', not {mode!r}")
    page.evaluate(SWITCH_THEME_JS, mode)


class Opened:
    """A page opened in its own browser context, offline, with what goes wrong on it logged."""

    def __init__(self, chromium, url, width: int = 1280, dark: bool = False):
        self.log = PageLog()
        self.context = chromium.new_context(viewport={"width": width, "height": 900})
        if dark:  # the theme's switch keeps the reader's choice in localStorage
            self.context.add_init_script("localStorage.setItem('mode', 'dark'); localStorage.setItem('theme', 'dark');")
        block_external(self.context, self.log)
        self.page = self.context.new_page()
        watch_page(self.page, self.log)
        self.requests = []  # every request the page completed, in order (their sizes: request.sizes())
        self.in_flight: set = set()  # HTTP requests started and not yet finished or failed
        self._last_change = time.monotonic()
        self.page.on("request", self._started)
        self.page.on("requestfinished", self._finished)
        self.page.on("requestfailed", self._ended)
        self.page.goto(url, wait_until="load")

    def _started(self, request) -> None:
        if urlparse(request.url).scheme in {"http", "https"}:
            self.in_flight.add(request)
            self._last_change = time.monotonic()

    def _finished(self, request) -> None:
        self.requests.append(request)
        self._ended(request)

    def _ended(self, request) -> None:
        if request in self.in_flight:
            self.in_flight.discard(request)
            self._last_change = time.monotonic()

    def network_quiet(self, quiet_ms: int = 500, timeout_ms: int = 30000) -> None:
        """Wait until no HTTP request the page reported has been in flight for ``quiet_ms``; a timeout
        names the requests still in flight. Playwright's "networkidle" tracks requests inside the
        browser and says nothing of which one kept it waiting: it once waited out its 30 s in a loaded
        CI run on a page whose requests here all finish within a second of its load."""
        deadline = time.monotonic() + timeout_ms / 1000
        while self.in_flight or time.monotonic() - self._last_change < quiet_ms / 1000:
            if time.monotonic() > deadline:
                waiting = sorted(r.url for r in self.in_flight)
                raise AssertionError(f"{self.page.url}: requests still in flight after {timeout_ms} ms: {waiting}")
            self.page.wait_for_timeout(50)  # Playwright delivers the page's events while it waits

    def widgets_rendered(self, timeout_ms: int = 20000) -> int:
        """Wait until every widget view on the page has rendered; return how many there are."""
        expected = self.page.locator('script[type="application/vnd.jupyter.widget-view+json"]').count()
        if expected:
            self.page.wait_for_function(
                "n => document.querySelectorAll('.encdec-widget').length >= n", arg=expected, timeout=timeout_ms
            )
        return expected


# --- the fixtures every browser test module uses (conftest.py registers this module as a plugin) --


@pytest.fixture(scope="module")
def chromium():
    with browser() as b:  # one Playwright per module: a second one inside it is refused
        yield b


@pytest.fixture(scope="module")
def site(chromium):
    html = require_built_book()
    with serve(html) as base:
        yield base, chromium


@pytest.fixture
def open_page(site):
    base, chromium = site
    opened = []

    def _open(path: str, url: str | None = None) -> Opened:
        page = Opened(chromium, url or f"{base}{path}.html")
        opened.append(page)
        return page

    yield _open
    for page in opened:
        page.context.close()


def standalone_widget_page(widgets, folder: Path, name: str = "page", lang: str = "en") -> Path:
    """A static page of ``widgets`` as the built book shows them, without building the book: their
    saved state and views, rendered by the book's own widget renderer (``_widget_assets/widgets.js``,
    scripts/book_assets.py). Open it as file://."""
    import html
    import json
    import sys

    from ipywidgets.embed import embed_data

    if not (folder / "_widget_assets" / "widgets.js").is_file():
        sys.path.insert(0, str(ROOT / "scripts"))
        from book_assets import build_assets

        build_assets(folder)
    data = embed_data(views=list(widgets), drop_defaults=False)
    state = json.dumps(data["manager_state"]).replace("</", "<\\/")
    views = "\n".join(
        f'<script type="application/vnd.jupyter.widget-view+json">{json.dumps(v)}</script>' for v in data["view_specs"]
    )
    page = folder / f"{name}.html"
    page.write_text(
        f'<!doctype html>\n<html lang="{html.escape(lang)}"><head><meta charset="utf-8">\n'
        f"<title>{html.escape(name)}</title>\n"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<script src="_widget_assets/widgets.js"></script>\n</head><body><main>\n'
        f'<script type="application/vnd.jupyter.widget-state+json">{state}</script>\n{views}\n</main></body></html>\n',
        encoding="utf-8",
    )
    return page
