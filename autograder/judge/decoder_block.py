"""Grader side of the ``decoder_block`` exercise (chapter 11): the causal mask, the masked
softmax and ``DecoderBlock.forward``: inputs, references, judges."""

from __future__ import annotations

import numpy as np
import torch

from encdec import attention as A
from encdec import model as Mdl
from encdec.grading.words import words

from . import labels
from . import properties as Prop
from . import stages as St
from . import variants as Var
from .core import (
    Check,
    Verdict,
    compare,
    gen,
    named_by_property,
    numpy_dict,
    randomize_,
    state_arrays,
)
from .draws import below, normal
from .probe import Probe, probe_checks

CHECKS: list[Check] = []


def _ints(g, lo, hi) -> int:
    return int(torch.randint(lo, hi, (1,), generator=g))


# --- get_subsequent_mask -----------------------------------------------------------------------


def _build_mask(seed: int, hidden: bool) -> dict:
    g = gen(seed)
    N, K = (3, 6) if not hidden else (_ints(g, 2, 5), _ints(g, 3, 9))
    return {"seq": torch.randint(0, 16, (N, K), generator=g), "dims": {"N": N, "K": K}}


def _mask_variants(inputs) -> dict:
    return {k: {"mask": v.numpy()} for k, v in Var.mask_variants(inputs["seq"]).items()}


def _judge_mask(check):
    def judge(got, ref, inputs):
        m = got.get("mask")
        r = compare(
            check,
            "the mask",
            m,
            ref["mask"],
            exact=True,
            candidates=lambda: {k: v["mask"] for k, v in _mask_variants(inputs).items()},
        )
        return named_by_property(r, None if r.ok or m is None else Prop.mask(m, inputs["seq"].numpy()))

    return judge


for _cid, _hidden, _seed in (("decoder_block.mask", False, 1101), ("decoder_block.mask_hidden", True, 0)):
    _c = Check(
        id=_cid,
        title="get_subsequent_mask",
        task="get_subsequent_mask(seq)",
        kind="mask",
        hidden=_hidden,
        seed=_seed,
        build=(lambda s, h=_hidden: _build_mask(s, h)),
        wire=lambda inp: ({}, {"seq": inp["seq"].numpy()}),
        reference=lambda inp: {"mask": A.get_subsequent_mask(inp["seq"]).numpy()},
        variants=_mask_variants,
    )
    _c.judge = _judge_mask(_c)
    CHECKS.append(_c)


# --- masked_softmax ------------------------------------------------------------------------------


def _build_softmax(seed: int, hidden: bool) -> dict:
    g = gen(seed)
    N, L = (2, 5) if not hidden else (_ints(g, 2, 5), _ints(g, 3, 9))
    scores = 3 * normal(g, N, L, L)
    mask = A.get_subsequent_mask(torch.zeros(N, L, dtype=torch.long)).clone()
    if hidden:  # plus random padding columns, never a whole row
        pad = below(g, 0.3, N, 1, L)
        pad[..., 0] = False
        mask = mask | pad
    return {"scores": scores, "mask": mask, "dims": {"N": N, "L": L}}


def _softmax_variants(inputs) -> dict:
    return {k: {"weights": v.numpy()} for k, v in Var.softmax_variants(inputs["scores"], inputs["mask"]).items()}


def _judge_softmax(check):
    def judge(got, ref, inputs):
        w = got.get("weights")
        r = compare(
            check,
            "the attention weights",
            w,
            ref["weights"],
            candidates=lambda: {k: v["weights"] for k, v in _softmax_variants(inputs).items()},
        )
        if not r.ok and w is not None and w.shape == ref["weights"].shape:
            sums = w.sum(-1)
            if not np.allclose(sums, 1.0, atol=1e-4):
                r.words += words("row_sums", low=f"{sums.min():.4f}", high=f"{sums.max():.4f}")
            named_by_property(r, Prop.softmax(w, inputs["scores"].numpy(), inputs["mask"].numpy()))
        return r

    return judge


for _cid, _hidden, _seed in (
    ("decoder_block.masked_softmax", False, 1102),
    ("decoder_block.masked_softmax_hidden", True, 0),
):
    _c = Check(
        id=_cid,
        title="masked_softmax",
        task="masked_softmax(scores, mask)",
        kind="softmax",
        hidden=_hidden,
        seed=_seed,
        build=(lambda s, h=_hidden: _build_softmax(s, h)),
        wire=lambda inp: ({}, {"scores": inp["scores"].numpy(), "mask": inp["mask"].numpy()}),
        reference=lambda inp: {"weights": A.masked_softmax(inp["scores"], inp["mask"]).numpy()},
        variants=_softmax_variants,
    )
    _c.judge = _judge_softmax(_c)
    CHECKS.append(_c)


# --- DecoderBlock.forward --------------------------------------------------------------------------


def _build_block(seed: int, hidden: bool, probe: str = "plain") -> dict:
    g = gen(seed)
    if hidden:
        # every student's hidden checks exercise every rule of the spec: batch items whose masks
        # differ (plain, causal), one head (causal), several heads (plain, question), a batch of
        # one (question), and always Kq != Ka
        N = 1 if probe == "question" else _ints(g, 2, 5)
        Ka = _ints(g, 3, 8)
        Kq = Ka + _ints(g, 2, 7)
        H, M = (1, (16, 24)[_ints(g, 0, 2)]) if probe == "causal" else [(2, 16), (4, 24), (2, 24)][_ints(g, 0, 3)]
    else:
        N, Ka, Kq, H, M = 2, 5, 9, 2, 16
    F = 2 * M
    block = randomize_(Mdl.DecoderBlock(H, M, F, 0.1), seed)
    dec = normal(g, N, Ka, M)
    enc = normal(g, N, Kq, M)
    j = _ints(g, 1, Ka)  # first position changed by the causality probe
    dec_changed = dec.clone()
    dec_changed[:, j:] = normal(g, N, Ka - j, M)
    enc_changed = normal(g, N, Kq, M)
    mask = A.get_subsequent_mask(torch.zeros(N, Ka, dtype=torch.long))
    if hidden and N > 1:
        mask = mask | _padding(g, N, Ka)
    return {
        "block": block,
        "dec": dec,
        "enc": enc,
        "mask": mask,
        "dec_changed": dec_changed,
        "enc_changed": enc_changed,
        "j": j,
        "dims": {"N": N, "Ka": Ka, "Kq": Kq, "M": M, "H": H, "F": F},
    }


def _padding(g, N: int, Ka: int) -> torch.Tensor:
    """Key positions hidden from every query of a batch item (padding), different per item: item 0
    has none, item 1 at least one; position 0 is never hidden, so every row keeps a key. (N, 1, Ka)"""
    pad = below(g, 0.3, N, 1, Ka)
    pad[1, 0, _ints(g, 1, Ka)] = True
    pad[0] = False
    pad[..., 0] = False
    return pad


# Which (dec, enc) each probe runs the block on: the first case is always the plain one.
# "out_again" repeats the plain case: two runs on the same inputs must agree in eval mode.
_CASES = {
    "shape": {"out": ("dec", "enc")},
    "plain": {"out": ("dec", "enc"), "out_again": ("dec", "enc")},
    "causal": {"out": ("dec", "enc"), "out_changed": ("dec_changed", "enc"), "out_again": ("dec", "enc")},
    "question": {"out": ("dec", "enc"), "out_changed": ("dec", "enc_changed"), "out_again": ("dec", "enc")},
}


def _block_out(block, dec, enc, mask) -> np.ndarray:
    with torch.no_grad():
        return block(dec.clone(), enc.clone(), mask.clone()).numpy().astype(np.float32)


def _wire_block(probe: str):
    def wire(inputs):
        d = inputs["dims"]
        arrays = state_arrays(inputs["block"])
        for name, (dk, ek) in _CASES[probe].items():
            arrays.update(
                {
                    f"case/{name}/dec": inputs[dk].numpy(),
                    f"case/{name}/enc": inputs[ek].numpy(),
                    f"case/{name}/mask": inputs["mask"].numpy(),
                }
            )
        return {"dims": {"H": d["H"], "M": d["M"], "F": d["F"]}, "cases": list(_CASES[probe])}, arrays

    return wire


def _ref_block(probe: str):
    def ref(inputs):
        return {
            name: _block_out(inputs["block"], inputs[dk], inputs[ek], inputs["mask"])
            for name, (dk, ek) in _CASES[probe].items()
        }

    return ref


def _block_variants(inputs) -> dict:
    out = Var.block_variants(inputs["block"], inputs["dec"], inputs["enc"], inputs["mask"])
    return {k: numpy_dict({"out": v}) for k, v in out.items()}


def _block_shape_hint(inputs):
    d = inputs["dims"]
    return lambda shape: "cross_q_from_encoder" if shape == (d["N"], d["Kq"], d["M"]) else None


_BLOCK = Probe(
    key="out",
    task="DecoderBlock.forward",
    prefix="block",
    whats=(
        "the block output",
        "the output after changing later answer positions",
        "the output for a different question memory",
    ),
    not_causal="block_not_causal",
    ignores="block_ignores_memory",
    shape=lambda inputs: (inputs["dims"]["N"], inputs["dims"]["Ka"], inputs["dims"]["M"]),
    shape_hint=_block_shape_hint,
    candidates=lambda inputs, probe: (
        lambda: Var.block_variants(
            inputs["block"],
            inputs["dec_changed" if probe == "causal" else "dec"],
            inputs["enc_changed" if probe == "question" else "enc"],
            inputs["mask"],
        )
    ),
    stage_note=lambda got, inputs, said: St.stage_note(
        said, St.locate(St.block_stage, got, "out", *_plain_arrays(inputs))
    ),
    finite=True,
)


def _plain_arrays(inputs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return inputs["dec"].numpy(), inputs["enc"].numpy(), inputs["mask"].numpy()


def _failed_block(got, inputs, origin, failed: Verdict) -> Verdict:
    """The student's block raised: the stages recorded before the failure can still say where its
    wiring left the lesson's (the failure itself stays the verdict)."""
    stage = St.locate(St.block_stage, got, "out", *_plain_arrays(inputs), crashed=True)
    if not stage:
        return failed
    note = St.stage_note(failed.words, stage)
    label = failed.label if failed.label not in ("raised", None) else labels.of(note)
    return Verdict(False, failed.words + note, label=label)


_BLOCK_ERRORS = {
    "cross_kv_from_decoder": "must have the same length",
    "cross_q_from_encoder": "({Ka})&&({Kq})",
}

CHECKS += probe_checks(
    tuple(f"decoder_block.{n}" for n in ("shapes", "output", "output_hidden", "causal_hidden", "question_hidden")),
    (
        "DecoderBlock output shape",
        "DecoderBlock.forward",
        "DecoderBlock.forward on fresh weights and sizes",
        "DecoderBlock causality",
        "DecoderBlock reads the encoder memory",
    ),
    (1103, 1104),
    build=_build_block,
    wire=_wire_block,
    reference=_ref_block,
    judge=_BLOCK,
    variants=_block_variants,
    task="DecoderBlock.forward",
    kind="block",
    error_patterns=_BLOCK_ERRORS,
    judge_failed=_failed_block,
)
