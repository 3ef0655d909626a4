"""Training speed: the modern preset's time to exact match >= 0.99, and the teaching model's
seconds per training step against a same-size torch.nn.Transformer measured in the same run.

Prints its figures; targets: time to 0.99 within 120 s on two cores, step-time ratio <= 1.3.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn

from encdec.data import load_arithmetic
from encdec.model import Transformer, sequence_loss, shift_targets
from encdec.presets import get_preset
from encdec.train import train


class TorchReference(nn.Module):
    """The same shape built from torch.nn.Transformer: shared embedding, positions, vocab head."""

    def __init__(self, ours: Transformer):
        super().__init__()
        c = ours.config
        self.ours_positions = ours.positions
        self.emb_layer = nn.Embedding(c.vocab_size, c.emb_dim)
        self.transformer = nn.Transformer(
            d_model=c.emb_dim,
            nhead=c.num_heads,
            num_encoder_layers=c.num_enc_layers,
            num_decoder_layers=c.num_dec_layers,
            dim_feedforward=c.feedforward_dim,
            dropout=c.dropout,
            batch_first=True,
        )
        self.proj_to_vocab = nn.Linear(c.emb_dim, c.vocab_size)

    def forward(self, ques_b, ques_pos, ans_b, ans_pos):
        src = self.emb_layer(ques_b) + ques_pos  # (N, Kq, M)
        tgt = self.emb_layer(ans_b[:, :-1]) + ans_pos[:, :-1]  # (N, Ka-1, M)
        mask = torch.triu(torch.ones(tgt.shape[1], tgt.shape[1], dtype=torch.bool), 1)
        return self.proj_to_vocab(self.transformer(src, tgt, tgt_mask=mask))  # (N, Ka-1, V)


def step_seconds(model, batches, ques_pos, ans_pos, repeats: int) -> float:
    """Median seconds of one optimiser step (forward, backward, AdamW) over the batches."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.train()
    times = []
    for _ in range(repeats):
        for ques_b, ans_b in batches:
            start = time.perf_counter()
            loss = sequence_loss(model(ques_b, ques_pos, ans_b, ans_pos), shift_targets(ans_b)[1])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def step_time_ratio(repeats: int) -> dict:
    model_config, train_config = get_preset("modern")
    data = load_arithmetic()
    torch.manual_seed(0)
    ours = Transformer(model_config)
    theirs = TorchReference(ours)
    B = train_config.batch_size
    batches = [(data.train_questions[i : i + B], data.train_answers[i : i + B]) for i in range(0, 20 * B, B)]
    ques_pos, ans_pos = ours.positions(9), ours.positions(5)
    step_seconds(ours, batches[:3], ques_pos, ans_pos, 1)  # warm-up
    step_seconds(theirs, batches[:3], ques_pos, ans_pos, 1)
    ours_s, theirs_s = [], []
    for _ in range(repeats):  # interleave, so load on the machine hits both alike
        ours_s.append(step_seconds(ours, batches, ques_pos, ans_pos, 1))
        theirs_s.append(step_seconds(theirs, batches, ques_pos, ans_pos, 1))
    o, t = statistics.median(ours_s), statistics.median(theirs_s)
    return {
        "ours_ms_per_step": round(1e3 * o, 3),
        "torch_nn_ms_per_step": round(1e3 * t, 3),
        "step_time_ratio_ours_over_torch": round(o / t, 3),
    }


def time_to_exact_match(target: float) -> dict:
    model_config, train_config = get_preset("modern")
    train_config.exact_match_every = 1
    train_config.eval_every = 1
    train_config.stop_at_exact_match = target
    start = time.perf_counter()
    _, metrics = train(model_config, train_config, progress=False)
    wall = time.perf_counter() - start
    reached = [h for h in metrics["history"] if h.get("val_exact_match", 0) >= target]
    first = reached[0] if reached else None
    return {
        "target_exact_match": target,
        "reached": first is not None,
        "epoch": first["epoch"] if first else None,
        "train_seconds_to_target": round(first["train_seconds"], 1) if first else None,
        "wall_seconds_incl_evaluation": round(wall, 1),
        "final_val_exact_match": metrics["val_exact_match"],
        "final_val_unseen_exact_match": metrics["val_unseen_exact_match"],
    }


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--skip-convergence", action="store_true", help="only the step-time ratio")
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    result = {"step_time": step_time_ratio(args.repeats)}
    print("training step:", result["step_time"], flush=True)
    if not args.skip_convergence:
        result["time_to_exact_match"] = time_to_exact_match(0.99)
        print("modern preset:", result["time_to_exact_match"], flush=True)
    return result


if __name__ == "__main__":
    main()
