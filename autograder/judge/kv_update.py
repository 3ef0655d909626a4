"""Grader side of the ``kv_cache`` exercise, its first part: ``KVCache.update`` (inputs, reference,
judge); ``kv_cache.py`` holds the decoding parts and lists these checks first."""

from __future__ import annotations

import numpy as np

from encdec import attention as A

from . import decode_draws as D
from . import properties as Prop
from . import variants as Var
from .core import Check, compare, first_failure, gen, named_by_property
from .draws import normal

CHECKS: list[Check] = []


# --- KVCache.update --------------------------------------------------------------------------------


def _build_update(seed: int, hidden: bool) -> dict:
    g = gen(seed)
    # the visible check has several sequences and heads; the hidden one a batch of one with one head
    N, H, Dh = (2, 2, 4) if not hidden else (1, 1, D.ints(g, 3, 7))
    lengths = (3, 1, 1) if not hidden else (D.ints(g, 2, 5), 1, 2, 1)
    steps = [(normal(g, N, H, t, Dh), normal(g, N, H, t, Dh)) for t in lengths]
    return {"steps": steps, "dims": {"N": N, "H": H, "Dh": Dh}}


def _wire_update(inputs):
    arrays = {}
    for i, (k, v) in enumerate(inputs["steps"]):
        arrays[f"k/{i}"], arrays[f"v/{i}"] = k.numpy(), v.numpy()
    return {"steps": len(inputs["steps"])}, arrays


def _ref_update(inputs):
    cache = A.KVCache()
    out = {}
    for i, (k, v) in enumerate(inputs["steps"]):
        kk, vv = cache.update(k, v)
        out[f"k{i}"], out[f"v{i}"], out[f"len{i}"] = kk.numpy(), vv.numpy(), np.array(len(cache))
    return out


def _update_variants(inputs) -> dict:
    return {
        name: {f"k{i}": k.numpy() for i, k in enumerate(ks)}
        for name, ks in Var.update_variants(inputs["steps"]).items()
    }


def _judge_update(check):
    def judge(got, ref, inputs):
        steps = [(k.numpy(), v.numpy()) for k, v in inputs["steps"]]
        found = Prop.update(got, steps)  # keys, values and lengths together: before the keys-only variants
        cands = {} if found else Var.update_variants(inputs["steps"])
        results = []
        for i in range(len(inputs["steps"])):
            name = f"k{i}"
            results.append(
                compare(
                    check,
                    f"the keys after update {i + 1}",
                    got.get(name),
                    ref[name],
                    candidates=lambda i=i: {n: ks[i] for n, ks in cands.items() if len(ks) > i},
                )
            )
            results.append(compare(check, f"the values after update {i + 1}", got.get(f"v{i}"), ref[f"v{i}"]))
            results.append(
                compare(check, f"len(cache) after update {i + 1}", got.get(f"len{i}"), ref[f"len{i}"], exact=True)
            )
            if not all(r.ok for r in results):
                break
        return named_by_property(first_failure(*results), found)

    return judge


# torch.cat's own words when the steps' lengths do not fit another axis (the time axis is dim 2)
_UPDATE_ERRORS = {"cache_wrong_axis": "Sizes of tensors must match except in dimension&&!except in dimension 2"}

for _cid, _hidden, _seed in (("kv_cache.update", False, 1301), ("kv_cache.update_hidden", True, 0)):
    _c = Check(
        id=_cid,
        title="KVCache.update",
        task="KVCache.update(k_new, v_new)",
        kind="update",
        hidden=_hidden,
        seed=_seed,
        build=(lambda s, h=_hidden: _build_update(s, h)),
        wire=_wire_update,
        reference=_ref_update,
        variants=_update_variants,
        error_patterns=_UPDATE_ERRORS,
    )
    _c.judge = _judge_update(_c)
    CHECKS.append(_c)
