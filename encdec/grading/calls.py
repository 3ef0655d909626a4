"""How a check calls the student's code, one function per kind of exercise.

Runs in the student's kernel. Each function gets the student's ``impl`` and the check's inputs
(plain arrays and a little metadata, see ``wire``), builds the *given* parts from
``encdec.model`` (in a graded run: the grading edition, which has no exercise in it), calls the
student's code and returns what came out as arrays. Nothing here computes an expected answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor

from .arguments import as_array, config_of, state_of, tensor_of
from .by_hand import KINDS as BY_HAND
from .by_hand import no_ready_made_attention
from .calls_beam import call_beam
from .stages import BLOCK, MODEL, recording
from .wire import case, section


def call_mask(impl, meta, a) -> dict:
    out = impl(tensor_of(a["seq"]))
    return {"mask": as_array(out, "get_subsequent_mask(seq)")}  # its dtype is judged with its values


def call_softmax(impl, meta, a) -> dict:
    out = impl(tensor_of(a["scores"]), tensor_of(a["mask"]))
    return {"weights": as_array(out, "masked_softmax(scores, mask)").astype(np.float32)}


def _traced(module, name: str, out: dict[str, np.ndarray], run, given) -> torch.Tensor:
    """``run()`` (one case of ``module``), recording what its ``given`` submodules received and
    returned, stage by stage, into ``out`` (judged by the grader). A failure part-way raises
    PartialRun with the stages that ran before it: they are evidence."""
    with recording(module, f"trace/{name}", given) as trace:
        try:
            with torch.no_grad():
                y = run()
        except NotImplementedError:
            raise
        except Exception as exc:
            raise PartialRun(exc, {**out, **trace}) from exc
    out.update(trace)
    return y


def call_block(impl, meta, a) -> dict:
    d = meta["dims"]
    block = impl(d["H"], d["M"], d["F"], 0.1)
    block.load_state_dict(state_of(a))
    block.eval()
    out: dict[str, np.ndarray] = {}
    for name in meta["cases"]:  # e.g. "out", then "out_changed" (later answer positions changed)
        case = section(a, f"case/{name}")
        y = _traced(
            block,
            name,
            out,
            lambda case=case: block(tensor_of(case["dec"]), tensor_of(case["enc"]), tensor_of(case["mask"])),
            BLOCK,
        )
        out[name] = as_array(y, "DecoderBlock.forward(dec_inp, enc_inp, mask)").astype(np.float32)
    return out


def call_shift(impl, meta, a) -> dict:
    out = impl(tensor_of(a["ans"]))
    if not isinstance(out, tuple) or len(out) != 2:
        raise TypeError(f"shift_targets must return a pair (dec_in_b, labels_b), got {type(out).__name__}")
    return {"dec_in": as_array(out[0], "dec_in_b"), "labels": as_array(out[1], "labels_b")}


def call_forward(impl, meta, a) -> dict:
    m = impl(config_of(meta))
    m.load_state_dict(state_of(a))
    m.eval()
    out: dict[str, np.ndarray] = {}
    for name, ques_key, ans_key in meta["cases"]:  # e.g. ["logits", "ques", "ans"]
        q, ans = tensor_of(a[ques_key]), tensor_of(a[ans_key])
        # the positions the grader drew, where it did (a forward must add the ones it is given)
        qpos = tensor_of(a["ques_pos"]) if "ques_pos" in a else m.positions(q.shape[1])  # (1, Kq, M)
        apos = tensor_of(a["ans_pos"]) if "ans_pos" in a else m.positions(ans.shape[1])  # (1, Ka, M)
        y = _traced(m, name, out, lambda q=q, qpos=qpos, ans=ans, apos=apos: m(q, qpos, ans, apos), MODEL)
        out[name] = as_array(y, "Transformer.forward(...)").astype(np.float32)
    return out


def call_loss(impl, meta, a) -> dict:
    out = {}
    for i in range(int(meta.get("cases", 1))):  # the plain case, then the grader's probes
        y = impl(tensor_of(a[case("logits", i)]), tensor_of(a[case("ans", i)]))
        out[case("loss", i)] = as_array(y, "next_token_loss(logits, ans_b)").astype(np.float64).reshape(-1)
    return out


def call_update(impl, meta, a) -> dict:
    cache = impl()
    out = {}
    for i in range(meta["steps"]):
        res = cache.update(tensor_of(a[f"k/{i}"]), tensor_of(a[f"v/{i}"]))
        if not isinstance(res, tuple) or len(res) != 2:
            raise TypeError(f"KVCache.update must return (keys, values), got {type(res).__name__}")
        out[f"k{i}"] = as_array(res[0], "keys returned by update")
        out[f"v{i}"] = as_array(res[1], "values returned by update")
        out[f"len{i}"] = np.array(len(cache))
    return out


class PartialRun(Exception):
    """The student's code raised part-way through a call: what the instruments saw until then."""

    def __init__(self, error: BaseException, observed: dict[str, np.ndarray]):
        super().__init__(str(error))
        self.error, self.observed = error, observed


def _is_given(filename: str) -> bool:
    """A frame of the package, torch, the standard library or site-packages (not the student's)."""
    import sysconfig
    from pathlib import Path

    roots = {Path(__file__).resolve().parents[1]} | {
        Path(sysconfig.get_path(k)).resolve() for k in ("stdlib", "purelib", "platlib")
    }
    try:
        path = Path(filename).resolve()
    except (OSError, ValueError):
        return False
    return any(path.is_relative_to(r) for r in roots)


def raised_in(exc: BaseException) -> dict:
    """Where an exception came from: the innermost function of the student's code on its traceback
    (``KVCache.update``, ``greedy_decode_cached``) and the innermost frame overall, by name."""
    student, last = "", ""
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        name = getattr(code, "co_qualname", code.co_name)
        if _is_given(code.co_filename):
            last = f"{name} ({code.co_filename.rsplit('/', 1)[-1]})"
        else:
            student, last = name, name
        tb = tb.tb_next
    return {"student": student, "innermost": last}


def call_decode(impl, meta, a, prefix: Tensor | None = None) -> dict:
    """Cached greedy decoding on the given model, counting what the decoder is fed (``prefix``: the
    decoder prefix (N, P) the stretch's decoding continues, passed before ``max_new_tokens``).

    The counts come from hooks on the given model in this process: they word the feedback and never
    decide a score; the structure is judged by the CPU time the grader reads outside the kernel
    (autograder/README.md).
    """
    from ..model import Transformer

    model = Transformer(config_of(meta))
    model.load_state_dict(state_of(a))
    model.eval()
    counts: dict = {"enc": 0, "dec": [], "logits": [], "fed": [], "held": {}}

    def enc_hook(mod, args):
        counts["enc"] += 1

    def dec_hook(mod, args, kwargs):
        x = args[0] if args else kwargs.get("dec_inp")
        counts["dec"].append(int(x.shape[1]))
        # what this step fed the decoder (token embeddings + positions), within a budget of values
        if len(counts["fed"]) < _MAX_STEPS and counts.setdefault("fed_values", 0) + x.numel() <= _MAX_FED:
            counts["fed_values"] += x.numel()
            counts["fed"].append(x.detach().cpu().numpy().astype(np.float32))

    def vocab_hook(mod, args, y):
        counts["logits"].append(y[:, -1] if y.dim() == 3 else y)  # the last position: (N, V)

    caches: dict[int, object] = {}  # decoder layer -> the self-attention cache the student passed

    def cache_hook(i):
        def hook(mod, args, kwargs):
            cache = kwargs.get("cache")
            if cache is not None:
                caches[i] = cache
            k = getattr(cache, "k", None)  # what layer i's self-attention cache held before this step
            held = (k.shape[2] if isinstance(k, Tensor) and k.dim() == 4 else 0) if cache is not None else -1
            counts["held"].setdefault(len(counts["dec"]) - 1, {})[i] = held

        return hook

    hooks = [
        model.encoder.layers[0].register_forward_pre_hook(enc_hook),
        model.decoder.layers[0].register_forward_pre_hook(dec_hook, with_kwargs=True),
        model.proj_to_vocab.register_forward_hook(vocab_hook),
    ]
    hooks += [
        layer.attention_self.register_forward_pre_hook(cache_hook(i), with_kwargs=True)
        for i, layer in enumerate(model.decoder.layers)
    ]
    try:
        with torch.no_grad():
            given = (tensor_of(a["ques"]),) if prefix is None else (tensor_of(a["ques"]), prefix)
            tokens = impl(model, *given, int(meta["n"]))
    except NotImplementedError:
        raise
    except Exception as exc:
        raise PartialRun(
            exc,
            {
                "encoder_calls": np.array(counts["enc"]),
                "decoder_lengths": np.array(counts["dec"], dtype=np.int64),
                "cache_shapes": _cache_shapes(caches, len(model.decoder.layers)),
                **_steps_fed(counts, len(model.decoder.layers)),
            },
        ) from exc
    finally:
        for h in hooks:
            h.remove()
    steps = counts["logits"]
    same_shape = steps and len({tuple(s.shape) for s in steps}) == 1
    step_logits = torch.stack(steps).numpy().astype(np.float32) if same_shape else np.zeros((0,), np.float32)
    return {
        "tokens": as_array(tokens, "greedy_decode_cached(...)"),
        "encoder_calls": np.array(counts["enc"]),
        "decoder_lengths": np.array(counts["dec"], dtype=np.int64),
        "step_logits": step_logits,
        **_steps_fed(counts, len(model.decoder.layers)),
    }


def call_prefill(impl, meta, a) -> dict:
    """The stretch: cached greedy decoding that continues a decoder prefix (N, P), instrumented as
    ``call_decode``."""
    return call_decode(impl, meta, a, prefix=tensor_of(a["prefix"]))


_MAX_STEPS = 64  # steps whose decoder input is recorded
_MAX_FED = 500_000  # values of decoder input recorded in all (the outputs file stays under wire.MAX_BYTES)


def _steps_fed(counts: dict, layers: int) -> dict[str, np.ndarray]:
    """``fed/<t>``: the decoder's input at step t (N, L, M); ``cache_held``: (steps, layers), how many
    keys each layer's self-attention cache held before the step (-1: no cache passed)."""
    held = np.full((len(counts["dec"]), layers), -1, dtype=np.int64)
    for t, per_layer in counts["held"].items():
        for i, k in per_layer.items():
            if 0 <= t < len(held):
                held[t, i] = k
    return {"cache_held": held, **{f"fed/{t}": x for t, x in enumerate(counts["fed"])}}


def _cache_shapes(caches: dict, layers: int) -> np.ndarray:
    """(layers, 2, 4): the shapes of the keys and values each decoder layer's self-attention cache
    held (-1 where there was none or it was not 4-D)."""
    out = np.full((layers, 2, 4), -1, dtype=np.int64)
    for i, cache in caches.items():
        for j, name in enumerate(("k", "v")):
            x = getattr(cache, name, None)
            if isinstance(x, Tensor) and x.dim() == 4:
                out[i, j] = x.shape
    return out


# --- the warm-up (exercise ``warmup``): shapes, the causal mask by hand, padding, sampling ---------


def _shape(x: Any, what: str) -> np.ndarray:
    """A shape the student's code returned (a tuple, list or torch.Size of ints) as an int64 array."""
    if isinstance(x, (tuple, list)) and all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) for n in x):
        return np.array([int(n) for n in x], dtype=np.int64)
    raise TypeError(f"{what} must be a shape: a tuple of ints such as (2, 5, 16), got {x!r:.80}")


def call_shapes(impl, meta, a) -> dict:
    out = {}
    for i, sizes in enumerate(meta["cases"]):  # each case: the sizes as keyword arguments
        got = impl(**sizes)
        if not isinstance(got, dict):
            raise TypeError(f"attention_shapes must return a dict of shapes, got {type(got).__name__}")
        for key in meta["keys"]:
            if key not in got:
                raise KeyError(f"attention_shapes returned no shape for {key!r} (its keys: {sorted(map(str, got))})")
            out[case(key, i)] = _shape(got[key], f"the shape of {key}")
    return out


def call_causal_mask(impl, meta, a) -> dict:
    return {case("mask", i): as_array(impl(int(T)), "causal_mask(T)") for i, T in enumerate(meta["sizes"])}


def call_causal_softmax(impl, meta, a) -> dict:
    return {
        case("weights", i): as_array(impl(tensor_of(a[case("scores", i)])), "causal_softmax(scores)").astype(np.float32)
        for i in range(int(meta["cases"]))
    }


def _as_used(mask: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """A mask as attention uses it: broadcast to the asked ``shape`` when it broadcasts (a (B, 1, 1, Tk)
    padding mask hides the same keys from every reader as its (B, 1, Tq, Tk) expansion); else as it came."""
    try:
        return np.ascontiguousarray(np.broadcast_to(mask, shape)) if mask.ndim <= len(shape) else mask
    except ValueError:
        return mask


def call_padding_mask(impl, meta, a) -> dict:
    out = {}
    for i, (Tq, Tk) in enumerate(meta["sizes"]):
        L = tensor_of(a[case("lengths", i)])
        m = as_array(impl(L, int(Tq), int(Tk)), "padding_mask(key_lengths, Tq, Tk)")
        out[case("mask", i)] = _as_used(m, (len(L), 1, int(Tq), int(Tk)))
    return out


def call_combined_mask(impl, meta, a) -> dict:
    out = {}
    for i, T in enumerate(meta["sizes"]):
        L = tensor_of(a[case("lengths", i)])
        m = as_array(impl(L, int(T)), "causal_padding_mask(key_lengths, T)")
        out[case("mask", i)] = _as_used(m, (len(L), 1, int(T), int(T)))
    return out


def call_sdpa_mask(impl, meta, a) -> dict:
    return {
        case("attn_mask", i): as_array(impl(tensor_of(a[case("mask", i)])), "sdpa_mask(mask)")
        for i in range(int(meta["cases"]))
    }


def call_sampling(impl, meta, a) -> dict:
    out = {}
    for i, settings in enumerate(meta["settings"]):  # temperature, top_k, top_p (None: not used)
        y = impl(tensor_of(a[case("logits", i)]), **settings)
        out[case("probs", i)] = as_array(y, "sampling_probs(logits, ...)").astype(np.float32)
    return out


CALLS: dict[str, Callable[[Any, dict, dict], dict]] = {
    "mask": call_mask,
    "softmax": call_softmax,
    "block": call_block,
    "shift": call_shift,
    "forward": call_forward,
    "loss": call_loss,
    "update": call_update,
    "decode": call_decode,
    "shapes": call_shapes,
    "causal_mask": call_causal_mask,
    "causal_softmax": call_causal_softmax,
    "padding_mask": call_padding_mask,
    "combined_mask": call_combined_mask,
    "sampling": call_sampling,
    "prefill": call_prefill,
    "sdpa_mask": call_sdpa_mask,
    "beam": call_beam,
}


def call(meta: dict, arrays: dict[str, np.ndarray], impl) -> dict[str, np.ndarray]:
    kind = meta.get("kind")
    if kind not in CALLS:
        raise ValueError(f"unknown kind of check {kind!r}; expected one of {sorted(CALLS)}")
    if kind in BY_HAND:  # written by hand: no attention operator runs meanwhile (by_hand.py)
        with no_ready_made_attention():
            return CALLS[kind](impl, meta, section(arrays, "in"))
    return CALLS[kind](impl, meta, section(arrays, "in"))
