"""What the *given* submodules of a student's block or model received and returned, as plain arrays.

Runs in the student's kernel, data only: forward hooks on the given parts of the decoder block
(``attention_self``, ``layer_norm_1``, ``attention_cross``, ``layer_norm_2``, ``feed_forward``,
``layer_norm_3``; chapter 11) or of the Transformer (``emb_layer``, ``encoder``, ``decoder``,
``proj_to_vocab``; chapter 12) record each call's inputs and output, in call order. Nothing here
knows what they should be: the grader compares the record with the lesson's wiring
(``autograder/judge/stages.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from torch import Tensor, nn

_ATTENTION = ("query", "key", "value", "mask")
BLOCK = {
    "attention_self": _ATTENTION,
    "layer_norm_1": ("input",),
    "attention_cross": _ATTENTION,
    "layer_norm_2": ("input",),
    "feed_forward": ("input",),
    "layer_norm_3": ("input",),
}
MODEL = {
    "emb_layer": ("input",),
    "encoder": ("input",),
    "decoder": ("target_seq", "enc_out", "mask"),
    "proj_to_vocab": ("input",),
}
MAX_CALLS = 32  # a forward that calls the given parts more often than this is recorded up to here


def _arrays(names: tuple[str, ...], args: tuple, kwargs: dict) -> dict[str, np.ndarray]:
    """The tensors a call received, by argument name (attention: query, key, value, mask)."""
    got = dict(zip(names, args))
    got.update({k: v for k, v in kwargs.items() if k in names})
    return {k: v.detach().cpu().numpy() for k, v in got.items() if isinstance(v, Tensor)}


@contextmanager
def recording(
    parent: nn.Module, prefix: str, given: dict[str, tuple[str, ...]] = BLOCK
) -> Iterator[dict[str, np.ndarray]]:
    """Record every call of the ``given`` submodules of ``parent`` (name -> its arguments' names)
    while the ``with`` body runs.

    The record: ``<prefix>/<i>/<module>/<argument>`` (e.g. query, key, value, mask, input)
    and ``<prefix>/<i>/<module>/output``, ``i`` the call's rank (two digits). A mask passed as
    ``None`` has no array. Calls past ``MAX_CALLS`` are not recorded."""
    record: dict[str, np.ndarray] = {}
    count = [0]
    rank: dict[str, int] = {}  # module -> the record its running call writes its output to
    hooks = []

    def pre(name):
        def hook(mod, args, kwargs):
            i = count[0]
            count[0] += 1
            rank[name] = i
            if i < MAX_CALLS:
                record.update(
                    {f"{prefix}/{i:02d}/{name}/{k}": v for k, v in _arrays(given[name], args, kwargs).items()}
                )

        return hook

    def post(name):
        def hook(mod, args, kwargs, out):
            i = rank.get(name, MAX_CALLS)
            if i < MAX_CALLS and isinstance(out, Tensor):
                record[f"{prefix}/{i:02d}/{name}/output"] = out.detach().cpu().numpy()

        return hook

    for name in given:
        mod = getattr(parent, name, None)
        if isinstance(mod, nn.Module):
            hooks.append(mod.register_forward_pre_hook(pre(name), with_kwargs=True))
            hooks.append(mod.register_forward_hook(post(name), with_kwargs=True))
    try:
        yield record
    finally:
        for h in hooks:
            h.remove()
