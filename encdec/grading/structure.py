"""Models whose values show how a decoding is built (the structure checks of the kv_cache exercise,
chapter 13).

On the lesson's model a cached and an uncached decoder return the same tokens, and so does a decoder
that runs the encoder at every step: the cache is an economy, not a change of result. So the
structure checks hand the decoder a model with a trait that makes the wrong structure change the
tokens. The kernel builds it from its inputs file (``calls.call_decode``); the grader builds the
same one for the reference. Each trait is a class of the module it changes, so it holds whichever
way the module is called (``module(...)``, ``module.forward(...)``, with or without hooks) and in a
copy made with ``type(model)(model.config)`` or ``copy.deepcopy``.

- ``"reencode"``: encoding a question the model has encoded before moves its readout: each token
  other than EOS takes the logit of the token before it (``proj_to_vocab``'s rows rolled by one), so
  every later step picks another token. A decoding that runs the encoder once per question returns
  the lesson's tokens; one that encodes again at a later step cannot.
- ``"unmasked_self"``: the decoder's self-attention ignores the mask it is given. Fed one new token a
  step through the cache, a step sees only the positions before it, as the mask would allow;
  re-running the whole prefix lets each position read the ones after it, and with two decoder layers
  or more the states, then the tokens, change.
"""
from __future__ import annotations

import copy

import torch
from torch import Tensor, nn

from ..attention import MultiHeadAttention
from ..data import EOS_ID
from ..model import Encoder, Transformer

TRAITS = ("reencode", "unmasked_self")


class UnmaskedSelfAttention(MultiHeadAttention):
    """Self-attention that reads every position it is given: the mask is ignored."""

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None, cache=None) -> Tensor:
        return super().forward(query, key, value, None, cache=cache)  # (N, Lq, M)


class ReencodingEncoder(Encoder):
    """An encoder that remembers the questions it has encoded; encoding one again rolls the readout."""

    def forward(self, src_seq: Tensor) -> Tensor:
        seen = self.__dict__.setdefault("_seen", [])  # (Kq, M) rows already encoded
        again = any(any(s.shape == row.shape and torch.equal(s, row) for s in seen) for row in src_seq)
        seen.extend(row.detach().clone() for row in src_seq)
        if again:
            _roll_readout(self.__dict__["_readout"])
        return super().forward(src_seq)  # (N, Kq, M)


@torch.no_grad()
def _roll_readout(readout: nn.Linear) -> None:
    """Each token other than EOS takes the readout row of the token before it: (V, M) rows rolled."""
    rows = [i for i in range(readout.out_features) if i != EOS_ID]
    readout.weight[rows] = readout.weight[rows].roll(1, dims=0)  # (V - 1, M)
    readout.bias[rows] = readout.bias[rows].roll(1, dims=0)  # (V - 1,)


def _install(model: Transformer, traits: tuple[str, ...]) -> None:
    if "unmasked_self" in traits:
        for layer in model.decoder.layers:
            layer.attention_self.__class__ = UnmaskedSelfAttention
    if "reencode" in traits:
        model.encoder.__class__ = ReencodingEncoder
        model.encoder.__dict__["_readout"] = model.proj_to_vocab  # not a submodule: no state_dict key
        model.encoder.__dict__["_seen"] = []


def check(traits) -> tuple[str, ...]:
    """The traits as a tuple, each one known."""
    traits = tuple(traits)
    unknown = [t for t in traits if t not in TRAITS]
    if unknown:
        raise ValueError(f"unknown structure traits {unknown}: expected some of {list(TRAITS)}")
    return traits


def model_class(traits) -> type[Transformer]:
    """A Transformer class whose instances carry ``traits``: ``type(model)(config)`` keeps them."""
    traits = check(traits)
    if not traits:
        return Transformer

    def __init__(self, config=None, **overrides):
        Transformer.__init__(self, config, **overrides)
        _install(self, traits)

    return type("Transformer", (Transformer,), {"__init__": __init__, "traits": traits,
                                                "__module__": Transformer.__module__})


def with_traits(model: Transformer, traits) -> Transformer:
    """A copy of ``model`` (its weights, its dtype) that carries ``traits``; ``model`` is unchanged."""
    traits = check(traits)
    out = copy.deepcopy(model)
    out.__class__ = model_class(traits)
    _install(out, traits)
    return out


def _check_traits() -> None:
    """Executable check: each trait changes what its wrong structure computes, and nothing else."""
    from ..config import ModelConfig

    torch.manual_seed(0)
    base = Transformer(ModelConfig(emb_dim=8, num_heads=2, feedforward_dim=16, num_enc_layers=1, num_dec_layers=2)).eval()
    ques = torch.randint(0, 16, (2, 9))  # (N, Kq)
    probe = with_traits(base, TRAITS)
    x = torch.randn(2, 3, 8)  # (N, Ka, M)
    mask = torch.triu(torch.ones(3, 3, dtype=torch.bool), diagonal=1).expand(2, 3, 3)
    with torch.no_grad():
        assert torch.equal(probe.encode(ques), base.encode(ques))
        before = probe.proj_to_vocab.weight.clone()
        probe.encode(ques)  # the same questions again: the readout moves
        assert not torch.equal(probe.proj_to_vocab.weight, before)
        assert not torch.allclose(probe.decoder(x, base.encode(ques), mask), base.decoder(x, base.encode(ques), mask))
    assert type(type(probe)(base.config).decoder.layers[0].attention_self) is UnmaskedSelfAttention


if __name__ == "__main__":
    _check_traits()
    print("structure traits: ok")
