"""Stage-by-stage evidence for the decoder block and the model (the first given submodule whose
inputs differ from the lesson's wiring) and for cached decoding (the first step and layer whose
fed token, position or cache differs), in the lesson's words.

Grader side only. The kernel records what the given submodules of the student's block or
``Transformer`` received and returned (``encdec.grading.stages``); the lesson's block (chapter 11) is

    out_1 = attention_self(dec_inp, dec_inp, dec_inp, mask)
    out_2 = layer_norm_1(dec_inp + out_1)
    out_3 = attention_cross(out_2, enc_inp, enc_inp)         # no mask: every answer position reads the question
    out_4 = layer_norm_2(out_2 + out_3)
    out_5 = feed_forward(out_4)
    return layer_norm_3(out_4 + out_5)

and the lesson's ``Transformer.forward`` (chapter 12) is ``encoder(emb_layer(ques_b) + ques_pos)``,
then ``decoder(emb_layer(ans_b)[:, :-1] + ans_pos[:, :-1], enc_out, causal mask of ans_b[:, :-1])``,
then ``proj_to_vocab``. Each stage's expected inputs are built from the *student's own* earlier outputs, so the first
stage that differs is where the student's wiring leaves the lesson's: the given submodules are
deterministic in eval mode, so every stage before it computed what the reference computes. What
is reported is an observation (which tensor went where, with shapes), never a guessed name,
worded in the current language (``encdec.grading.language``: the stages are found the same way
in every language, only the words differ).
"""

from __future__ import annotations

import itertools
import re

import numpy as np

from encdec.grading.compare import same
from encdec.grading.stages import MAX_CALLS
from encdec.grading.words import Words, fill, observation, words

# (module, out name, {argument: expected tensor name}); a mask argument names the expected mask
# ("mask": the one passed in) or is None (no mask)
BLOCK_PLAN = (
    ("attention_self", "out_1", {"query": "dec_inp", "key": "dec_inp", "value": "dec_inp", "mask": "mask"}),
    ("layer_norm_1", "out_2", {"input": "dec_inp + out_1"}),
    ("attention_cross", "out_3", {"query": "out_2", "key": "enc_inp", "value": "enc_inp", "mask": None}),
    ("layer_norm_2", "out_4", {"input": "out_2 + out_3"}),
    ("feed_forward", "out_5", {"input": "out_4"}),
    ("layer_norm_3", "out_6", {"input": "out_4 + out_5"}),
)
MODEL_PLAN = (
    ("encoder", "memory", {"input": "emb_layer(ques_b) + ques_pos"}),
    (
        "decoder",
        "dec_out",
        {"target_seq": "emb_layer(ans_b)[:, :-1] + ans_pos[:, :-1]", "enc_out": "memory", "mask": "mask"},
    ),
    ("proj_to_vocab", "logits", {"input": "dec_out"}),
)


def _seen(finding: str, *where: str) -> Words:
    """The record of a stage finding, ``stage:<finding>[:<module>][:<argument>]``: what the class
    report counts when the finding is the verdict's observation (``labels``). Set here, where the
    finder decides, beside the words that say it."""
    return observation(":".join(["stage", finding, *where]))


def _role(module: str) -> str:
    """A given part's name and its role in the lesson, e.g. 'layer_norm_2 (the norm after cross-attention)'."""
    return words("role", module=module, role=words(f"role_{module}"))


class RecordRefused(ValueError):
    """A record no honest kernel writes (too many calls, an array too large or of the wrong shape):
    it is refused before anything is computed from it, and the stage line is dropped."""


# the most numbers a recorded array may hold when no expected size is known (first_random_stage)
RECORD_ELEMENTS = 1 << 20
MAX_NDIM = 4


def calls(
    got: dict[str, np.ndarray], case: str, limit: int = RECORD_ELEMENTS
) -> list[tuple[str, dict[str, np.ndarray]]]:
    """The recorded calls of one case, in call order: (module, {argument or 'output': array}).
    Refused (``RecordRefused``) when it holds a call the kernel never records (rank past
    ``MAX_CALLS``) or an array of more than ``MAX_NDIM`` axes or ``limit`` numbers."""
    found: dict[tuple[int, str], dict[str, np.ndarray]] = {}
    pat = re.compile(rf"trace/{re.escape(case)}/(\d+)/(\w+)/(\w+)")
    for key, arr in got.items():
        m = pat.fullmatch(key)
        if m:
            if int(m.group(1)) >= MAX_CALLS or arr.ndim > MAX_NDIM or arr.size > limit:
                raise RecordRefused(f"{key}: {arr.shape}")
            found.setdefault((int(m.group(1)), m.group(2)), {})[m.group(3)] = arr
    return [(name, args) for (_, name), args in sorted(found.items())]


def _shape(a: np.ndarray) -> str:
    return str(tuple(int(n) for n in a.shape))


def _sum(a: np.ndarray, b: np.ndarray, shape: tuple | None = None) -> np.ndarray | None:
    """``a + b`` (positions (1, K, M) broadcast over the batch), or None when they do not add, or
    when the sum would not have ``shape`` (default: the larger operand's): the sum's size is decided
    from the shapes before anything is added, so two recorded arrays of (K, 1, M) and (1, K, M)
    never become K x K x M numbers."""
    try:
        out = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        return None
    if out != (shape if shape is not None else max(a.shape, b.shape, key=lambda s: int(np.prod(s)))):
        return None
    try:
        return a + b
    except Exception:
        return None


def _identify(x: np.ndarray, named: dict[str, np.ndarray]) -> Words | None:
    """The name of a known tensor (or a sum of two) that ``x`` equals, else None."""
    for name, t in named.items():
        if same(x, t):
            return name
    for (a, ta), (b, tb) in itertools.combinations(named.items(), 2):
        t = _sum(ta, tb, x.shape)  # only a sum of x's own shape can equal it
        if t is not None and same(x, t):
            return f"{a} + {b}"
    return None


def _mask_kind(m: np.ndarray | None, mask: np.ndarray) -> str:
    """What a mask argument was: 'none', 'same' (the expected mask), 'inverted' or 'other'."""
    if m is None:
        return "none"
    try:
        m = np.broadcast_to(m, mask.shape)  # a (Ka, Ka) or (1, Ka, Ka) mask serves every batch item alike
    except ValueError:
        pass
    if same(m, mask, exact=True):
        return "same"
    if m.shape == mask.shape and m.dtype == bool and np.array_equal(m, ~mask):
        return "inverted"
    return "other"


def _mask_words(m: np.ndarray | None, mask: np.ndarray, whose: str) -> str:
    kind = _mask_kind(m, mask)
    if kind == "none":
        return words("no_mask")
    if kind == "same":
        return whose
    if kind == "inverted":
        return words("mask_inverted", whose=whose)
    return words("mask_other", shape=_shape(m), whose=whose, expected=_shape(mask))


def block_stage(
    got: dict[str, np.ndarray], case: str, dec: np.ndarray, enc: np.ndarray, mask: np.ndarray, crashed: bool = False
) -> Words | None:
    """The first stage of the student's block that differs from the lesson's, in words, or None
    when every recorded stage and the returned output follow the lesson (or nothing was recorded).
    ``crashed``: the student's code raised, so a stage after the failure not running says nothing."""
    return _walk(
        got,
        case,
        BLOCK_PLAN,
        {"dec_inp": dec, "enc_inp": enc},
        mask,
        words("block_mask"),
        words("block"),
        crashed,
        _limit(dec, enc, mask),
    )


def model_stage(
    got: dict[str, np.ndarray],
    case: str,
    emb: np.ndarray,
    ques: np.ndarray,
    ques_pos: np.ndarray,
    ans: np.ndarray,
    ans_pos: np.ndarray,
    crashed: bool = False,
) -> Words | None:
    """The same for ``Transformer.forward``: ``emb`` the embedding table (V, M), positions (1, K, M)."""
    named = {
        "emb_layer(ques_b)": emb[ques],
        "ques_pos": ques_pos,
        "emb_layer(ans_b)[:, :-1]": emb[ans[:, :-1]],
        "ans_pos[:, :-1]": ans_pos[:, :-1],
        "emb_layer(ans_b)": emb[ans],
        "ans_pos": ans_pos,
        "emb_layer(ans_b)[:, 1:]": emb[ans[:, 1:]],
        "ans_pos[:, 1:]": ans_pos[:, 1:],
    }
    N, K1 = ans.shape[0], ans.shape[1] - 1
    causal = np.broadcast_to(np.triu(np.ones((K1, K1), dtype=bool), 1), (N, K1, K1))
    logits = np.empty((N, K1, emb.shape[0]), dtype=np.bool_)  # a shape to bound the record with, no data
    return _walk(
        got,
        case,
        MODEL_PLAN,
        named,
        causal,
        words("causal_mask_of", tokens="ans_b[:, :-1]"),
        words("model"),
        crashed,
        _limit(logits, *named.values()),
        widths={"proj_to_vocab": emb.shape[0]},
    )


def _limit(*known: np.ndarray) -> int:
    """The most numbers a recorded array of a case may hold: the largest tensor the grader gave or
    expects there (each given part returns one of its input's size, or the logits' width)."""
    return max(int(a.size) for a in known)


def _walk(
    got, case, plan, named, mask, whose: str, what: str, crashed: bool, limit: int, widths: dict[str, int] | None = None
) -> Words | None:
    """The first stage that differs. Every recorded array is checked against its expected size and
    shape before it is used (``calls``; an output must have the shape the given part returns for
    the lesson's input, its last axis ``widths[module]`` where that differs): a record that fails
    is refused (``RecordRefused``, the stage line dropped by ``locate``)."""
    record = calls(got, case, limit)
    if not record:
        return None
    named = dict(named)
    for module, out_name, expected in plan:
        mine = [args for name, args in record if name == module]
        role = _role(module)
        if not mine:
            return None if crashed else words("never_called", role=role, module=module) + _seen("never_called", module)
        args = mine[0]
        for arg, want in expected.items():
            if arg == "mask":
                kind = _mask_kind(args.get("mask"), mask)
                if kind != ("none" if want is None else "same"):
                    elsewhere = [n for n, a in record if n != module and _mask_kind(a.get("mask"), mask) == "same"]
                    moved = words("mask_went_to", module=elsewhere[0]) if want is not None and elsewhere else ""
                    return words(
                        "received_mask",
                        role=role,
                        seen=_mask_words(args.get("mask"), mask, whose),
                        moved=moved,
                        what=what,
                        want=words("no_mask") if want is None else whose,
                    ) + _seen("received_mask", module)
                continue
            x = args.get(arg)
            if x is None:
                return words("not_a_tensor", role=role, arg=arg) + _seen("not_a_tensor", module, arg)
            target = _value(want, named)
            if not same(x, target):
                seen = _identify(x, {**named, **_others(record, plan, named)})
                seen = (
                    words("named_tensor", name=seen, shape=_shape(x))
                    if seen
                    else words("none_of", shape=_shape(x), names=", ".join(named))
                )
                found = words("argument_was", role=role, arg=arg, seen=seen, what=what, want=want, shape=_shape(target))
                return found + _seen("argument_was", module, arg)
        if "output" not in args:
            return None  # it raised: the failure message says where
        first = _value(next(w for a, w in expected.items() if a != "mask"), named)  # the lesson's input
        shape = first.shape[:-1] + ((widths or {}).get(module, first.shape[-1]),)
        if args["output"].shape != shape:  # a given part fed the lesson's input returns this shape
            raise RecordRefused(f"{module} returned {args['output'].shape} for an input of {first.shape}")
        named[out_name] = args["output"]
        if len(mine) > 1:
            return words("ran_times", role=role, n=len(mine), what=what) + _seen("ran_times", module)
    returned, last = got.get(case), plan[-1][1]
    if returned is not None and not same(returned, named[last]):
        seen = _identify(returned, {**named, **_others(record, plan, named)})
        seen = (
            words("named_tensor", name=seen, shape=_shape(returned))
            if seen
            else words("tensor_of_shape", shape=_shape(returned))
        )
        return words("returned_was", seen=seen, what=what, last=last) + _seen("returned_was")
    return None


def _others(record, plan, named) -> dict[str, np.ndarray]:
    """The outputs of given parts the walk has not reached yet (their first call), by module."""
    reached = {module for module, out, _ in plan if out in named}
    found: dict[str, np.ndarray] = {}
    for name, args in record:
        if name not in reached and "output" in args:
            found.setdefault(words("output_of", module=name), args["output"])
    return found


def locate(where, *args, **kwargs) -> Words | None:
    """A stage finder's answer, or None when the record cannot be read (it is the student's
    process's evidence: a malformed record loses the supporting line, never the verdict)."""
    try:
        return where(*args, **kwargs)
    except Exception:
        return None


def _value(expr: str, named: dict[str, np.ndarray]) -> np.ndarray:
    parts = [named[p] for p in expr.split(" + ")]
    if len(parts) == 1:
        return parts[0]
    total = _sum(parts[0], parts[1])
    if total is None:
        raise RecordRefused(f"{expr}: {parts[0].shape} + {parts[1].shape}")
    return total


def first_random_stage(got: dict[str, np.ndarray], first: str, again: str) -> Words | None:
    """The first given submodule whose inputs differ between two runs on the same inputs, or None."""
    a, b = calls(got, first), calls(got, again)
    before = words("start_of_forward")
    for (name, args), (name2, args2) in zip(a, b):
        if name != name2:
            return words("random_order", first=name, second=name2)
        for arg, x in args.items():
            y = args2.get(arg)
            if arg != "output" and (y is None or not same(x, y, exact=x.dtype == bool)):
                return words("random_argument", module=name, arg=arg, before=before, role=words(f"role_{name}"))
        before = words("output_of", module=name)
    return None


def random_run_note(got: dict[str, np.ndarray], first: str, again: str) -> Words:
    """Two runs on the same inputs differed: the line naming where something random ran
    (`first_random_stage`), or "" when the record does not say."""
    stage = locate(first_random_stage, got, first, again)
    return "\n" + fill(words("stage_random", stage=stage)) if stage else Words()


def stage_note(message: Words, stage: Words | None, what: str = "block") -> Words:
    """The stage evidence as a line of the feedback: an observation of its own when the message
    names nothing yet, else a supporting line under the diagnosis or observation it has.
    ``what``: ``block``, ``model`` or ``decoding`` (worded in the current language)."""
    if not stage:
        return Words()
    key = "stage_supporting" if message.names_something() else "stage_observed"
    # wrapped to 88 columns like every diagnosis (the feedback HTML does not wrap)
    return "\n" + fill(words(key, what=words(what), stage=stage))


def decode_stage(got: dict[str, np.ndarray], tok: np.ndarray, emb: np.ndarray, pos: np.ndarray) -> Words | None:
    """The first decoding step, and layer, where what was fed or cached differs from the lesson's
    cached decoding: step t+1 feeds only token t (BOS first), at position t (``ans_pos[:, t:t+1]``),
    and every layer's self-attention cache then holds the t keys fed before. ``tok``: the student's
    tokens (N, 1+n), checked by the caller; ``emb`` (V, M); ``pos`` (1, 1+n, M)."""
    held = got.get("cache_held")  # (steps, layers): checked against the steps decoded before use
    if held is not None and (held.ndim != 2 or held.shape[0] > tok.shape[1] or held.shape[1] > MAX_LAYERS):
        return None
    for t in range(len(tok[0]) - 1):
        x = got.get(f"fed/{t}")
        if x is None or x.ndim != 3 or x.shape[0] != tok.shape[0]:
            return None
        if x.shape[1] != 1:
            return words("fed_positions", step=t + 1, n=x.shape[1], shape=_shape(x)) + _seen("fed_positions")
        newest = emb[tok[:, t]][:, None]  # (N, 1, M): token t
        if not same(x, newest + pos[:, t : t + 1]):
            at = [p for p in range(pos.shape[1]) if same(x, newest + pos[:, p : p + 1])]
            if at:
                return words("fed_at", step=t + 1, t=t, p=at[0], p1=at[0] + 1) + _seen("fed_at")
            return words("fed_nowhere", step=t + 1, t=t) + _seen("fed_nowhere")
        if held is None or held.ndim != 2 or t >= len(held):
            return None
        for layer, h in enumerate(held[t]):
            if h != t:
                cache = words("no_cache") if h < 0 else words("cache_held", held=_positions(int(h)))
                found = words("cache_before_step", step=t + 1, layer=layer, got=cache, held=_positions(t))
                return found + _seen("cache_before_step")
    return None


MAX_LAYERS = 64  # more decoder layers than any model of the course has


def _positions(k: int) -> str:
    return words("positions_0" if k == 0 else "positions_1" if k == 1 else "positions_n", k=k)
