"""The grading edition (autograder/edition.py): targets gone, given parts intact, mounted in the sandbox.

Each edition is imported in a subprocess with its folder first on ``sys.path`` (the test process
has the real ``encdec`` imported already). The last test starts real sandboxed kernels and looks
from inside them.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from autograder import edition, edition_publish
from encdec.attention import get_subsequent_mask
from encdec.config import ModelConfig
from encdec.model import MultiHeadAttention, Transformer

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
ASSIGNMENTS = edition.assignments()
# the book's modules no exercise needs: sampling at temperature 0 is greedy decoding, padding.decoder_logits
# the forward's wiring
OMITTED = (
    "train.py",
    "presets.py",
    "widgets",
    "sampling.py",
    "broken.py",
    "padding.py",
    "architecture.py",
    "whole_space.py",
    "cost.py",
)

# Run inside each edition: call every target, then the given parts on the real package's numbers.
PROBE = r"""
import importlib, inspect, json, sys
import torch
from encdec._graded import GradedRunUsesYourCode
from encdec.config import ModelConfig
from encdec.model import MultiHeadAttention, Transformer


def resolve(name):
    bits = name.split(".")
    obj = importlib.import_module(".".join(bits[:2]))
    for b in bits[2:]:
        obj = getattr(obj, b)
    return obj


out = {"targets": {}}
for name in TARGETS:
    fn = resolve(name)
    n = sum(p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            for p in inspect.signature(fn).parameters.values())
    try:
        fn(*[None] * n)
        out["targets"][name] = "returned"
    except GradedRunUsesYourCode as err:
        out["targets"][name] = str(err)
    except Exception as err:
        out["targets"][name] = f"{type(err).__name__}: {err}"

ref = torch.load(REF)
gap = lambda a, b: (a - b).abs().max().item()
mha = MultiHeadAttention(ref["H"], ref["M"]).eval()
mha.load_state_dict(ref["mha"])
with torch.no_grad():
    out["mha_cross"] = gap(mha(ref["x"], ref["mem"], ref["mem"]), ref["mha_cross"])
    out["mha_causal"] = gap(mha(ref["x"], ref["x"], ref["x"], ref["mask"]), ref["mha_causal"])
    out["last_attention"] = None if mha.last_attention is None else list(mha.last_attention.shape)
    model = Transformer(ModelConfig(**ref["config"])).eval()
    model.load_state_dict(ref["model"])
    out["encode"] = gap(model.encode(ref["ques"]), ref["memory"])
    x = model.emb_layer(ref["ans"]) + model.positions(ref["ans"].shape[1])
    try:
        out["decoder"] = gap(model.decoder(x, ref["memory"], ref["ans_mask"]), ref["decoded"])
    except GradedRunUsesYourCode as err:
        out["decoder"] = str(err)
for name in ("encdec.train", "encdec.presets", "encdec.widgets"):
    try:
        importlib.import_module(name)
        out[name] = "imported"
    except ImportError:
        out[name] = "absent"
print(json.dumps(out))
"""


def run_in_edition(folder: Path, code: str, **names) -> dict:
    """Run ``code`` with the edition in ``folder`` as ``encdec``; return the JSON it prints last."""
    prelude = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(folder)!r})
        # The real package is installed editable; its finder would serve what the edition leaves
        # out. In the sandbox the edition sits at the package's own path: nothing else to find.
        sys.meta_path[:] = [f for f in sys.meta_path if "Editable" not in getattr(f, "__name__", "")]
        import encdec
        assert encdec.__file__.startswith({str(folder)!r}), encdec.__file__
        """)
    prelude += "".join(f"{k} = {v!r}\n" for k, v in names.items())
    proc = subprocess.run(
        [PY, "-c", prelude + code],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def editions(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("editions")
    return {a: edition.build(a, out) for a in ASSIGNMENTS}


@pytest.fixture(scope="module")
def probes(editions, tmp_path_factory) -> dict[str, dict]:
    """What PROBE reports in each edition, against numbers computed with the real package."""
    torch.manual_seed(0)
    N, Ka, Kq, M, H = 2, 5, 9, 16, 4
    mha = MultiHeadAttention(H, M).eval()
    x, mem = torch.randn(N, Ka, M), torch.randn(N, Kq, M)
    mask = get_subsequent_mask(torch.zeros(N, Ka, dtype=torch.long))
    config = ModelConfig(emb_dim=M, num_heads=H, feedforward_dim=32, num_enc_layers=2, num_dec_layers=2)
    model = Transformer(config).eval()
    ques, ans = torch.randint(0, config.vocab_size, (N, Kq)), torch.randint(0, config.vocab_size, (N, Ka))
    with torch.no_grad():
        memory = model.encode(ques)
        dec_in = model.emb_layer(ans) + model.positions(Ka)
        ref = {
            "H": H,
            "M": M,
            "mha": mha.state_dict(),
            "x": x,
            "mem": mem,
            "mask": mask,
            "mha_cross": mha(x, mem, mem),
            "mha_causal": mha(x, x, x, mask),
            "config": dataclasses.asdict(config),
            "model": model.state_dict(),
            "ques": ques,
            "ans": ans,
            "ans_mask": mask,
            "memory": memory,
            "decoded": model.decoder(dec_in, memory, mask),
        }
    path = tmp_path_factory.mktemp("ref") / "ref.pt"
    torch.save(ref, path)
    return {
        a: run_in_edition(folder.parent, PROBE, TARGETS=edition.targets(a), REF=str(path))
        for a, folder in editions.items()
    }


def test_every_assignment_has_targets():
    assert ASSIGNMENTS == ["decoder_block", "kv_cache", "target_slicing", "warmup"]
    assert "encdec.model.DecoderBlock.forward" in edition.targets("decoder_block")


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_target_raises_naming_itself(probes, assignment):
    for name, said in probes[assignment]["targets"].items():
        assert said.startswith(f"{name} is not available in a graded run"), (name, said)
        assert "write it instead of calling the package's version" in said


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_given_parts_match_the_package(probes, assignment):
    got = probes[assignment]
    assert got["mha_cross"] < 1e-5 and got["mha_causal"] < 1e-5, got  # with and without a causal mask
    assert got["encode"] < 1e-5, got
    if assignment == "decoder_block":  # the given Decoder runs the student's block, removed here
        assert got["decoder"].startswith("encdec.model.DecoderBlock.forward is not available")
        assert got["last_attention"] is None  # the fused twin keeps no weights
    else:
        assert got["decoder"] < 1e-5, got
        # where the masked softmax is an exercise (warmup), the given heads attend through the fused twin
        fused = "encdec.attention.masked_softmax" in edition.targets(assignment)
        assert got["last_attention"] == (None if fused else [2, 4, 5, 5])
    assert all(got[m] == "absent" for m in ("encdec.train", "encdec.presets", "encdec.widgets")), got


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_source_holds_no_target_body(editions, assignment):
    folder = editions[assignment]
    assert not any((folder / name).exists() for name in OMITTED)
    assert (folder / "_graded.py").is_file()
    assert sorted(p.name for p in (folder / "grading").glob("*.py")) == sorted(
        p.name for p in (ROOT / "encdec" / "grading").glob("*.py")
    )
    for name in edition.targets(assignment):
        module, *qual = name.split(".")[1:]
        tree = ast.parse((folder / f"{module}.py").read_text())
        fn = edition._find(tree, qual, name)
        assert [ast.unparse(s) for s in fn.body] == [f"raise GradedRunUsesYourCode({name!r})"]
    text = {p.name: p.read_text() for p in folder.glob("*.py")}
    # greedy_decode is a target everywhere: the one greedy choice left is pick_next, the students' given
    generate = ast.parse(text["generate.py"])
    generate.body = [node for node in generate.body if getattr(node, "name", None) != "pick_next"]
    assert "argmax" not in ast.unparse(generate)
    if assignment in ("decoder_block", "warmup"):
        assert "torch.triu" not in text["attention.py"] and "masked_fill" not in text["attention.py"]
        assert "torch.softmax" not in text["attention.py"]
    if assignment == "decoder_block":
        assert "attention_cross(out_2" not in text["model.py"]
    if assignment == "kv_cache":
        assert "torch.cat" not in text["attention.py"]
    if assignment == "target_slicing":
        assert "ans_b[:, 1:]" not in text["model.py"] and "cross_entropy" not in text["model.py"]
        assert "a_emb[:, :-1]" not in text["model.py"]


def test_unchanged_stamp_means_no_rebuild_and_a_change_rebuilds(tmp_path):
    source = tmp_path / "encdec"
    shutil.copytree(ROOT / "encdec", source, ignore=shutil.ignore_patterns("__pycache__"))
    first = edition.ensure("kv_cache", tmp_path / "out", source=source)
    stamp = first.parent / "STAMP"
    before = (first.resolve(), stamp.stat().st_mtime_ns, stamp.read_text())
    again = edition.ensure("kv_cache", tmp_path / "out", source=source)
    assert (again.resolve(), stamp.stat().st_mtime_ns, stamp.read_text()) == before
    with open(source / "data.py", "a") as f:
        f.write("\n# changed\n")
    rebuilt = edition.ensure("kv_cache", tmp_path / "out", source=source)
    assert rebuilt == first and rebuilt.resolve() != before[0]  # same path, new edition under it
    assert (rebuilt.parent / "STAMP").read_text() != before[2]
    assert (rebuilt / "data.py").read_text().endswith("# changed\n")


def test_a_forced_rebuild_leaves_the_edition_a_kernel_resolved(tmp_path):
    """`python -m autograder.edition` (always a rebuild) while a kernel reads the current edition:
    an intact one stays where it is (a kernel or zygote keeps its paths); a damaged one's replacement
    goes beside it, its folder stays whole, and is kept KEEP_OLD_S from being superseded."""
    out = tmp_path / "out"
    running = edition.ensure("decoder_block", out).resolve()  # what a kernel started now mounts
    assert edition.build("decoder_block", out).resolve() == running  # intact: kept
    (running / "data.py").write_text("# damaged\n")
    files = sorted(p.relative_to(running) for p in running.rglob("*.py"))
    old = time.time() - 2 * edition_publish.KEEP_OLD_S
    os.utime(running.parent, (old, old))  # built long ago
    rebuilt = edition.build("decoder_block", out).resolve()
    assert rebuilt != running and rebuilt.parent.parent == running.parent.parent
    assert (rebuilt / "data.py").read_text() != "# damaged\n"
    assert sorted(p.relative_to(running) for p in running.rglob("*.py")) == files  # nothing removed under it
    assert (out / "decoder_block" / "encdec").resolve() == rebuilt
    edition.build("decoder_block", out)  # a third build prunes only what is KEEP_OLD_S past superseded
    assert running.is_dir()


def test_graders_building_at_once_agree(tmp_path):
    code = "import sys; from autograder import edition; print(edition.ensure('decoder_block', sys.argv[1]))"
    procs = [
        subprocess.Popen([PY, "-c", code, str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE, text=True) for _ in range(6)
    ]
    paths = {p.communicate(timeout=120)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs)
    assert paths == {str(tmp_path / "decoder_block" / "encdec")}
    built = [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert len(built) == 1 and (tmp_path / "decoder_block").resolve().name == built[0]


def test_build_fails_loudly(tmp_path):
    def course(targets):
        (tmp_path / "sol" / "x").mkdir(parents=True, exist_ok=True)
        nb = {"cells": [], "metadata": {"encdec": {"targets": targets}}, "nbformat": 4, "nbformat_minor": 5}
        (tmp_path / "sol" / "x" / "x.ipynb").write_text(json.dumps(nb))
        return tmp_path / "sol"

    with pytest.raises(edition.EditionError, match="encdec.model.NoSuchBlock"):
        edition.build("x", tmp_path / "out", solutions=course(["encdec.model.NoSuchBlock.forward"]))
    with pytest.raises(edition.EditionError, match="encdec.train"):
        edition.build("x", tmp_path / "out", solutions=course(["encdec.train.train"]))
    with pytest.raises(edition.EditionError, match="no solution notebook"):
        edition.targets("missing", solutions=course([]))
    source = tmp_path / "encdec"
    shutil.copytree(ROOT / "encdec", source, ignore=shutil.ignore_patterns("__pycache__"))
    with open(source / "grading" / "__init__.py", "a") as f:
        f.write("\nfrom ..train import train  # noqa\n")
    with pytest.raises(edition.EditionError, match="imports encdec.train at module level"):
        edition.build("x", tmp_path / "out", source=source, solutions=course([]))


def test_cli_builds_every_assignment(tmp_path):
    run = subprocess.run(
        [PY, "-m", "autograder.edition", "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    for a in ASSIGNMENTS:
        assert f"{a}: {tmp_path / a / 'encdec'}" in run.stdout
        assert (tmp_path / a / "encdec" / "_graded.py").is_file() and (tmp_path / a / "STAMP").is_file()
    bad = subprocess.run(
        [PY, "-m", "autograder.edition", "--out", str(tmp_path), "nope"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 1 and "no solution notebook" in bad.stderr


def test_kernel_without_a_known_assignment_is_not_started(tmp_path):
    import asyncio

    from autograder.sandbox.kernel import SandboxKernelManager
    from autograder.sandbox.sandbox import SandboxUnavailable

    for assignment, says in [("", "no assignment given"), ("nope", "no solution notebook")]:
        km = SandboxKernelManager(assignment=assignment)
        with pytest.raises(SandboxUnavailable, match=says):
            asyncio.run(km.start_kernel(cwd=str(tmp_path)))


INSIDE = r"""
import json, os
import torch
import encdec.model
got = {"file": encdec.__file__, "listing": sorted(os.listdir(os.path.dirname(encdec.__file__)))}
try:
    encdec.model.DecoderBlock(2, 8, 16, 0.0)(torch.randn(1, 3, 8), torch.randn(1, 4, 8))
    got["forward"] = "ran"
except Exception as err:
    got["forward"] = [type(err).__name__, str(err)]
try:
    import encdec.train
    got["train"] = "imported"
except ImportError:
    got["train"] = "absent"
got["editions_visible"] = [p for p in (EDITIONS, "/staging/editions") if os.path.isdir(p) and os.listdir(p)]
x = torch.randn(1, 3, 8)
got["mha"] = list(encdec.model.MultiHeadAttention(2, 8)(x, x, x, torch.ones(1, 3, 3, dtype=torch.bool).triu(1)).shape)

# torch's ready-made Transformer layers are gone (autograder/torch_edition.py), by any name
import importlib, inspect
import torch.nn.functional as F


def attempt(make):
    try:
        make()
        return "ran"
    except Exception as err:
        return [type(err).__name__, str(err).split(":")[0]]


def mha_forward(module):
    fn = module.multi_head_attention_forward
    n = sum(p.default is p.empty for p in inspect.signature(fn).parameters.values())
    return fn(*[None] * n)


layers = {"decoder_layer": lambda: getattr(torch.nn, "TransformerDecoder" + "Layer")(8, 2, 16),
          "encoder_layer": lambda: torch.nn.TransformerEncoderLayer(8, 2, 16),
          "transformer": lambda: torch.nn.Transformer(8, 2),
          "mha": lambda: torch.nn.MultiheadAttention(8, 2),
          "mha_forward": lambda: mha_forward(F)}
got["torch"] = {k: attempt(v) for k, v in layers.items()}
# (torch.nn.functional cannot be reloaded, even in plain torch: its C functions' docstrings are set once)
reloaded = {m: importlib.reload(importlib.import_module(m)) for m in
            ("torch.nn.modules.activation", "torch.nn.modules.transformer")}
got["torch_reloaded"] = {
    "decoder_layer": attempt(lambda: reloaded["torch.nn.modules.transformer"].TransformerDecoderLayer(8, 2, 16)),
    "mha": attempt(lambda: reloaded["torch.nn.modules.activation"].MultiheadAttention(8, 2))}
files = {m: importlib.import_module(m) for m in ("torch.nn.functional", *reloaded)}
# what the loader would hand anyone who reloads or execs a module again, and the cached bytecode's bytes
def names(code):
    return set(code.co_names).union(*(names(c) for c in code.co_consts if inspect.iscode(c)))


got["torch_code"] = {m: "GradedRunUsesTorchLayer" in names(r.__spec__.loader.get_code(m)) for m, r in files.items()}
got["torch_bytecode"] = {m: b"GradedRunUsesTorchLayer" in open(importlib.util.cache_from_source(r.__file__), "rb").read()
                         for m, r in files.items() if os.path.exists(importlib.util.cache_from_source(r.__file__))}
got["torch_source"] = {m: "GradedRunUsesTorchLayer" in inspect.getsource(r) for m, r in files.items()}
got["torch_given"] = [list(torch.nn.Linear(8, 8)(x).shape), list(torch.nn.LayerNorm(8)(x).shape),
                      round(F.softmax(x, -1).sum().item()), list(F.scaled_dot_product_attention(x, x, x).shape),
                      list(encdec.model.MultiHeadAttention(2, 8)(x, x, x).shape)]
print(json.dumps(got))
"""


@pytest.mark.grading
@pytest.mark.parametrize("prefork", [True, False], ids=["zygote", "bwrap-per-kernel"])
def test_graded_kernel_sees_the_edition_not_the_package(tmp_path, prefork):
    """A real sandboxed kernel for decoder_block, started by SandboxedExecute through
    SandboxKernelManager (so the assignment travels the way nbgrader's does)."""
    import nbformat
    from traitlets.config import Config

    from autograder.sandbox.execute import SandboxedExecute
    from autograder.sandbox.kernel import Zygote

    if os.geteuid() != 0:
        pytest.skip("the grading sandbox runs kernels under their own uid, so as root")
    if shutil.which("bwrap") is None:
        pytest.fail("bubblewrap is missing: run `make system` (the sandbox is required for grading)")
    work = tmp_path / "autograded" / "alice" / "decoder_block"  # where the zygote expects it
    work.mkdir(parents=True)
    code = f"EDITIONS = {str(edition.DEFAULT_OUT)!r}\n" + INSIDE
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    ex = SandboxedExecute(config=Config({"SandboxKernelManager": {"prefork": prefork}}))
    Zygote.stop_all()  # none left by an earlier test of this worker (another edition's paths start another)
    try:
        ex.preprocess(nb, {"nbgrader": {"assignment": "decoder_block"}, "metadata": {"path": str(work)}})
    finally:
        zygotes = len(Zygote._running)
        Zygote.stop_all()
    assert zygotes == (1 if prefork else 0)
    outputs = nb.cells[0].outputs
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert text, outputs
    got = json.loads(text.strip().splitlines()[-1])
    package = ROOT / "encdec"
    assert got["file"] == str(package / "__init__.py")  # at the package's own path ...
    assert "_graded.py" in got["listing"] and "train.py" not in got["listing"]  # ... the edition
    assert got["forward"] == [
        "GradedRunUsesYourCode",
        "encdec.model.DecoderBlock.forward is not available in a "
        "graded run: the grader runs your own code for this exercise, so write it instead of "
        "calling the package's version.",
    ]
    assert got["train"] == "absent" and got["editions_visible"] == []
    assert got["mha"] == [1, 3, 8]
    removed = {
        "decoder_layer": "torch.nn.TransformerDecoderLayer",
        "encoder_layer": "torch.nn.TransformerEncoderLayer",
        "transformer": "torch.nn.Transformer",
        "mha": "torch.nn.MultiheadAttention",
        "mha_forward": "torch.nn.functional.multi_head_attention_forward",
    }
    said = {k: ["GradedRunUsesTorchLayer", f"{v} is not available in a graded run"] for k, v in removed.items()}
    assert got["torch"] == said
    assert got["torch_reloaded"] == {k: said[k] for k in ("decoder_layer", "mha")}  # no pyc resurrects them
    assert len(got["torch_code"]) == 3 and all(got["torch_code"].values()) and all(got["torch_source"].values())
    assert got["torch_bytecode"] == dict.fromkeys(got["torch_bytecode"], True)  # every cached copy is the edition's
    assert got["torch_given"] == [[1, 3, 8], [1, 3, 8], 3, [1, 3, 8], [1, 3, 8]]


def test_a_grader_that_may_not_rebuild_a_stale_edition_says_who_can(tmp_path, monkeypatch):
    """A plain user's grader facing an out-of-date edition in a folder it cannot write (root's build/)."""
    real = Path.mkdir

    def refuse(self, *args, **kwargs):
        if self.name.startswith(".decoder_block-tmp-"):
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", refuse)
    with pytest.raises(edition.EditionError, match="python -m autograder.edition"):
        edition.ensure("decoder_block", tmp_path)


def test_torch_edition_removes_the_ready_made_layers_and_keeps_every_other_line(tmp_path):
    """The edition of torch's files (autograder/torch_edition.py), from the installed torch."""
    import importlib.util
    import marshal

    from autograder import torch_edition

    torch_edition.generate(tmp_path)
    installed = torch_edition.torch_folder()
    for rel, removed in torch_edition.REMOVED.items():
        old, new = (installed / rel).read_text(), (tmp_path / "torch" / rel).read_text()
        tree = ast.parse(new)
        kept = set(range(1, len(old.splitlines()) + 1))
        for qualname, name in removed.items():
            fn = torch_edition._find(tree, qualname, rel)
            error = "GradedRunUsesTorchLayer" if rel == "nn/functional.py" else "F.GradedRunUsesTorchLayer"
            assert [ast.unparse(s) for s in fn.body] == [f"raise {error}({name!r})"]
            was = torch_edition._find(ast.parse(old), qualname, rel)
            kept -= set(range(was.body[0].lineno, was.body[-1].end_lineno + 1))
        # every line outside the removed bodies is the installed one, at its own number; the
        # bodies are blank after their raise; what follows the installed text is comment or the error
        old_lines, new_lines = old.splitlines(), new.splitlines()
        assert all(old_lines[i - 1] == new_lines[i - 1] for i in kept), rel
        assert not any(
            new_lines[i - 1].strip()
            for i in set(range(1, len(old_lines) + 1)) - kept
            if "GradedRunUsesTorchLayer" not in new_lines[i - 1]
        ), rel
        tail = ast.parse("\n".join(new_lines[len(old_lines) :]))
        assert [type(n).__name__ for n in tail.body] == (["ClassDef"] if rel == "nn/functional.py" else [])
        # the compiled copy mounted over the installed one is valid for the edition's text, and only for it
        for pyc in installed.joinpath(rel).parent.joinpath("__pycache__").glob(f"{Path(rel).stem}.*.pyc"):
            mine = tmp_path / "torch" / Path(rel).parent / "__pycache__" / pyc.name
            data = mine.read_bytes()
            st = (tmp_path / "torch" / rel).stat()
            assert int.from_bytes(data[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF
            assert int.from_bytes(data[12:16], "little") == st.st_size & 0xFFFFFFFF
            assert data[:4] == importlib.util.MAGIC_NUMBER and b"GradedRunUsesTorchLayer" in data
            assert marshal.loads(data[16:]).co_filename == str(installed / rel)
    assert {installed / rel for rel in torch_edition.REMOVED} <= {b for _, b in torch_edition.files(tmp_path)}


def test_the_package_uses_none_of_torchs_removed_layers():
    """Honest work loses nothing: encdec (and so each grading edition) names none of what a graded
    run's torch lacks, in code or in a string a getattr could use."""
    from autograder import torch_edition

    gone = {q.split(".")[0] for removed in torch_edition.REMOVED.values() for q in removed} - {"Transformer"}
    for path in sorted((ROOT / "encdec").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute):
                assert node.attr not in gone and not (node.attr == "Transformer" and "nn" in ast.unparse(node.value)), (
                    path,
                    ast.unparse(node),
                )
            elif isinstance(node, ast.alias):
                assert node.name.split(".")[-1] not in gone, (path, node.name)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in gone:
                raise AssertionError((path, node.value))


def test_torch_edition_is_rebuilt_when_torch_changes(tmp_path, monkeypatch):
    from autograder import torch_edition

    fake = tmp_path / "torch"
    for rel in torch_edition.REMOVED:
        (fake / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(torch_edition.torch_folder() / rel, fake / rel)
    monkeypatch.setattr(torch_edition, "torch_folder", lambda: fake)
    first = edition.torch_files(tmp_path / "out")
    assert [b for _, b in first] == [fake / rel for rel in torch_edition.REMOVED]  # no compiled copies here
    assert edition.torch_files(tmp_path / "out") == first  # current: not rebuilt
    with open(fake / "nn/modules/transformer.py", "a") as f:
        f.write("\n# an upgrade\n")
    again = edition.torch_files(tmp_path / "out")
    assert again != first and again[0][0].read_text().startswith(first[0][0].read_text()[:1000])
    # a torch whose layer moved is refused, not mounted half-edited
    text = (fake / "nn/modules/transformer.py").read_text().replace("class TransformerDecoderLayer(", "class Moved(")
    (fake / "nn/modules/transformer.py").write_text(text)
    with pytest.raises(edition.EditionError, match="no definition of TransformerDecoderLayer"):
        edition.torch_files(tmp_path / "out")
