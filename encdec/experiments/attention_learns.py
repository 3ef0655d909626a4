"""How attention learns: one question's cross-attention maps over a training run;
``python -m encdec.experiments.attention_learns``.

Chapter 12 draws its record. It reruns the ``modern`` preset's own run (same recipe, same seed)
for its first epochs and, before the first epoch and after each stored one, reads the decoder's
cross-attention weights for one fixed question, teacher-forced on its right answer: per decoder
layer and head, a (Ka-1, Kq) = (4, 9) map, rows the decoder inputs BOS, sign, tens, units, columns
the question's tokens. The shipped checkpoint's maps close the record as its last epoch. Only
the maps and what the model answered then are kept, not the weights.

    python -m encdec.experiments.attention_learns --out encdec/checkpoints/experiments/attention_learns.json --threads 1
"""

from __future__ import annotations

import sys

import torch

from ..data import decode, encode_answer, encode_question
from ..generate import greedy_decode
from ..presets import get_preset
from ..train import load_run, train
from . import EXPERIMENTS, arguments, significant, write

PRESET = "modern"
QUESTION = "BOS NEGATIVE 30 subtract NEGATIVE 34 EOS"  # chapters 11 and 12's question
ANSWER = "BOS POSITIVE 04 EOS"
EPOCHS = (0, 1, 2, 5, 10, 20, 40)  # the run stops after the last
OUT = EXPERIMENTS / "attention_learns.json"


@torch.no_grad()
def snapshot(model) -> dict:
    """The question's cross-attention maps (layer, head, Ka-1, Kq) and the model's greedy answer to it."""
    was_training = model.training
    model.eval()  # no dropout on the maps; nothing here draws from a random stream
    ques_b, ans_b = torch.tensor([encode_question(QUESTION)]), torch.tensor([encode_answer(ANSWER)])  # (1, 9), (1, 5)
    model(ques_b, model.positions(ques_b.shape[1]), ans_b, model.positions(ans_b.shape[1]))  # (1, 4, V)
    maps = [layer.attention_cross.last_attention[0] for layer in model.decoder.layers]  # each (H, Ka-1, Kq)
    answer = decode(greedy_decode(model, ques_b, ans_b.shape[1] - 1)[0])
    model.train(was_training)
    return {
        "maps": [[[[significant(w, 3) for w in row] for row in head] for head in m.tolist()] for m in maps],
        "answer": answer,
    }


def main(argv: list[str] | None = None) -> dict:
    args = arguments(__doc__, OUT, argv)
    snapshots: dict[int, dict] = {}

    def watch(epoch: int, model) -> bool:
        if epoch in EPOCHS:
            snapshots[epoch] = snapshot(model)
        return epoch >= EPOCHS[-1]

    model_config, train_config = get_preset(PRESET)
    _, metrics = train(model_config, train_config, progress=False, watch=watch)
    shipped, shipped_metrics = load_run(PRESET)
    snapshots[shipped_metrics["epochs_run"]] = snapshot(shipped)
    record = {
        "command": " ".join(
            ["python -m encdec.experiments.attention_learns", *(argv if argv is not None else sys.argv[1:])]
        ),
        "preset": PRESET,
        "question": QUESTION,
        "answer": ANSWER,
        "epochs": sorted(snapshots),
        "shipped_epoch": shipped_metrics["epochs_run"],  # the last: the shipped checkpoint's own maps
        # the run's first epochs beside the shipped run's record: the same recipe and seed
        "train_loss": [significant(r["train_loss"]) for r in metrics["history"]],
        "shipped_train_loss": [significant(r["train_loss"]) for r in shipped_metrics["history"][: EPOCHS[-1]]],
        "snapshots": [snapshots[e] for e in sorted(snapshots)],
    }
    return write(args.out, record)


if __name__ == "__main__":
    main()
