"""The whole picture: the encoder–decoder as one figure, with the shapes a real forward pass makes.

Taught in chapter 11 ("The whole picture"). ``trace`` runs the model once on a batch and records,
with forward hooks, the shape every part hands on (nothing is typed by hand: a model with other
sizes draws other shapes); ``draw`` lays them out: the encoder stack makes the memory, and every
decoder layer's cross-attention reads that same memory as K and V.

Letters: ``N`` batch, ``Kq`` question length, ``Ka`` answer length, ``M`` model width, ``H``
heads, ``V`` vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from .model import Transformer


@dataclass
class Trace:
    """The shapes of one forward pass, the batch axis written ``N``."""

    question: tuple = ()  # ids (N, Kq)
    decoder_input: tuple = ()  # ids (N, Ka-1): the shifted answer
    question_states: tuple = ()  # (N, Kq, M): embeddings + positions
    answer_states: tuple = ()  # (N, Ka-1, M)
    encoder_layers: list = field(default_factory=list)  # per layer: (output shape, A shape)
    memory: tuple = ()  # (N, Kq, M)
    decoder_layers: list = field(default_factory=list)  # per layer: (output, A self, A cross)
    logits: tuple = ()  # (N, Ka-1, V)


def _shape(x: Tensor) -> tuple:
    return ("N", *x.shape[1:])


def trace(model: Transformer, ques_b: Tensor, ans_b: Tensor) -> Trace:
    """Run ``model`` on ques_b (N, Kq) and ans_b (N, Ka) as in training and record each shape."""
    t = Trace(question=_shape(ques_b), decoder_input=_shape(ans_b[:, :-1]))
    embedded: list[tuple] = []
    handles = [model.emb_layer.register_forward_hook(lambda m, i, out: embedded.append(_shape(out)))]
    for layer in model.encoder.layers:
        handles.append(
            layer.register_forward_hook(
                lambda m, i, out: t.encoder_layers.append((_shape(out), _shape(m.attention_self.last_attention)))
            )
        )
    for layer in model.decoder.layers:
        handles.append(
            layer.register_forward_hook(
                lambda m, i, out: t.decoder_layers.append(
                    (_shape(out), _shape(m.attention_self.last_attention), _shape(m.attention_cross.last_attention))
                )
            )
        )
    try:
        with torch.no_grad():
            logits = model(ques_b, model.positions(ques_b.shape[1]), ans_b, model.positions(ans_b.shape[1]))
    finally:
        for h in handles:
            h.remove()
    t.question_states, full_answer = embedded  # the question's (N, Kq, M), the whole answer's (N, Ka, M)
    t.answer_states = ("N", ans_b.shape[1] - 1, *full_answer[2:])  # sliced before the decoder: (N, Ka-1, M)
    t.memory = t.encoder_layers[-1][0]
    t.logits = _shape(logits)
    return t


LABELS = {
    "en": {
        "question": "question ids",
        "answer": "answer ids, shifted\n(BOS POSITIVE 0 4)",
        "embed": "emb_layer + positions",
        "enc": "encoder layer {i}\nattention_self (no mask), MLP",
        "dec": "decoder layer {i}\nattention_self (causal)  ·  attention_cross  ·  MLP",
        "memory": "memory",
        "kv": "K, V",
        "vocab": "proj_to_vocab",
        "logits": "logits",
        "title": "the encoder–decoder, with the shapes of a forward pass",
        "encoder": "encoder",
        "decoder": "decoder",
    },
    "zh": {
        "question": "题目 ids",
        "answer": "答案 ids，右移\n(BOS POSITIVE 0 4)",
        "embed": "emb_layer + 位置编码",
        "enc": "编码器第 {i} 层\nattention_self（无掩码）、MLP",
        "dec": "解码器第 {i} 层\nattention_self（因果）· attention_cross · MLP",
        "memory": "记忆",
        "kv": "K、V",
        "vocab": "proj_to_vocab",
        "logits": "logits",
        "title": "编码器–解码器，标出一次前向传播的形状",
        "encoder": "编码器",
        "decoder": "解码器",
    },
}


def _fmt(shape: tuple) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _fmt_attention(shape: tuple) -> str:
    """An attention weights' shape (N, H, rows, columns), the heads named: [N, H=4, 4, 9]."""
    n, h, *rest = shape
    return _fmt((n, f"H={h}", *rest))


def draw(t: Trace, lang: str = "en"):
    """The figure of ``t``: the encoder stack (left) makes the memory, which every decoder layer's
    cross-attention (right) reads as K and V; each arrow carries the shape it hands on."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch

    w = LABELS[lang]
    n_enc, n_dec = len(t.encoder_layers), len(t.decoder_layers)
    rows = max(n_enc, n_dec) + 4
    fig, ax = plt.subplots(figsize=(10.5, 0.95 * rows + 1.2))
    ax.set(xlim=(0, 10.5), ylim=(-0.4, rows + 0.4))
    ax.axis("off")
    enc_x, dec_x, box_h = 1.0, 5.4, 0.62
    colours = {"enc": "#4c72b0", "dec": "#55a868", "cross": "#dd8452", "io": "#8c8c8c"}

    def box(x, y, width, text, colour):
        ax.add_patch(
            FancyBboxPatch(
                (x, y - box_h / 2),
                width,
                box_h,
                boxstyle="round,pad=0.02,rounding_size=0.08",
                facecolor=colour,
                alpha=0.18,
                edgecolor=colour,
                lw=1.4,
            )
        )
        ax.text(x + width / 2, y, text, ha="center", va="center", fontsize=8.5)

    def column(x, width, parts) -> list[float]:
        """Boxes stacked bottom to top from y = 0.3, one row apart: ``parts`` are (the shape the
        arrow into the box carries, or None for the first, its text, its colour). Their heights."""
        ys = []
        for k, (shape, text, colour) in enumerate(parts):
            y = 0.3 + k
            if shape is not None:  # the arrow from the box below, labelled with what it hands on
                mid = x + width / 2
                ax.annotate(
                    "",
                    xy=(mid, y - box_h / 2),
                    xytext=(mid, y - 1 + box_h / 2),
                    arrowprops={"arrowstyle": "-|>", "color": "#444444", "lw": 1.2, "shrinkA": 0, "shrinkB": 0},
                )
                ax.text(
                    mid + 0.08,
                    y - 0.5,
                    _fmt(shape),
                    fontsize=7.5,
                    color="#444444",
                    ha="left",
                    va="center",
                    family="monospace",
                )
            box(x, y, width, text, colour)
            ys.append(y)
        return ys

    enc_w, dec_w = 3.0, 4.6
    # encoder column: ids, embedding, layers, memory; each layer hands on what the next one reads
    enc_in = [t.question_states] + [out for out, _ in t.encoder_layers[:-1]]
    enc_y = column(
        enc_x,
        enc_w,
        [
            (None, w["question"], colours["io"]),
            (t.question, w["embed"], colours["io"]),
            *[
                (shape, w["enc"].format(i=i) + f"\nA {_fmt_attention(attn)}", colours["enc"])
                for i, (shape, (_, attn)) in enumerate(zip(enc_in, t.encoder_layers), start=1)
            ],
            (t.memory, w["memory"], colours["cross"]),
        ],
    )
    memory_y = enc_y[-1]
    # decoder column: ids, embedding, layers (each reads the memory), proj_to_vocab, logits
    dec_in = [t.answer_states] + [out for out, _, _ in t.decoder_layers[:-1]]
    dec_y = column(
        dec_x,
        dec_w,
        [
            (None, w["answer"], colours["io"]),
            (t.decoder_input, w["embed"], colours["io"]),
            *[
                (
                    shape,
                    w["dec"].format(i=i) + f"\nA self {_fmt_attention(a_self)}   A cross {_fmt_attention(a_cross)}",
                    colours["dec"],
                )
                for i, (shape, (_, a_self, a_cross)) in enumerate(zip(dec_in, t.decoder_layers), start=1)
            ],
            (t.decoder_layers[-1][0], w["vocab"], colours["io"]),
            (t.logits, w["logits"], colours["io"]),
        ],
    )
    for y in dec_y[2:-2]:  # the same memory, as K and V, into every decoder layer's cross-attention
        ax.annotate(
            "",
            xy=(dec_x, y),
            xytext=(enc_x + enc_w, memory_y),
            arrowprops={
                "arrowstyle": "-|>",
                "color": colours["cross"],
                "lw": 1.0,
                "alpha": 0.8,
                "connectionstyle": "arc3,rad=-0.08",
                "shrinkA": 2,
                "shrinkB": 2,
            },
        )
    # the label in the gap between the columns, above the arrows' start: it touched both columns' boxes
    ax.text(
        (enc_x + enc_w + dec_x) / 2,
        memory_y + box_h / 2 + 0.1,
        f"{w['kv']}:\n{w['memory']}\n{_fmt(t.memory)}",
        fontsize=7.5,
        color=colours["cross"],
        ha="center",
        va="bottom",
        linespacing=1.3,
    )
    ax.text(enc_x + enc_w / 2, rows + 0.2, w["encoder"], ha="center", fontsize=10, color=colours["enc"], weight="bold")
    ax.text(dec_x + dec_w / 2, rows + 0.2, w["decoder"], ha="center", fontsize=10, color=colours["dec"], weight="bold")
    ax.set_title(w["title"], fontsize=11)
    fig.tight_layout()
    return fig
