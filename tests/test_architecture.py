"""encdec/architecture.py: the whole-picture figure of chapter 11 carries the shapes a forward pass made."""

import matplotlib
import torch

from encdec.architecture import draw, trace
from encdec.model import Transformer
from encdec.train import load_run

matplotlib.use("Agg")


def batch(N: int = 3, Kq: int = 9, Ka: int = 5):
    return torch.zeros(N, Kq, dtype=torch.long), torch.zeros(N, Ka, dtype=torch.long)


def test_the_trained_model_traces_the_lessons_shapes():
    model = load_run("modern")[0]
    c = model.config
    t = trace(model, *batch())
    assert t.question == ("N", 9) and t.decoder_input == ("N", 4)
    assert t.memory == ("N", 9, c.emb_dim) and t.logits == ("N", 4, c.vocab_size)
    assert len(t.encoder_layers) == c.num_enc_layers and len(t.decoder_layers) == c.num_dec_layers
    assert t.decoder_layers[0] == (("N", 4, c.emb_dim), ("N", c.num_heads, 4, 4), ("N", c.num_heads, 4, 9))


def test_a_model_of_other_sizes_draws_other_shapes():
    model = Transformer(emb_dim=12, num_heads=3, feedforward_dim=8, num_enc_layers=3, num_dec_layers=1, dropout=0.0)
    t = trace(model, *batch(N=2, Kq=6, Ka=3))
    assert t.encoder_layers == [(("N", 6, 12), ("N", 3, 6, 6))] * 3
    assert t.decoder_layers == [(("N", 2, 12), ("N", 3, 2, 2), ("N", 3, 2, 6))]
    fig = draw(t)
    texts = [x.get_text() for x in fig.axes[0].texts]
    assert sum("encoder layer" in x for x in texts) == 3 and sum("decoder layer" in x for x in texts) == 1
    assert any("A cross [N, H=3, 2, 6]" in x for x in texts)
    assert "[N, 2, 16]" in texts  # the logits' arrow


def test_every_decoder_layer_reads_the_memory():
    t = trace(load_run("modern")[0], *batch())
    fig = draw(t, lang="zh")
    arrows = [a for a in fig.axes[0].texts if a.get_text() == "" and getattr(a, "arrow_patch", None) is not None]
    memory_arrows = [a for a in arrows if a.xy[0] == 5.4]  # into a decoder layer's left side
    assert len(memory_arrows) == len(t.decoder_layers)
    assert any("编码器第 1 层" in x.get_text() for x in fig.axes[0].texts)
