"""The exercises' checks: build inputs, run the student's code, compare, name the mistake.

Every graded test cell of ``solutions/*/*.ipynb`` calls ``run(check_id, impl)``. A check
builds its inputs from a seed (visible checks: a fixed seed; hidden checks: a seed derived from
``.grading/seed.json``, written fresh by the grader before the notebook runs), runs ``impl``,
saves the outputs to ``.grading/<check_id>.npz`` (plain arrays, no pickle) and compares them
with the reference implementation (``encdec.model``, ``encdec.generate``), raising
``AssertionError`` with a diagnosis from :mod:`encdec.grading.variants` when they differ.

The verdict that counts is decided again outside the student's kernel by ``verify`` (called
from ``autograder/trusted.py``): it rebuilds the same inputs, recomputes the reference and
judges the saved outputs, so nothing the student's process does to asserts, torch or the test
cells changes the score. Chapters 11-13 teach what is checked.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import secrets
import textwrap
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from torch import Tensor, nn

from .. import attention as A
from .. import model as Mdl
from ..config import ModelConfig
from ..generate import greedy_decode
from . import variants as Var

GRADING_DIR = ".grading"
REFERENCE_DIR = "reference"
SEED_FILE = "seed.json"
MAX_OUTPUT_BYTES = 20_000_000  # a saved output larger than this is not read back
ATOL = RTOL = 1e-4


@dataclass
class Result:
    """A check's verdict: ``ok`` and the message the student and the instructor read."""

    ok: bool
    message: str


@dataclass
class Check:
    """One graded check: how to build inputs, run the student's code, and judge outputs."""

    id: str
    title: str  # what is checked, in one line
    task: str  # what the student writes (named in the "not implemented" message)
    build: Callable[[int], dict]
    run: Callable[[Any, dict], dict]  # (impl, inputs) -> outputs; runs student code
    reference: Callable[[dict], dict]  # inputs -> reference outputs
    judge: Callable[[dict, dict, dict], Result]  # (got, ref, inputs)
    hidden: bool = False
    seed: int = 0
    judge_error: Callable[[str, dict], str | None] = field(default=lambda msg, inputs: None)


CHECKS: dict[str, Check] = {}


def _register(**kw) -> Check:
    c = Check(**kw)
    CHECKS[c.id] = c
    return c


# --- seeds, weights, saving -------------------------------------------------------------------

def derive_seed(master: int, check_id: str) -> int:
    """Seed of one hidden check from the grader's master seed."""
    return int.from_bytes(hashlib.sha256(f"{master}:{check_id}".encode()).digest()[:4], "big") & 0x7FFFFFFF


def read_master_seed(workdir: Path) -> int:
    """The seed the grader wrote; a fresh one (saved for the next checks) when there is none."""
    path = workdir / GRADING_DIR / SEED_FILE
    try:
        return int(json.loads(path.read_text())["seed"])
    except (OSError, ValueError, KeyError, TypeError):
        seed = secrets.randbelow(2**31)
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps({"seed": seed}))
        return seed


def check_seed(check: Check, master: int | None) -> int:
    return derive_seed(master, check.id) if check.hidden else check.seed


def randomize_(module: nn.Module, seed: int) -> nn.Module:
    """Weights that make every parameter matter: each LayerNorm has its own non-trivial gain
    and bias, so skipping or swapping a norm changes the output. Returns the module in eval mode."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            r = torch.randn(p.shape, generator=g)
            owner = _owner(module, name)
            if isinstance(owner, nn.LayerNorm):
                p.copy_(1.0 + 0.5 * r if name.endswith("weight") else 0.5 * r)
            elif isinstance(owner, nn.Embedding):
                p.copy_(r)  # token vectors of norm ~sqrt(M), like nn.Embedding's default
            elif p.dim() > 1:
                p.copy_(r * (1.5 / math.sqrt(p.shape[1])))  # (out, in): outputs of order 1
            else:
                p.copy_(0.3 * r)
    return module.eval()


def _owner(module: nn.Module, param_name: str) -> nn.Module:
    return module.get_submodule(param_name.rsplit(".", 1)[0]) if "." in param_name else module


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed + 7919)


def _to_array(x: Any, what: str) -> np.ndarray:
    """Student output -> numpy, with a clear message when it is not a tensor."""
    if isinstance(x, Tensor):
        return x.detach().cpu().numpy()
    if isinstance(x, (np.ndarray, float, int, bool)):
        return np.asarray(x)
    raise TypeError(f"{what} must be a torch.Tensor, got {type(x).__name__}")


def save_outputs(workdir: Path, check_id: str, outputs: dict, status: str = "ok", error: str = "") -> None:
    """Write ``.grading/<check_id>.npz``: plain arrays and two strings, nothing pickled."""
    d = workdir / GRADING_DIR
    d.mkdir(exist_ok=True)
    arrays = {k: np.asarray(v) for k, v in outputs.items()}
    np.savez(d / f"{check_id}.npz", __status__=np.array(status), __error__=np.array(error[:4000]), **arrays)


def load_outputs(path: Path) -> dict[str, np.ndarray]:
    """Read a student's saved outputs with numpy's safe loader (object arrays are refused).

    Symbolic links are refused, and so are archives that would unpack to more than a check
    writes (a compressed "zip bomb"), before anything is decompressed.
    """
    if path.is_symlink() or path.parent.is_symlink():
        raise ValueError(f"{path.name} is a symbolic link, not a file the check wrote")
    if path.stat().st_size > MAX_OUTPUT_BYTES:
        raise ValueError(f"{path.name} is {path.stat().st_size} bytes, more than a check writes")
    with zipfile.ZipFile(path) as zf:
        unpacked = sum(info.file_size for info in zf.infolist())
    if unpacked > MAX_OUTPUT_BYTES:
        raise ValueError(f"{path.name} unpacks to {unpacked} bytes, more than a check writes")
    with np.load(path, allow_pickle=False) as z:
        return {k: np.array(z[k]) for k in z.files}


# --- comparing and naming the mistake ---------------------------------------------------------

def _describe(a: np.ndarray) -> str:
    return f"shape {tuple(a.shape)}, {a.dtype}"


def _first_mismatch(got: np.ndarray, exp: np.ndarray, exact: bool) -> str:
    if exact:
        bad = got != exp
    else:
        bad = ~np.isclose(got.astype(np.float64), exp.astype(np.float64), atol=ATOL, rtol=RTOL)
        bad |= np.isnan(got) != np.isnan(exp)
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    n = int(bad.sum())
    return f"first mismatch at index {idx}: expected {_fmt(exp[idx])}, got {_fmt(got[idx])} ({n} of {bad.size} entries differ)"


def _fmt(x: np.generic) -> str:
    v = x.item()
    return f"{v:.6g}" if isinstance(v, float) else repr(v)


def _same(got: np.ndarray, exp: np.ndarray, exact: bool = False) -> bool:
    if got.shape != exp.shape:
        return False
    if exact:
        return bool(np.array_equal(got, exp))
    if not (np.issubdtype(got.dtype, np.number) or got.dtype == bool):
        return False
    return bool(np.allclose(got.astype(np.float64), exp.astype(np.float64), atol=ATOL, rtol=RTOL, equal_nan=False))


def _match(got: np.ndarray, candidates: dict[str, Any], exact: bool = False) -> str | None:
    for name, cand in candidates.items():
        c = _to_array(cand, name) if not isinstance(cand, np.ndarray) else cand
        if _same(got, c, exact):
            return Var.base_name(name)
    return None


def _diagnosis(name: str | None) -> str:
    """'\nDiagnosis: ...' wrapped to 88 columns (feedback HTML does not wrap), or ''."""
    if name is None:
        return ""
    text = textwrap.fill(f"Diagnosis: {Var.MISCONCEPTIONS[Var.base_name(name)]}", width=88, subsequent_indent="  ")
    return "\n" + text


def compare(check: Check, what: str, got: np.ndarray | None, exp: np.ndarray, *, exact: bool = False,
            candidates: Callable[[], dict] | None = None, shape_hint: Callable[[tuple], str | None] | None = None) -> Result:
    """Compare one output with the reference; on a mismatch say what and why."""
    if got is None:
        return Result(False, f"{check.id}: {what} was not saved by the check (outputs missing).")
    if _same(got, exp, exact):
        return Result(True, f"{check.title}: {what} matched the reference.")
    details = [f"  expected: {_describe(exp)}", f"  got:      {_describe(got)}"]
    name = None
    if got.shape == exp.shape:
        details.append("  " + _first_mismatch(got, exp, exact))
    elif shape_hint is not None:
        name = shape_hint(tuple(got.shape))
    if name is None and candidates is not None:
        name = _match(got, candidates(), exact)
    head = f"{check.id}: {check.title}: {what} did not match the reference." + _diagnosis(name)
    return Result(False, "\n".join([head, *details]))


def _all(*results: Result) -> Result:
    """The first failure (the others usually repeat it), or the first result when all passed."""
    bad = [r for r in results if not r.ok]
    if bad:
        more = f"\n({len(bad) - 1} more output(s) of this check did not match either.)" if len(bad) > 1 else ""
        return Result(False, bad[0].message + more)
    return results[0]


def _error_hint(patterns: dict[str, str]) -> Callable[[str, dict], str | None]:
    """Exception message -> misconception, by substrings (formatted with the inputs)."""
    def hint(msg: str, inputs: dict) -> str | None:
        for name, pat in patterns.items():
            if all(p.format(**inputs.get("dims", {})) in msg for p in pat.split("&&")):
                return name
        return None
    return hint


# --- chapter 11: get_subsequent_mask, masked_softmax, DecoderBlock.forward ---------------------

def _build_mask(seed: int, hidden: bool) -> dict:
    g = _gen(seed)
    N, K = (3, 6) if not hidden else (int(torch.randint(2, 5, (1,), generator=g)), int(torch.randint(3, 9, (1,), generator=g)))
    return {"seq": torch.randint(0, 16, (N, K), generator=g), "dims": {"N": N, "K": K}}


def _run_mask(impl, inputs):
    out = impl(inputs["seq"].clone())
    arr = _to_array(out, "get_subsequent_mask(seq)")
    if arr.dtype != bool:
        raise TypeError(f"get_subsequent_mask must return a boolean tensor (True = forbidden), got dtype {out.dtype}")
    return {"mask": arr}


def _judge_mask(check):
    def judge(got, ref, inputs):
        return compare(check, "the mask", got.get("mask"), ref["mask"], exact=True,
                       candidates=lambda: {k: v.numpy() for k, v in Var.mask_variants(inputs["seq"]).items()})
    return judge


for _cid, _hidden, _seed in (("decoder_block.mask", False, 1101), ("decoder_block.mask_hidden", True, 0)):
    _c = _register(id=_cid, title="get_subsequent_mask", task="get_subsequent_mask(seq)", hidden=_hidden, seed=_seed,
                   build=(lambda s, h=_hidden: _build_mask(s, h)),
                   run=_run_mask, reference=lambda inp: {"mask": A.get_subsequent_mask(inp["seq"]).numpy()},
                   judge=None)
    _c.judge = _judge_mask(_c)


def _build_softmax(seed: int, hidden: bool) -> dict:
    g = _gen(seed)
    N, L = (2, 5) if not hidden else (int(torch.randint(2, 5, (1,), generator=g)), int(torch.randint(3, 9, (1,), generator=g)))
    scores = 3 * torch.randn(N, L, L, generator=g)
    mask = A.get_subsequent_mask(torch.zeros(N, L, dtype=torch.long)).clone()
    if hidden:  # plus random padding columns, never a whole row
        pad = torch.rand(N, 1, L, generator=g) < 0.3
        pad[..., 0] = False
        mask = mask | pad
    return {"scores": scores, "mask": mask, "dims": {"N": N, "L": L}}


def _run_softmax(impl, inputs):
    out = impl(inputs["scores"].clone(), inputs["mask"].clone())
    return {"weights": _to_array(out, "masked_softmax(scores, mask)").astype(np.float32)}


def _judge_softmax(check):
    def judge(got, ref, inputs):
        w = got.get("weights")
        r = compare(check, "the attention weights", w, ref["weights"],
                    candidates=lambda: Var.softmax_variants(inputs["scores"], inputs["mask"]))
        if not r.ok and w is not None and w.shape == ref["weights"].shape:
            sums = w.sum(-1)
            if not np.allclose(sums, 1.0, atol=1e-4):
                r.message += f"\n  rows must sum to 1; row sums range from {sums.min():.4f} to {sums.max():.4f}"
        return r
    return judge


for _cid, _hidden, _seed in (("decoder_block.masked_softmax", False, 1102), ("decoder_block.masked_softmax_hidden", True, 0)):
    _c = _register(id=_cid, title="masked_softmax", task="masked_softmax(scores, mask)", hidden=_hidden, seed=_seed,
                   build=(lambda s, h=_hidden: _build_softmax(s, h)), run=_run_softmax,
                   reference=lambda inp: {"weights": A.masked_softmax(inp["scores"], inp["mask"]).numpy()}, judge=None)
    _c.judge = _judge_softmax(_c)


def _build_block(seed: int, hidden: bool) -> dict:
    g = _gen(seed)
    if hidden:
        N = int(torch.randint(2, 5, (1,), generator=g))
        Ka = int(torch.randint(3, 8, (1,), generator=g))
        Kq = Ka + int(torch.randint(2, 7, (1,), generator=g))
        H, M = [(2, 16), (4, 24), (2, 24)][int(torch.randint(0, 3, (1,), generator=g))]
    else:
        N, Ka, Kq, H, M = 2, 5, 9, 2, 16
    F = 2 * M
    block = randomize_(Mdl.DecoderBlock(H, M, F, 0.1), seed)
    dec = torch.randn(N, Ka, M, generator=g)
    enc = torch.randn(N, Kq, M, generator=g)
    j = int(torch.randint(1, Ka, (1,), generator=g))  # first position changed by the causality probe
    dec_changed = dec.clone()
    dec_changed[:, j:] = torch.randn(N, Ka - j, M, generator=g)
    enc_changed = torch.randn(N, Kq, M, generator=g)
    mask = A.get_subsequent_mask(torch.zeros(N, Ka, dtype=torch.long))
    return {"block": block, "dec": dec, "enc": enc, "mask": mask, "dec_changed": dec_changed,
            "enc_changed": enc_changed, "j": j, "dims": {"N": N, "Ka": Ka, "Kq": Kq, "M": M, "H": H, "F": F}}


def _student_block(impl, inputs) -> nn.Module:
    d = inputs["dims"]
    block = impl(d["H"], d["M"], d["F"], 0.1)
    block.load_state_dict(inputs["block"].state_dict())
    return block.eval()


def _block_out(block, dec, enc, mask) -> np.ndarray:
    with torch.no_grad():
        out = block(dec.clone(), enc.clone(), mask.clone())
    return _to_array(out, "DecoderBlock.forward(dec_inp, enc_inp, mask)").astype(np.float32)


def _run_block(probe: str):
    def run(impl, inputs):
        b = _student_block(impl, inputs)
        out = {"out": _block_out(b, inputs["dec"], inputs["enc"], inputs["mask"])}
        if probe == "causal":
            out["out_changed"] = _block_out(b, inputs["dec_changed"], inputs["enc"], inputs["mask"])
        elif probe == "question":
            out["out_changed"] = _block_out(b, inputs["dec"], inputs["enc_changed"], inputs["mask"])
        return out
    return run


def _ref_block(probe: str):
    def ref(inputs):
        b = inputs["block"]
        out = {"out": _block_out(b, inputs["dec"], inputs["enc"], inputs["mask"])}
        if probe == "causal":
            out["out_changed"] = _block_out(b, inputs["dec_changed"], inputs["enc"], inputs["mask"])
        elif probe == "question":
            out["out_changed"] = _block_out(b, inputs["dec"], inputs["enc_changed"], inputs["mask"])
        return out
    return ref


def _block_shape_hint(inputs):
    d = inputs["dims"]
    return lambda shape: "cross_q_from_encoder" if shape == (d["N"], d["Kq"], d["M"]) else None


def _judge_block(check, probe: str):
    def judge(got, ref, inputs):
        cands = lambda dec=inputs["dec"], enc=inputs["enc"]: Var.block_variants(inputs["block"], dec, enc, inputs["mask"])  # noqa: E731
        if probe == "shape":
            d = inputs["dims"]
            out = got.get("out")
            exp = (d["N"], d["Ka"], d["M"])
            if out is not None and out.shape == exp and np.isfinite(out).all():
                return Result(True, f"{check.title}: output shape {exp} (N, Ka, M) and finite values.")
            shape = None if out is None else tuple(out.shape)
            name = _block_shape_hint(inputs)(shape) if shape else None
            return Result(False, f"{check.id}: DecoderBlock output should have shape (N, Ka, M) = {exp} "
                                 f"with finite values; got {shape}." + _diagnosis(name))
        r = compare(check, "the block output", got.get("out"), ref["out"], candidates=cands,
                    shape_hint=_block_shape_hint(inputs))
        if probe == "plain":
            return r
        oc = got.get("out_changed")
        if probe == "causal":
            j = inputs["j"]
            o = got.get("out")
            if o is not None and oc is not None and o.shape == oc.shape == ref["out"].shape and not np.allclose(o[:, :j], oc[:, :j], atol=ATOL):
                return Result(False, f"{check.id}: answer positions 0..{j - 1} changed when only positions {j}.. of "
                                     f"dec_inp changed." + _diagnosis("not_causal") + ("\n" + r.message if not r.ok else ""))
            r2 = compare(check, "the output after changing later answer positions", oc, ref["out_changed"],
                         candidates=lambda: Var.block_variants(inputs["block"], inputs["dec_changed"], inputs["enc"], inputs["mask"]),
                         shape_hint=_block_shape_hint(inputs))
            return _all(r, r2)
        if probe == "question":
            o = got.get("out")
            if o is not None and oc is not None and o.shape == oc.shape and np.allclose(o, oc, atol=ATOL):
                return Result(False, f"{check.id}: the output did not change when enc_inp changed." + _diagnosis("ignores_question"))
            r2 = compare(check, "the output for a different question memory", oc, ref["out_changed"],
                         candidates=lambda: Var.block_variants(inputs["block"], inputs["dec"], inputs["enc_changed"], inputs["mask"]),
                         shape_hint=_block_shape_hint(inputs))
            return _all(r, r2)
        return r
    return judge


_BLOCK_ERRORS = _error_hint({
    "cross_kv_from_decoder": "must have the same length",
    "cross_q_from_encoder": "({Ka})&&({Kq})",
})

for _cid, _hidden, _seed, _probe, _title in (
    ("decoder_block.shapes", False, 1103, "shape", "DecoderBlock output shape"),
    ("decoder_block.output", False, 1104, "plain", "DecoderBlock.forward"),
    ("decoder_block.output_hidden", True, 0, "plain", "DecoderBlock.forward on fresh weights and sizes"),
    ("decoder_block.causal_hidden", True, 0, "causal", "DecoderBlock causality"),
    ("decoder_block.question_hidden", True, 0, "question", "DecoderBlock reads the encoder memory"),
):
    _c = _register(id=_cid, title=_title, task="DecoderBlock.forward", hidden=_hidden, seed=_seed,
                   build=(lambda s, h=_hidden: _build_block(s, h)), run=_run_block(_probe),
                   reference=_ref_block(_probe), judge=None, judge_error=_BLOCK_ERRORS)
    _c.judge = _judge_block(_c, _probe)


# --- chapter 12: shift_targets, Transformer.forward, next_token_loss ---------------------------

_SMALL = dict(emb_dim=16, num_heads=2, feedforward_dim=32, num_enc_layers=2, num_dec_layers=2, dropout=0.2)


def _build_answers(seed: int, hidden: bool) -> dict:
    g = _gen(seed)
    N, Ka, Kq = (4, 5, 9) if not hidden else (int(torch.randint(2, 6, (1,), generator=g)),
                                             int(torch.randint(4, 8, (1,), generator=g)),
                                             int(torch.randint(9, 12, (1,), generator=g)))
    ans = torch.randint(0, 14, (N, Ka), generator=g)
    ans[:, 0] = 14  # BOS
    ans[:, -1] = 15  # EOS
    ques = torch.randint(0, 16, (N, Kq), generator=g)
    j = int(torch.randint(1, Ka - 1, (1,), generator=g))
    ans_changed = ans.clone()
    ans_changed[:, j:] = (ans[:, j:] + 1 + torch.randint(0, 12, (N, Ka - j), generator=g)) % 14
    ques_changed = (ques + 1 + torch.randint(0, 14, ques.shape, generator=g)) % 16
    cfg = ModelConfig(**_SMALL, position_encoding="sinusoid" if not hidden or seed % 2 else "simple")
    return {"ans": ans, "ques": ques, "ans_changed": ans_changed, "ques_changed": ques_changed, "j": j,
            "config": cfg, "dims": {"N": N, "Ka": Ka, "Kq": Kq, "Ka1": Ka - 1, "V": 16, "M": cfg.emb_dim}}


def _run_shift(impl, inputs):
    out = impl(inputs["ans"].clone())
    if not isinstance(out, tuple) or len(out) != 2:
        raise TypeError(f"shift_targets must return a pair (dec_in_b, labels_b), got {type(out).__name__}")
    return {"dec_in": _to_array(out[0], "dec_in_b"), "labels": _to_array(out[1], "labels_b")}


def _judge_shift(check):
    def judge(got, ref, inputs):
        pairs = Var.shift_variants(inputs["ans"])
        din, lab = got.get("dec_in"), got.get("labels")
        if din is not None and lab is not None:
            for name, (a, b) in pairs.items():
                if _same(din, a.numpy(), True) and _same(lab, b.numpy(), True):
                    named = Var.base_name(name)
                    break
            else:
                named = None
        else:
            named = None
        r = _all(compare(check, "dec_in_b", din, ref["dec_in"], exact=True),
                 compare(check, "labels_b", lab, ref["labels"], exact=True))
        if not r.ok:
            r.message += _diagnosis(named)
        return r
    return judge


for _cid, _hidden, _seed in (("target_slicing.shift", False, 1201), ("target_slicing.shift_hidden", True, 0)):
    _c = _register(id=_cid, title="shift_targets", task="shift_targets(ans_b)", hidden=_hidden, seed=_seed,
                   build=(lambda s, h=_hidden: _build_answers(s, h)), run=_run_shift,
                   reference=lambda inp: dict(zip(("dec_in", "labels"), (t.numpy() for t in Mdl.shift_targets(inp["ans"])))),
                   judge=None)
    _c.judge = _judge_shift(_c)


def _ref_model(inputs, seed_offset=0) -> Mdl.Transformer:
    m = Mdl.Transformer(inputs["config"])
    return randomize_(m, inputs["seed"] + seed_offset)


def _build_forward(seed: int, hidden: bool) -> dict:
    inputs = _build_answers(seed, hidden)
    inputs["seed"] = seed
    inputs["model"] = _ref_model(inputs)
    return inputs


def _logits(m, inputs, ques_key="ques", ans_key="ans") -> np.ndarray:
    q, a = inputs[ques_key], inputs[ans_key]
    with torch.no_grad():
        out = m(q.clone(), m.positions(q.shape[1]), a.clone(), m.positions(a.shape[1]))
    return _to_array(out, "Transformer.forward(...)").astype(np.float32)


def _run_forward(probe: str):
    def run(impl, inputs):
        m = impl(inputs["config"])
        m.load_state_dict(inputs["model"].state_dict())
        m.eval()
        out = {"logits": _logits(m, inputs)}
        if probe == "causal":
            out["logits_changed"] = _logits(m, inputs, ans_key="ans_changed")
        elif probe == "question":
            out["logits_changed"] = _logits(m, inputs, ques_key="ques_changed")
        return out
    return run


def _ref_forward(probe: str):
    def ref(inputs):
        m = inputs["model"]
        out = {"logits": _logits(m, inputs)}
        if probe == "causal":
            out["logits_changed"] = _logits(m, inputs, ans_key="ans_changed")
        elif probe == "question":
            out["logits_changed"] = _logits(m, inputs, ques_key="ques_changed")
        return out
    return ref


def _forward_cands(inputs, ques_key="ques", ans_key="ans"):
    m, q, a = inputs["model"], inputs[ques_key], inputs[ans_key]
    return lambda: Var.forward_variants(m, q, m.positions(q.shape[1]), a, m.positions(a.shape[1]))


def _forward_shape_hint(inputs):
    d = inputs["dims"]
    return lambda shape: "no_shift" if shape == (d["N"], d["Ka"], d["V"]) else None


def _judge_forward(check, probe: str):
    def judge(got, ref, inputs):
        d = inputs["dims"]
        lg = got.get("logits")
        if probe == "shape":
            exp = (d["N"], d["Ka1"], d["V"])
            if lg is not None and lg.shape == exp:
                return Result(True, f"{check.title}: logits of shape (N, Ka-1, V) = {exp}.")
            shape = None if lg is None else tuple(lg.shape)
            return Result(False, f"{check.id}: logits should have shape (N, Ka-1, V) = {exp}; got {shape}."
                                 + _diagnosis(_forward_shape_hint(inputs)(shape) if shape else None))
        r = compare(check, "the logits", lg, ref["logits"], candidates=_forward_cands(inputs),
                    shape_hint=_forward_shape_hint(inputs))
        if probe == "plain":
            return r
        lc = got.get("logits_changed")
        if probe == "causal":
            j = inputs["j"]
            # logits at positions < j read answer tokens < j only; the last answer token is never read.
            if lg is not None and lc is not None and lg.shape == lc.shape == ref["logits"].shape and not np.allclose(lg[:, :j], lc[:, :j], atol=ATOL):
                return Result(False, f"{check.id}: logits at positions 0..{j - 1} changed when only answer tokens {j}.. changed."
                                     + _diagnosis("not_causal") + ("\n" + r.message if not r.ok else ""))
            r2 = compare(check, "the logits after changing later answer tokens", lc, ref["logits_changed"],
                         candidates=_forward_cands(inputs, ans_key="ans_changed"), shape_hint=_forward_shape_hint(inputs))
            return _all(r, r2)
        if probe == "question":
            if lg is not None and lc is not None and lg.shape == lc.shape and np.allclose(lg, lc, atol=ATOL):
                return Result(False, f"{check.id}: the logits did not change when the question changed." + _diagnosis("ignores_question"))
            r2 = compare(check, "the logits for a different question", lc, ref["logits_changed"],
                         candidates=_forward_cands(inputs, ques_key="ques_changed"), shape_hint=_forward_shape_hint(inputs))
            return _all(r, r2)
        return r
    return judge


_FORWARD_ERRORS = _error_hint({
    "pos_not_sliced": "({Ka1})&&({Ka})&&size",
    "mask_from_full_answer": "mask of shape&&does not fit",
    "no_shift": "({Ka})&&({Ka1})",
})

for _cid, _hidden, _seed, _probe, _title in (
    ("target_slicing.forward_shapes", False, 1202, "shape", "Transformer.forward logits shape"),
    ("target_slicing.forward", False, 1203, "plain", "Transformer.forward"),
    ("target_slicing.forward_hidden", True, 0, "plain", "Transformer.forward on fresh weights and lengths"),
    ("target_slicing.causal_hidden", True, 0, "causal", "Transformer.forward causality"),
    ("target_slicing.question_hidden", True, 0, "question", "Transformer.forward reads the question"),
):
    _c = _register(id=_cid, title=_title, task="Transformer.forward", hidden=_hidden, seed=_seed,
                   build=(lambda s, h=_hidden: _build_forward(s, h)), run=_run_forward(_probe),
                   reference=_ref_forward(_probe), judge=None, judge_error=_FORWARD_ERRORS)
    _c.judge = _judge_forward(_c, _probe)


def _build_loss(seed: int, hidden: bool) -> dict:
    inputs = _build_answers(seed, hidden)
    d = inputs["dims"]
    inputs["logits"] = 2 * torch.randn(d["N"], d["Ka1"], d["V"], generator=_gen(seed + 1))
    d["NK1"] = d["N"] * d["Ka1"]
    d["NK"] = d["N"] * d["Ka"]
    return inputs


def _run_loss(impl, inputs):
    out = impl(inputs["logits"].clone(), inputs["ans"].clone())
    return {"loss": _to_array(out, "next_token_loss(logits, ans_b)").astype(np.float64).reshape(-1)}


def _judge_loss(check):
    def judge(got, ref, inputs):
        return compare(check, "the loss", got.get("loss"), ref["loss"],
                       candidates=lambda: {k: v.reshape(1).double().numpy() for k, v in Var.loss_variants(inputs["logits"], inputs["ans"]).items()})
    return judge


_LOSS_ERRORS = _error_hint({
    "labels_not_sliced": "({NK1})&&({NK})",
    "labels_not_sliced_align": "do not align with labels&&{Ka}",
})

for _cid, _hidden, _seed in (("target_slicing.loss", False, 1204), ("target_slicing.loss_hidden", True, 0)):
    _c = _register(id=_cid, title="next_token_loss", task="next_token_loss(logits, ans_b)", hidden=_hidden, seed=_seed,
                   build=(lambda s, h=_hidden: _build_loss(s, h)), run=_run_loss,
                   reference=lambda inp: {"loss": Mdl.sequence_loss(inp["logits"], inp["ans"][:, 1:]).reshape(1).double().numpy()},
                   judge=None, judge_error=_LOSS_ERRORS)
    _c.judge = _judge_loss(_c)


# --- chapter 13: KVCache.update and cached greedy decoding --------------------------------------

def _build_update(seed: int, hidden: bool) -> dict:
    g = _gen(seed)
    N, H, Dh = (2, 2, 4) if not hidden else (int(torch.randint(1, 4, (1,), generator=g)), 2, int(torch.randint(3, 7, (1,), generator=g)))
    lengths = (3, 1, 1) if not hidden else (int(torch.randint(2, 5, (1,), generator=g)), 1, 2, 1)
    steps = [(torch.randn(N, H, t, Dh, generator=g), torch.randn(N, H, t, Dh, generator=g)) for t in lengths]
    return {"steps": steps, "dims": {"N": N, "H": H, "Dh": Dh}}


def _run_update(impl, inputs):
    cache = impl()
    out = {}
    for i, (k, v) in enumerate(inputs["steps"]):
        res = cache.update(k.clone(), v.clone())
        if not isinstance(res, tuple) or len(res) != 2:
            raise TypeError(f"KVCache.update must return (keys, values), got {type(res).__name__}")
        out[f"k{i}"] = _to_array(res[0], "keys returned by update")
        out[f"v{i}"] = _to_array(res[1], "values returned by update")
        out[f"len{i}"] = np.array(len(cache))
    return out


def _ref_update(inputs):
    cache = A.KVCache()
    out = {}
    for i, (k, v) in enumerate(inputs["steps"]):
        kk, vv = cache.update(k, v)
        out[f"k{i}"], out[f"v{i}"], out[f"len{i}"] = kk.numpy(), vv.numpy(), np.array(len(cache))
    return out


def _judge_update(check):
    def judge(got, ref, inputs):
        cands = Var.update_variants(inputs["steps"])
        results = []
        for i in range(len(inputs["steps"])):
            name = f"k{i}"
            results.append(compare(check, f"the keys after update {i + 1}", got.get(name), ref[name],
                                   candidates=lambda i=i: {n: ks[i] for n, ks in cands.items() if len(ks) > i},
                                   shape_hint=None))
            results.append(compare(check, f"the values after update {i + 1}", got.get(f"v{i}"), ref[f"v{i}"]))
            results.append(compare(check, f"len(cache) after update {i + 1}", got.get(f"len{i}"), ref[f"len{i}"], exact=True))
            if not all(r.ok for r in results):
                break
        return _all(*results)
    return judge


for _cid, _hidden, _seed in (("kv_cache.update", False, 1301), ("kv_cache.update_hidden", True, 0)):
    _c = _register(id=_cid, title="KVCache.update", task="KVCache.update(k_new, v_new)", hidden=_hidden, seed=_seed,
                   build=(lambda s, h=_hidden: _build_update(s, h)), run=_run_update, reference=_ref_update, judge=None)
    _c.judge = _judge_update(_c)


def _build_decode(seed: int, hidden: bool) -> dict:
    g = _gen(seed)
    layers = 2 if not hidden else int(torch.randint(2, 4, (1,), generator=g))
    cfg = ModelConfig(emb_dim=16, num_heads=2, feedforward_dim=32, num_enc_layers=layers, num_dec_layers=layers,
                      dropout=0.2, position_encoding="sinusoid")
    model = randomize_(Mdl.Transformer(cfg), seed)
    N, n = (6, 5) if not hidden else (int(torch.randint(4, 9, (1,), generator=g)), int(torch.randint(4, 8, (1,), generator=g)))
    ques = torch.randint(0, 16, (N, 9), generator=g)
    # Keep only questions whose greedy path has no near-tie, so a correct cached decoder cannot
    # pick a different token because of float rounding.
    for _ in range(20):
        small = _min_margins(model, ques, n) < 1e-3
        if not small.any():
            break
        ques[small] = torch.randint(0, 16, (int(small.sum()), 9), generator=g)
    return {"model": model, "ques": ques, "n": n, "dims": {"N": N, "n": n}}


def _min_margins(model, ques, n) -> Tensor:
    """Per question, the smallest gap between the best and second-best logit along the greedy path."""
    tokens = greedy_decode(model, ques, n, use_cache=False)
    top2 = _teacher_forced_logits(model, ques, tokens).topk(2, dim=-1).values  # (n, N, 2)
    return (top2[..., 0] - top2[..., 1]).min(dim=0).values  # (N,)


def _run_decode(impl, inputs):
    model = copy.deepcopy(inputs["model"])
    counts = {"enc": 0, "dec": [], "logits": []}
    h1 = model.encoder.layers[0].register_forward_pre_hook(lambda mod, args: counts.__setitem__("enc", counts["enc"] + 1))

    def dec_hook(mod, args, kwargs):
        x = args[0] if args else kwargs.get("dec_inp")
        counts["dec"].append(int(x.shape[1]))

    def vocab_hook(mod, args, out):
        counts["logits"].append(out[:, -1] if out.dim() == 3 else out)  # the last position: (N, V)

    h2 = model.decoder.layers[0].register_forward_pre_hook(dec_hook, with_kwargs=True)
    h3 = model.proj_to_vocab.register_forward_hook(vocab_hook)
    try:
        with torch.no_grad():
            out = impl(model, inputs["ques"].clone(), inputs["n"])
    finally:
        h1.remove()
        h2.remove()
        h3.remove()
    steps = counts["logits"]
    step_logits = torch.stack(steps).numpy().astype(np.float32) if steps and len({s.shape for s in steps}) == 1 else np.zeros((0,), np.float32)
    return {"tokens": _to_array(out, "greedy_decode_cached(...)"), "encoder_calls": np.array(counts["enc"]),
            "decoder_lengths": np.array(counts["dec"], dtype=np.int64), "step_logits": step_logits}


@torch.no_grad()
def _teacher_forced_logits(model, ques, tokens) -> Tensor:
    """Logits (n, N, V) of each decoding step, computed uncached along ``tokens`` (N, 1+n)."""
    n = tokens.shape[1] - 1
    pos = model.positions(1 + n)
    x = model.emb_layer(tokens[:, :-1]) + pos[:, :n]
    h = model.decoder(x, model.encode(ques), A.get_subsequent_mask(tokens[:, :-1]))
    return model.proj_to_vocab(h).transpose(0, 1)  # (N, n, V) -> (n, N, V)


def _ref_decode(inputs):
    tokens = greedy_decode(inputs["model"], inputs["ques"], inputs["n"], use_cache=False)
    return {"tokens": tokens.numpy(),
            "step_logits": _teacher_forced_logits(inputs["model"], inputs["ques"], tokens).numpy()}


def _judge_tokens(check):
    def judge(got, ref, inputs):
        variants = {}

        def cands(i):
            if not variants:
                variants.update(Var.decode_variants(inputs["model"], inputs["ques"], inputs["n"]))
            return {k: v[i].numpy() for k, v in variants.items()}

        r = compare(check, "the generated tokens", got.get("tokens"), ref["tokens"], exact=True, candidates=lambda: cands(0))
        if not r.ok:
            return r
        # Same tokens: the logits of every step must match too (a random model often repeats one
        # token, so a wrong position or a lost cache can hide behind the argmax).
        steps = got.get("step_logits")
        k = 0 if steps is None or steps.ndim != 3 else min(len(steps), len(ref["step_logits"]))
        if k == 0:
            return Result(False, f"{check.id}: no logits of model.proj_to_vocab were recorded; decode with the model's own parts.")
        return compare(check, "the logits of each decoding step (last position)", steps[:k], ref["step_logits"][:k],
                       candidates=lambda: {n: v[:k] for n, v in cands(1).items()})
    return judge


def _judge_structure(check, what: str):
    def judge(got, ref, inputs):
        n = inputs["n"]
        results = []
        tok = got.get("tokens")
        if tok is None or tok.shape != ref["tokens"].shape:
            results.append(Result(False, f"{check.id}: greedy_decode_cached should return ids of shape (N, 1 + max_new_tokens) = "
                                         f"{ref['tokens'].shape}; got {None if tok is None else tok.shape}."))
        if what in ("encoder", "both"):
            calls = int(got.get("encoder_calls", np.array(-1)))
            if calls != 1:
                name = "encoder_every_step" if calls > 1 else None
                results.append(Result(False, f"{check.id}: the encoder ran {calls} times for one call that decoded {n} tokens; "
                                             "expected exactly once." + _diagnosis(name)))
        if what in ("cache", "both"):
            lens = [int(x) for x in got.get("decoder_lengths", np.array([], dtype=np.int64)).reshape(-1)]
            ok = len(lens) >= 1 and lens[0] == 1 and all(x == 1 for x in lens[1:])
            if not ok:
                growing = len(lens) > 1 and lens[1] > 1
                results.append(Result(False, f"{check.id}: the decoder was fed {lens} tokens per step; expected the BOS prefix once, "
                                             "then 1 token per step ([1, 1, 1, ...])." + _diagnosis("no_cache" if growing else None)))
        if results:
            return _all(*results)
        return Result(True, f"{check.title}: ok.")
    return judge


for _cid, _hidden, _seed, _what, _title in (
    ("kv_cache.tokens", False, 1302, "tokens", "cached greedy decoding, tokens"),
    ("kv_cache.encoder_once", False, 1302, "encoder", "encoder runs once"),
    ("kv_cache.one_token_per_step", False, 1302, "cache", "one new token per decoder step"),
    ("kv_cache.tokens_hidden", True, 0, "tokens", "cached greedy decoding on a fresh model"),
    ("kv_cache.structure_hidden", True, 0, "both", "encoder once and one token per step on a fresh model"),
):
    _c = _register(id=_cid, title=_title, task="greedy_decode_cached(model, ques_b, max_new_tokens)", hidden=_hidden,
                   seed=_seed, build=(lambda s, h=_hidden: _build_decode(s, h)), run=_run_decode,
                   reference=_ref_decode, judge=None)
    _c.judge = _judge_tokens(_c) if _what == "tokens" else _judge_structure(_c, _what)


# --- the two sides: the student's kernel and the trusted grader ---------------------------------

def run(check_id: str, impl: Any, workdir: str | os.PathLike = ".") -> None:
    """Run one check on the student's ``impl`` in this kernel; raise AssertionError on failure.

    Saves the outputs to ``.grading/<check_id>.npz`` for the grader's trusted verdict.
    """
    __tracebackhide__ = True  # IPython shows the student's frames and the message, not this one
    if check_id not in CHECKS:
        raise KeyError(f"unknown check {check_id!r}; known: {sorted(CHECKS)}")
    check = CHECKS[check_id]
    wd = Path(workdir)
    seed = check_seed(check, read_master_seed(wd) if check.hidden else None)
    inputs = check.build(seed)
    try:
        got = check.run(impl, inputs)
    except NotImplementedError:
        save_outputs(wd, check_id, {}, status="not_implemented")
        _fail(f"{check_id}: not implemented yet: {check.task} still raises NotImplementedError. "
              "Replace `raise NotImplementedError()` with your code and run the cell again.")
    except Exception as exc:  # noqa: BLE001 (the student's code may raise anything)
        msg = f"{type(exc).__name__}: {exc}"
        save_outputs(wd, check_id, {}, status="error", error=msg)
        _fail(_error_message(check, msg, inputs), cause=exc)
    save_outputs(wd, check_id, got)
    ref = _stored_reference(wd, check_id) if not check.hidden else None
    result = check.judge(got, ref if ref is not None else check.reference(inputs), inputs)
    if not result.ok:
        _fail(result.message)
    print(f"passed: {result.message}")


def _fail(message: str, cause: BaseException | None = None) -> None:
    """Raise the check's AssertionError (IPython hides ``run``'s frame, not the last one)."""
    raise AssertionError(message) from cause


def _error_message(check: Check, msg: str, inputs: dict) -> str:
    name = check.judge_error(msg, inputs)
    return f"{check.id}: {check.task} raised {msg}" + _diagnosis(name)


def _stored_reference(wd: Path, check_id: str) -> dict | None:
    path = wd / REFERENCE_DIR / f"{check_id}.npz"
    if not path.exists():
        return None
    return load_outputs(path)


def reference_outputs(check_id: str) -> dict[str, np.ndarray]:
    """Reference outputs of a visible check (what ``autograder/make_references.py`` stores)."""
    check = CHECKS[check_id]
    if check.hidden:
        raise ValueError(f"{check_id} is hidden: its inputs are drawn at grading time")
    return check.reference(check.build(check.seed))


def verify(check_id: str, workdir: str | os.PathLike, master_seed: int) -> Result:
    """The trusted verdict: judge the outputs the student's kernel saved, never running its code.

    Inputs are rebuilt from ``master_seed`` (the grader's, not the file the kernel could edit),
    the reference is recomputed from ``encdec``, and the saved file is read with safe loaders.
    """
    check = CHECKS[check_id]
    path = Path(workdir) / GRADING_DIR / f"{check_id}.npz"
    if not path.exists():
        return Result(False, f"{check_id}: this check did not run to the end (its cell was deleted, the kernel died "
                             "or timed out before it, or an earlier error stopped it), so it scores 0.")
    try:
        got = load_outputs(path)
    except Exception as exc:  # noqa: BLE001 (a corrupt or hostile file is a failed check)
        return Result(False, f"{check_id}: its saved outputs could not be read safely ({type(exc).__name__}: {exc}).")
    status = str(got.pop("__status__", np.array("ok")))
    error = str(got.pop("__error__", np.array("")))
    inputs = check.build(check_seed(check, master_seed))
    if status == "not_implemented":
        return Result(False, f"{check_id}: not implemented yet: {check.task} still raises NotImplementedError.")
    if status == "error":
        return Result(False, _error_message(check, error[:2000], inputs))
    try:
        return check.judge(got, check.reference(inputs), inputs)
    except Exception as exc:  # noqa: BLE001 (malformed outputs: wrong dtypes, odd shapes)
        return Result(False, f"{check_id}: the saved outputs could not be judged ({type(exc).__name__}: {exc}).")
