"""Grader side of the ``target_slicing`` exercise (chapter 12): ``shift_targets``, the slicing in
``Transformer.forward`` and the loss aligned with the labels: inputs, references, judges."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch
from torch import Tensor

from encdec import model as Mdl
from encdec.config import ModelConfig
from encdec.grading import wire

from . import labels
from . import properties as Prop
from . import stages as St
from . import variants as Var
from .core import (
    Check,
    Verdict,
    compare,
    diagnosis,
    first_failure,
    gen,
    named_by_property,
    randomize_,
    same,
    state_arrays,
)
from .draws import normal
from .probe import Probe, probe_checks

CHECKS: list[Check] = []
_SMALL = {
    "emb_dim": 16,
    "num_heads": 2,
    "feedforward_dim": 32,
    "num_enc_layers": 2,
    "num_dec_layers": 2,
    "dropout": 0.2,
}


def _ints(g, lo, hi) -> int:
    return int(torch.randint(lo, hi, (1,), generator=g))


def _build_answers(seed: int, hidden: bool, batch: int | None = None) -> dict:
    g = gen(seed)
    N, Ka, Kq = (4, 5, 9) if not hidden else (_ints(g, 2, 6), _ints(g, 4, 8), _ints(g, 9, 12))
    N = batch or N
    ans = torch.randint(0, 14, (N, Ka), generator=g)
    ans[:, 0] = 14  # BOS
    ans[:, -1] = 15  # EOS
    ques = torch.randint(0, 16, (N, Kq), generator=g)
    j = _ints(g, 1, Ka - 1)
    ans_changed = ans.clone()
    ans_changed[:, j:] = (ans[:, j:] + 1 + torch.randint(0, 12, (N, Ka - j), generator=g)) % 14
    ques_changed = (ques + 1 + torch.randint(0, 14, ques.shape, generator=g)) % 16
    cfg = ModelConfig(**_SMALL, position_encoding="sinusoid" if not hidden or seed % 2 else "simple")
    return {
        "ans": ans,
        "ques": ques,
        "ans_changed": ans_changed,
        "ques_changed": ques_changed,
        "j": j,
        "config": cfg,
        "dims": {"N": N, "Ka": Ka, "Kq": Kq, "Ka1": Ka - 1, "V": 16, "M": cfg.emb_dim},
    }


# --- shift_targets ---------------------------------------------------------------------------------


def _shift_variants(inputs) -> dict:
    return {k: {"dec_in": a.numpy(), "labels": b.numpy()} for k, (a, b) in Var.shift_variants(inputs["ans"]).items()}


def _judge_shift(check):
    def judge(got, ref, inputs):
        din, lab = got.get("dec_in"), got.get("labels")
        named = None
        if din is not None and lab is not None:
            for name, outs in _shift_variants(inputs).items():
                if same(din, outs["dec_in"], True) and same(lab, outs["labels"], True):
                    named = Var.base_name(name)
                    break
        rd = compare(check, "dec_in_b", din, ref["dec_in"], exact=True)
        rl = compare(check, "labels_b", lab, ref["labels"], exact=True)
        r = first_failure(rd, rl)
        if not r.ok:
            r.words += diagnosis(named)
            if named is None and din is not None and lab is not None:
                named_by_property(r, Prop.shift(din, lab, inputs["ans"].numpy()))
            # the decoder input and the labels are two slices the lesson teaches separately: each earns its half
            r.parts = (("the decoder input dec_in_b", rd.ok), ("the labels labels_b", rl.ok))
        return r

    return judge


for _cid, _hidden, _seed in (("target_slicing.shift", False, 1201), ("target_slicing.shift_hidden", True, 0)):
    _c = Check(
        id=_cid,
        title="shift_targets",
        task="shift_targets(ans_b)",
        kind="shift",
        hidden=_hidden,
        seed=_seed,
        build=(lambda s, h=_hidden: _build_answers(s, h)),
        wire=lambda inp: ({}, {"ans": inp["ans"].numpy()}),
        reference=lambda inp: dict(zip(("dec_in", "labels"), (t.numpy() for t in Mdl.shift_targets(inp["ans"])))),
        variants=_shift_variants,
    )
    _c.judge = _judge_shift(_c)
    CHECKS.append(_c)


# --- Transformer.forward -------------------------------------------------------------------------


def _build_forward(seed: int, hidden: bool, probe: str = "plain") -> dict:
    # the hidden question probe runs a batch of one (a squeeze or a batch-wide slice shows there)
    inputs = _build_answers(seed, hidden, batch=1 if hidden and probe == "question" else None)
    inputs["model"] = randomize_(Mdl.Transformer(inputs["config"]), seed)
    if hidden:  # positions of the grader's own drawing: a forward must add the ones it is given
        d, g = inputs["dims"], gen(seed + 3)
        inputs["ques_pos"], inputs["ans_pos"] = normal(g, 1, d["Kq"], d["M"]), normal(g, 1, d["Ka"], d["M"])
    return inputs


def _positions(inputs, q, a) -> tuple[Tensor, Tensor]:
    """The positions the model is called with: the grader's drawn ones (hidden probes), else its own."""
    m = inputs["model"]
    if "ques_pos" in inputs:
        return inputs["ques_pos"], inputs["ans_pos"]  # (1, Kq, M), (1, Ka, M)
    return m.positions(q.shape[1]), m.positions(a.shape[1])


# Which (question, answer) each probe runs the model on: the first case is always the plain one.
# "logits_again" repeats the plain case: two runs on the same inputs must agree in eval mode.
_CASES = {
    "shape": [("logits", "ques", "ans")],
    "plain": [("logits", "ques", "ans"), ("logits_again", "ques", "ans")],
    "causal": [("logits", "ques", "ans"), ("logits_changed", "ques", "ans_changed"), ("logits_again", "ques", "ans")],
    "question": [("logits", "ques", "ans"), ("logits_changed", "ques_changed", "ans"), ("logits_again", "ques", "ans")],
}


def _logits(inputs, q, a) -> np.ndarray:
    qpos, apos = _positions(inputs, q, a)
    with torch.no_grad():
        return inputs["model"](q.clone(), qpos, a.clone(), apos).numpy().astype(np.float32)


def _wire_forward(probe: str):
    def wire(inputs):
        keys = sorted({k for _, q, a in _CASES[probe] for k in (q, a)} | ({"ques_pos", "ans_pos"} & set(inputs)))
        arrays = {**state_arrays(inputs["model"]), **{k: inputs[k].numpy() for k in keys}}
        return {"config": dataclasses.asdict(inputs["config"]), "cases": [list(c) for c in _CASES[probe]]}, arrays

    return wire


def _ref_forward(probe: str):
    def ref(inputs):
        return {name: _logits(inputs, inputs[q], inputs[a]) for name, q, a in _CASES[probe]}

    return ref


def _forward_cands(inputs, ques_key="ques", ans_key="ans"):
    m, q, a = inputs["model"], inputs[ques_key], inputs[ans_key]
    qpos, apos = _positions(inputs, q, a)
    return lambda: Var.forward_variants(m, q, qpos, a, apos)


def _forward_variants(inputs) -> dict:
    return {k: {"logits": v.detach().numpy()} for k, v in _forward_cands(inputs)().items()}


def _forward_shape_hints(inputs) -> dict[tuple, str]:
    """Logits of one position per answer token, (N, Ka, V): the decoder read the whole answer."""
    d = inputs["dims"]
    return {(d["N"], d["Ka"], d["V"]): "no_shift"}


def _forward_shape_hint(inputs):
    return lambda shape: _forward_shape_hints(inputs).get(shape)


def _forward_stage(got, inputs, crashed: bool = False) -> str | None:
    m, q, a = inputs["model"], inputs["ques"], inputs["ans"]
    with torch.no_grad():
        emb, (qpos, apos) = m.emb_layer.weight.numpy(), (p.numpy() for p in _positions(inputs, q, a))
    return St.locate(St.model_stage, got, "logits", emb, q.numpy(), qpos, a.numpy(), apos, crashed)


def _failed_forward(got, inputs, origin, failed: Verdict) -> Verdict:
    """The student's forward raised: the stages recorded before the failure may say where."""
    note = St.stage_note(failed.words, _forward_stage(got, inputs, crashed=True), "model")
    if not note:
        return failed
    label = failed.label if failed.label not in ("raised", None) else labels.of(note)
    return Verdict(False, failed.words + note, label=label)


_FORWARD = Probe(
    key="logits",
    task="Transformer.forward",
    prefix="logits",
    whats=("the logits", "the logits after changing later answer tokens", "the logits for a different question"),
    not_causal="logits_not_causal",
    ignores="logits_ignore_question",
    shape=lambda inputs: (inputs["dims"]["N"], inputs["dims"]["Ka1"], inputs["dims"]["V"]),
    shape_hint=_forward_shape_hint,
    candidates=lambda inputs, probe: _forward_cands(
        inputs,
        ans_key="ans_changed" if probe == "causal" else "ans",
        ques_key="ques_changed" if probe == "question" else "ques",
    ),
    stage_note=lambda got, inputs, said: St.stage_note(said, _forward_stage(got, inputs), "model"),
)


_FORWARD_ERRORS = {
    "observed_lengths_differ": "({Ka1})&&({Ka})&&size",
    "mask_from_full_answer": "mask of shape&&does not fit",
    "no_shift": "({Ka})&&({Ka1})",
}

CHECKS += probe_checks(
    tuple(
        f"target_slicing.{n}"
        for n in ("forward_shapes", "forward", "forward_hidden", "causal_hidden", "question_hidden")
    ),
    (
        "Transformer.forward logits shape",
        "Transformer.forward",
        "Transformer.forward on fresh weights and lengths",
        "Transformer.forward causality",
        "Transformer.forward reads the question",
    ),
    (1202, 1203),
    build=_build_forward,
    wire=_wire_forward,
    reference=_ref_forward,
    judge=_FORWARD,
    variants=_forward_variants,
    task="Transformer.forward",
    kind="forward",
    error_patterns=_FORWARD_ERRORS,
    shape_hints=_forward_shape_hints,
    judge_failed=_failed_forward,
)


# --- the loss --------------------------------------------------------------------------------------


def _build_loss(seed: int, hidden: bool) -> dict:
    inputs = _build_answers(seed, hidden)
    d = inputs["dims"]
    inputs["logits"] = 2 * normal(gen(seed + 1), d["N"], d["Ka1"], d["V"])
    # two more probes of the same sizes: other logits for the same answers, then other answers
    # (the loss's properties are read from the three values: ``properties.loss``)
    g = gen(seed + 2)
    other = torch.randint(0, 14, (d["N"], d["Ka"]), generator=g)
    other[:, 0], other[:, -1] = 14, 15  # BOS ... EOS
    inputs["cases"] = [
        (inputs["logits"], inputs["ans"]),
        (3 * normal(g, d["N"], d["Ka1"], d["V"]), inputs["ans"]),
        (normal(g, d["N"], d["Ka1"], d["V"]), other),
    ]
    d["NK1"] = d["N"] * d["Ka1"]
    d["NK"] = d["N"] * d["Ka"]
    return inputs


def _wire_loss(inputs):
    arrays = {}
    for i, (x, a) in enumerate(inputs["cases"]):
        arrays[wire.case("logits", i)], arrays[wire.case("ans", i)] = x.numpy(), a.numpy()
    return {"cases": len(inputs["cases"])}, arrays


def _ref_loss(inputs):
    return {
        wire.case("loss", i): Mdl.sequence_loss(x, a[:, 1:]).reshape(1).double().numpy()
        for i, (x, a) in enumerate(inputs["cases"])
    }


def _loss_variants(inputs) -> dict:
    out: dict[str, dict] = {}
    for i, (x, a) in enumerate(inputs["cases"]):
        for k, v in Var.loss_variants(x, a).items():
            out.setdefault(k, {})[wire.case("loss", i)] = v.reshape(1).double().numpy()
    return {k: v for k, v in out.items() if len(v) == len(inputs["cases"])}


def _judge_loss(check):
    def judge(got, ref, inputs):
        variants = _loss_variants(inputs)
        keys = [wire.case("loss", i) for i in range(len(inputs["cases"]))]
        results = [
            compare(
                check,
                "the loss",
                got.get(key),
                ref[key],
                candidates=lambda key=key: {k: v[key] for k, v in variants.items()},
            )
            for key in keys
        ]
        r = first_failure(*results)
        values = [got.get(key) for key in keys]
        if not r.ok and all(v is not None and v.shape == (1,) for v in values):
            named_by_property(r, Prop.loss([float(v[0]) for v in values], inputs["cases"]))
        return r

    return judge


_LOSS_ERRORS = {
    "labels_not_sliced": "({NK1})&&({NK})",
    "labels_not_sliced_align": "do not align with labels&&{Ka}",
}

for _cid, _hidden, _seed in (("target_slicing.loss", False, 1204), ("target_slicing.loss_hidden", True, 0)):
    _c = Check(
        id=_cid,
        title="next_token_loss",
        task="next_token_loss(logits, ans_b)",
        kind="loss",
        hidden=_hidden,
        seed=_seed,
        build=(lambda s, h=_hidden: _build_loss(s, h)),
        wire=_wire_loss,
        reference=_ref_loss,
        error_patterns=_LOSS_ERRORS,
        variants=_loss_variants,
    )
    _c.judge = _judge_loss(_c)
    CHECKS.append(_c)
