"""Issue 10, from a page to running code: the launch buttons, the notebook copies they open (in
step with the pages, no outputs, a first cell that installs the student wheel from the published
site), Binder's set-up and the publishing workflow.

Fast: reads files, builds nothing (helpers in book_pages.py).
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import tomllib

import pytest
import yaml
from book_pages import ALL_PAGES, BOOK, NOTEBOOK_PAGES, ROOT, code_cells, read

COPIES = sorted(NOTEBOOK_PAGES + ["widgets_gallery", "glossary"])


def published_wheel(repository_url: str) -> str:
    """Where the Pages workflow serves the student wheel of ``repository_url`` (owner's repository)."""
    owner, repo = re.fullmatch(r"https://github\.com/([\w.-]+)/([\w.-]+)", repository_url).groups()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return f"https://{owner.lower()}.github.io/{repo}/student/{project['name']}-{project['version']}-py3-none-any.whl"


def test_no_outputs_or_machine_paths_committed():
    """book/*.ipynb are the launch buttons' copies of the MyST notebooks: in step, without outputs,
    without the build's hidden checks (remove-cell) and one cell longer (the install cell, first)."""
    import jupytext

    for edition in (BOOK, BOOK / "zh"):  # the Chinese edition has the same notebook pages
        assert sorted(p.stem for p in edition.glob("*.ipynb")) == COPIES, edition.name
    for copy in [*BOOK.glob("*.ipynb"), *(BOOK / "zh").glob("*.ipynb")]:
        nb, md = jupytext.read(copy), jupytext.read(copy.with_suffix(".md"))
        assert not any(c.get("outputs") for c in nb.cells), f"{copy.name} has outputs"
        lesson = [c for c in md.cells if "remove-cell" not in c.metadata.get("tags", [])]
        assert [(c.cell_type, c.source) for c in nb.cells[1:]] == [(c.cell_type, c.source) for c in lesson], (
            f"{copy.name} lags behind its .md: run `make book-notebooks`"
        )
    for page in ALL_PAGES + [f"zh/{p}" for p in ALL_PAGES]:
        text = read(page)
        for literal in ("/work/", "/tmp/", "/root/", "/home/"):
            assert literal not in text, f"{page} names a machine path {literal!r}"


def repository_module():
    spec = importlib.util.spec_from_file_location("book_repository", ROOT / "scripts" / "book_repository.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_launch_buttons_come_from_one_repository_setting():
    """The setting is a real repository or empty (then the checkout's GitHub origin, or no
    buttons): never a placeholder (issue 23)."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    url = config["repository"]["url"]
    assert url == "" or re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", url)
    assert "OWNER" not in url and "REPOSITORY" not in url
    assert "book_repository" in config["sphinx"]["local_extensions"]
    launch = config["launch_buttons"]
    assert {"colab_url", "binderhub_url", "jupyterhub_url"} <= set(launch) and launch.get("thebe") is False
    assert {"book/*.ipynb", "book/zh/*.ipynb"} <= set(config["exclude_patterns"]), (
        "Sphinx would see two sources per chapter"
    )
    assert config["html"]["use_download_button"] is True


def test_repository_comes_from_the_setting_or_a_github_origin(monkeypatch):
    book_repository = repository_module()
    github = book_repository.github_url
    for remote in (
        "https://github.com/someone/some-course",
        "https://github.com/someone/some-course.git",
        "git@github.com:someone/some-course.git",
        "ssh://git@github.com/someone/some-course",
    ):
        assert github(remote) == "https://github.com/someone/some-course", remote
    for placeholder in (
        "",
        "https://github.com/OWNER/REPOSITORY",
        "https://github.com/executablebooks/jupyter-book",
        "https://gitlab.com/someone/some-course",
        "/srv/git/course.git",
    ):
        assert github(placeholder) is None, placeholder
    monkeypatch.setattr(book_repository, "origin_remote", lambda root: "git@github.com:someone/some-course.git")
    assert book_repository.repository_url(ROOT, "") == "https://github.com/someone/some-course"
    assert book_repository.repository_url(ROOT, "https://github.com/other/course") == "https://github.com/other/course"
    monkeypatch.setattr(book_repository, "origin_remote", lambda root: None)
    assert book_repository.repository_url(ROOT, "https://github.com/OWNER/REPOSITORY") is None


def test_publishing_workflow_builds_the_book_and_sets_the_repository():
    import subprocess

    flow = yaml.safe_load((ROOT / ".github" / "workflows" / "book.yml").read_text())
    build = list(flow["jobs"]["build"]["steps"])
    runs = [step.get("run", "") for step in build]
    assert any(r.strip() == "make book" for r in runs), "the workflow does not build as the README says"
    upload = next(s for s in build if str(s.get("uses", "")).startswith("actions/upload-pages-artifact"))
    assert upload["with"]["path"] == "_build/html"
    assert any(str(s.get("uses", "")).startswith("actions/deploy-pages") for s in flow["jobs"]["deploy"]["steps"])
    assert flow["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}
    # The step that sets the one repository setting really rewrites it (run its sed on a copy).
    script = next(r for r in runs if "_config.yml" in r).replace("sed -i", "sed").replace("_config.yml", "")
    env = {"GITHUB_REPOSITORY": "someone/some-course", "DEFAULT_BRANCH": "trunk", "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        ["bash", "-c", script],
        input=(ROOT / "_config.yml").read_text(),
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    repository = yaml.safe_load(out)["repository"]
    assert repository["branch"] == "trunk"
    # an empty url is left to the checkout's origin, which actions/checkout sets to the repository
    assert repository["url"] in ("https://github.com/someone/some-course", "")
    assert (
        repository_module().github_url("https://github.com/someone/some-course")
        == "https://github.com/someone/some-course"
    )


# --- the launch copies' first cell: the student wheel from the site, nothing else ------------------


def install_cell(page: str) -> str:
    import nbformat

    first = nbformat.read(BOOK / f"{page}.ipynb", as_version=4).cells[0]
    assert first.cell_type == "code" and first.id == "install-course-package", f"{page}: no install cell first"
    return first.source


@pytest.mark.parametrize("page", COPIES)
def test_launch_copy_first_cell_installs_the_student_wheel_from_the_site(page, monkeypatch):
    source = install_cell(page)
    repository = repository_module().repository_url(ROOT)
    if repository is None:  # no repository known: the cell fetches nothing and says what to do
        assert not re.findall(r"https?://", source), f"{page}: the cell fetches {source!r}"
        assert "make student-release" in source
        monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
        with pytest.raises(ModuleNotFoundError):
            exec(compile(source, f"{page}: install cell", "exec"), {})
        return
    url = published_wheel(repository)
    assert re.findall(r"https?://[^\s\"']+", source) == [url], f"{page}: the cell fetches {source!r}"
    assert "install-course-package" not in read(page) and url not in read(page), "the page itself installs"
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda *args, **kwargs: calls.append((args, kwargs)))
    for importable in (True, False):
        monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a, e=importable: object() if e else None)
        exec(compile(source, f"{page}: install cell", "exec"), {})
    ((args, kwargs),) = calls  # only where encdec is missing
    assert args[0][:4] == [sys.executable, "-m", "pip", "install"] and args[0][-1] == url and kwargs == {"check": True}


def test_wheel_address_follows_the_repository_setting(tmp_path):
    """book/launch_copies.py derives the address from _config.yml, as the buttons do."""
    spec = importlib.util.spec_from_file_location("launch_copies", BOOK / "launch_copies.py")
    launch_copies = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(launch_copies)
    config = (ROOT / "_config.yml").read_text()
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (tmp_path / "_config.yml").write_text(re.sub(r"(?m)^  url: .*$", '  url: ""', config))
    assert launch_copies.wheel_url(tmp_path) is None, "no setting and no git remote: no address at all"
    for repository in ("https://github.com/Someone/some-course", "https://github.com/someone/someone.github.io"):
        (tmp_path / "_config.yml").write_text(re.sub(r"(?m)^  url: .*$", f"  url: {repository}", config))
        got = launch_copies.wheel_url(tmp_path)
        if repository.endswith(".github.io"):
            assert got.startswith("https://someone.github.io/student/encdec-"), got
        else:
            assert got == published_wheel(repository), got


def test_binder_installs_what_the_chapters_import_at_the_pins():
    """binder/requirements.txt: constraints.txt's pins, the CPU build of torch, every third-party
    module the chapters import and every dependency of the wheel (the first cell then fetches only
    the wheel)."""
    lines = [line.split("#")[0].strip() for line in (ROOT / "binder" / "requirements.txt").read_text().splitlines()]
    lines = [line for line in lines if line]
    assert "-c ../constraints.txt" in lines and (ROOT / "binder" / "../constraints.txt").resolve().is_file()
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in lines
    wanted = {line.lower() for line in lines if not line.startswith("-")}
    pinned = {
        line.split("==")[0].lower() for line in (ROOT / "constraints.txt").read_text().splitlines() if "==" in line
    }
    assert wanted <= pinned, f"not pinned in constraints.txt: {wanted - pinned}"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert {re.split(r"[<>=!~ ;\[]", d)[0].lower() for d in project["dependencies"]} <= wanted
    imported = set()
    for page in COPIES:
        for cell in code_cells(read(page)):
            imported |= set(re.findall(r"^(?:from|import) (\w+)", cell, flags=re.M))
    third_party = imported - set(sys.stdlib_module_names) - {"encdec"}
    distribution = {"yaml": "pyyaml"}  # modules whose distribution has another name
    third_party = {distribution.get(m, m) for m in third_party}
    assert third_party and third_party <= wanted, f"Binder lacks {third_party - wanted}"
    runtime = (ROOT / "binder" / "runtime.txt").read_text().strip()
    assert re.fullmatch(r"python-3\.(\d+)", runtime) and int(runtime.split(".")[1]) >= 11


@pytest.mark.parametrize("page", COPIES)
def test_launch_copy_leaves_out_the_builds_own_checks(page):
    """The page's hidden check cells (remove-cell) keep the text honest at build time; a reader's
    copy has its lesson cells only."""
    import nbformat

    cells = nbformat.read(BOOK / f"{page}.ipynb", as_version=4).cells
    assert not [c for c in cells if "remove-cell" in c.metadata.get("tags", [])], page
    assert not [c for c in cells if c.cell_type == "code" and re.search(r"^assert ", c.source, re.M)], page


def test_the_downloaded_notebook_keeps_its_outputs_after_a_cache_hit(tmp_path):
    """After a prose-only edit the page comes from the execution cache; the notebook the download
    button offers must still be the executed one (myst-nb writes it without the cached outputs)."""
    import nbformat
    from jupyter_cache import get_cache

    sys.path.insert(0, str(ROOT / "scripts"))
    from book_repository import executed_notebook_with_outputs

    cell = nbformat.v4.new_code_cell(
        "print(1 + 1)", outputs=[nbformat.v4.new_output("stream", name="stdout", text="2\n")]
    )
    executed = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_markdown_cell("prose"), cell],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    )
    nbformat.write(executed, tmp_path / "page.ipynb")
    get_cache(tmp_path / "cache").cache_notebook_file(tmp_path / "page.ipynb", check_validity=False)
    read = nbformat.from_dict(nbformat.reads(nbformat.writes(executed), as_version=4))
    read.cells[0].source = "prose, edited"  # a prose-only edit: the code, and so the cache key, unchanged
    read.cells[1].outputs = []
    nbformat.write(read, tmp_path / "written.ipynb")
    assert executed_notebook_with_outputs(tmp_path / "written.ipynb", tmp_path / "cache")
    restored = nbformat.read(tmp_path / "written.ipynb", as_version=4)
    assert restored.cells[1].outputs[0]["text"] == "2\n" and restored.cells[0].source == "prose, edited"
    assert not executed_notebook_with_outputs(tmp_path / "written.ipynb", tmp_path / "cache")  # already whole


@pytest.mark.parametrize("page", COPIES + [f"zh/{p}" for p in COPIES])
def test_launch_copy_says_first_what_an_assessed_term_leaves_out(page):
    """In an assessed term the wheel's graded answers raise (autograder/assessed.py): the copy says so
    before any cell runs, in its own language, and each such error names its exercise."""
    spec = importlib.util.spec_from_file_location("launch_copies", BOOK / "launch_copies.py")
    launch_copies = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(launch_copies)
    note = launch_copies.TERM_NOTE["zh" if page.startswith("zh/") else "en"]
    assert install_cell(page).startswith(note) and "NotImplementedError" in note, page
