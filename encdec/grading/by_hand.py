"""The items a student writes by hand (the causal mask, the masked softmax: chapters 11 and 12) run with
no attention operator in the process: while the check calls the student's code, every operator of
torch's dispatcher that computes attention or a masked softmax refuses to run.

So ``scaled_dot_product_attention(scores, I, I, is_causal=True)``, whose weights with the identity for
keys and values *are* the causal softmax, gives nothing however it is reached: ``F.``, ``torch._C._nn.``,
``torch.ops.aten.``, a name joined at run time, a helper file, another thread, the math backend, a
decomposition. The refusal is a kernel registered in torch's dispatcher (``torch.library``) for the CPU,
its autograd and the composite keys of each such operator, found by what the operator is (its name in the
dispatcher), not by how a cell spells it; it is removed when the call returns, so the given parts of
the other checks (the decoder's attention) are untouched. The student's own run and a graded run alike.

A kernel of the student's own registered over a refused operator is written by hand, and earns the item:
it replaces the refusal for the keys it is registered at, a redispatch past it finds it again (torch's
own kernel is no longer in the table), and every other operator of attention or a masked softmax it
could call instead still refuses, so what runs is the mask and the softmax the student wrote (fixture
rows ``wu_own_attention_kernel``, full marks, and ``cheat_wu_kernel_redispatch``).
"""

from __future__ import annotations

import functools
import warnings
from contextlib import contextmanager

import torch

KINDS = ("causal_mask", "causal_softmax", "mask", "softmax")  # encdec.grading.calls: the by-hand items
_WORDS = ("attention", "masked_softmax", "transformer_encoder")  # what an operator computes, in its name
_KEYS = ("CPU", "AutogradCPU", "CompositeImplicitAutograd")


class ReadyMadeAttention(RuntimeError):
    pass


@functools.lru_cache(maxsize=1)
def operators() -> tuple[str, ...]:
    """torch's operators that compute attention or a masked softmax (the installed torch's, listed once)."""
    names = (n.split("::", 1)[1] for n in torch._C._dispatch_get_all_op_names() if n.startswith("aten::"))
    return tuple(sorted({n for n in names if any(w in n for w in _WORDS)}))


def _refuse(name: str):
    def refuse(*args, **kwargs):
        raise ReadyMadeAttention(
            f"torch's aten::{name} is not available in a graded run (nor in your own) to a part written by "
            "hand: write the mask and the softmax yourself"
        )

    return refuse


@contextmanager
def no_ready_made_attention():
    """Within the block, every operator of ``operators()`` raises ReadyMadeAttention."""
    with warnings.catch_warnings():  # "overriding a previously registered kernel": on purpose
        warnings.simplefilter("ignore")
        lib = torch.library.Library("aten", "IMPL")
        for name in operators():
            for key in _KEYS:
                lib.impl(name, _refuse(name), key)
    try:
        yield
    finally:
        lib._destroy()
