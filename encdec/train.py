"""Training with teacher forcing, honest metrics, checkpoints; ``python -m encdec.train``.

Taught in chapter 12: every answer position is a next-token prediction, trained in one
parallel forward; the causal mask keeps position t from reading the label it predicts.

    python -m encdec.train --preset modern --out encdec/checkpoints/modern

writes ``model.pt`` and ``metrics.json`` (teacher-forced token accuracy over *all*
validation batches, greedy exact match on all validation pairs and on those whose question
never appears in training, seconds of training, and the per-epoch history).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch
from tqdm.auto import tqdm

from .config import ModelConfig, TrainConfig
from .data import ArithmeticData, load_arithmetic, problem_space
from .generate import exact_match
from .model import Transformer, sequence_loss, shift_targets
from .presets import PRESETS, get_preset

ORIGINAL_VAL_TOKEN_ACCURACY = 0.8213  # the original notebook's saved figure
ORIGINAL_OVERFIT_ACCURACY = 1.0


def _teacher_forced(
    model: Transformer, questions, answers, label_smoothing: float, batch_size: int
) -> tuple[float, float]:
    """Teacher-forced (loss, accuracy) per answer token over every batch, in the model's current mode."""
    Kq, Ka = questions.shape[1], answers.shape[1]
    ques_pos, ans_pos = model.positions(Kq), model.positions(Ka)
    correct = total = 0
    loss_sum = 0.0
    for start in range(0, len(questions), batch_size):
        q, a = questions[start : start + batch_size], answers[start : start + batch_size]
        logits = model(q, ques_pos, a, ans_pos)  # (n, Ka-1, V)
        _, labels = shift_targets(a)  # (n, Ka-1)
        loss_sum += sequence_loss(logits, labels, label_smoothing).item() * labels.numel()
        correct += (logits.argmax(-1) == labels).sum().item()
        total += labels.numel()
    return loss_sum / total, correct / total


@torch.no_grad()
def token_accuracy(model: Transformer, questions, answers, batch_size: int = 256) -> tuple[float, float]:
    """Teacher-forced (loss, accuracy) per answer token, summed over every batch."""
    was_training = model.training
    model.eval()
    result = _teacher_forced(model, questions, answers, 0.0, batch_size)
    model.train(was_training)
    return result


def smoothed_target(label: int, V: int, label_smoothing: float) -> torch.Tensor:
    """The distribution a label-smoothed loss trains towards, (V,): ``cross_entropy``'s
    ``label_smoothing=eps`` mixes the one-hot label with the uniform, (1 - eps) one-hot + eps / V."""
    target = torch.full((V,), label_smoothing / V, dtype=torch.float64)  # (V,)
    target[label] += 1 - label_smoothing
    return target


def smoothing_floor(V: int, label_smoothing: float) -> float:
    """The lowest label-smoothed cross-entropy any logits can reach: the smoothed target's entropy.

    Cross-entropy against a target q is H(q) + KL(q || p) >= H(q), equal when p = q; so a perfect
    model still reports this much per token, and the training loss cannot fall below it.
    """
    q = smoothed_target(0, V, label_smoothing)  # (V,): the same entropy whichever the label
    q = q[q > 0]
    return float(-(q * q.log()).sum())


@torch.no_grad()
def loss_by_mode(
    model: Transformer, questions, answers, label_smoothing: float, seed: int = 0, batch_size: int = 256
) -> dict[tuple[str, float], float]:
    """Teacher-forced loss per answer token in the four settings {train mode (dropout on), eval mode}
    x {label smoothing ``label_smoothing``, none}: what separates the curve ``train`` records (train
    mode, smoothed) from the validation loss (eval mode, plain). Dropout draws from ``seed``."""
    was_training = model.training
    out = {}
    for mode in ("train", "eval"):
        model.train(mode == "train")
        for eps in (label_smoothing, 0.0):
            torch.manual_seed(seed)  # the same dropout masks for both losses of a mode
            out[(mode, eps)] = _teacher_forced(model, questions, answers, eps, batch_size)[0]
    model.train(was_training)
    return out


def learning_rates(tc: TrainConfig, steps_per_epoch: int, steps: int | None = None) -> list[float]:
    """The learning rate of each optimiser step of a run of ``tc``: the schedule ``train`` builds,
    stepped on a stand-in parameter (``steps`` defaults to the planned epochs x steps_per_epoch)."""
    total = tc.epochs * steps_per_epoch
    opt = make_optimizer(torch.nn.Linear(1, 1), tc)
    sched = _scheduler(opt, tc, total)
    rates = []
    for _ in range(total if steps is None else steps):
        rates.append(opt.param_groups[0]["lr"])
        opt.step()  # no gradients: the weights stay; only the schedule moves
        if sched is not None:
            sched.step()
    return rates


def paper_rates(steps: int, model_dim: int = 512, warmup: int = 4000) -> list[float]:
    """The original paper's schedule, which no preset uses (chapter 12 draws it beside theirs): the
    rate rises linearly for ``warmup`` steps, then falls as the inverse square root of the step,
    ``model_dim ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)``, steps counted from 1."""
    return [model_dim**-0.5 * min(s**-0.5, s * warmup**-1.5) for s in range(1, steps + 1)]


def make_optimizer(model: Transformer, tc: TrainConfig) -> torch.optim.Optimizer:
    """The optimiser ``train`` steps, as ``tc`` configures it (chapter 12 inspects what it updates)."""
    start_lr = tc.warmup_lr if tc.schedule == "step_warmup" else tc.lr
    cls = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}.get(tc.optimizer)
    if cls is None:
        raise ValueError(f"unknown optimizer {tc.optimizer!r}: expected 'adam' or 'adamw'")
    return cls(model.parameters(), lr=start_lr, betas=tc.betas, eps=tc.eps, weight_decay=tc.weight_decay)


def _scheduler(opt, tc: TrainConfig, total_steps: int):
    if tc.schedule == "onecycle":
        return torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=tc.lr, total_steps=total_steps, pct_start=0.2)
    if tc.schedule == "step_warmup":
        # The historical recipe's warm-up (inferred): a tiny rate for warmup_steps steps, then a jump to lr.
        return torch.optim.lr_scheduler.LambdaLR(
            opt, lambda step: 1.0 if step < tc.warmup_steps else tc.lr / tc.warmup_lr
        )
    if tc.schedule == "constant":
        return None
    raise ValueError(f"unknown schedule {tc.schedule!r}: expected onecycle, step_warmup or constant")


def _save_state(path: Path, epoch, model, opt, sched, generator, history, train_seconds, model_config, tc) -> None:
    """Everything a run needs to go on from ``epoch``, written whole or not at all."""
    blob = {
        "epoch": epoch,
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "scheduler": None if sched is None else sched.state_dict(),
        "generator": generator.get_state(),
        "torch_rng": torch.get_rng_state(),
        "history": history,
        "train_seconds": train_seconds,
        "configs": json.dumps([asdict(model_config), asdict(tc)]),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    torch.save(blob, partial)
    os.replace(partial, path)


def _resume(path: Path, model, opt, sched, generator, model_config, tc) -> tuple[int, list[dict], float]:
    """Load a saved run state into the fresh objects; (the next epoch, the history, seconds so far)."""
    blob = torch.load(path, map_location="cpu", weights_only=True)
    if blob.get("configs") != json.dumps([asdict(model_config), asdict(tc)]):
        raise ValueError(
            f"{path} holds a run of another recipe: expected the state of this preset's run "
            "(delete the file to start afresh)"
        )
    model.load_state_dict(blob["model"])
    opt.load_state_dict(blob["optimizer"])
    if sched is not None:
        sched.load_state_dict(blob["scheduler"])
    generator.set_state(blob["generator"])
    torch.set_rng_state(blob["torch_rng"])
    return blob["epoch"] + 1, blob["history"], blob["train_seconds"]


def _lowest_at(history: list[dict]) -> int:
    """The epoch of the lowest validation loss so far (the first, on a tie)."""
    scored = [row for row in history if "val_loss" in row]
    return min(scored, key=lambda row: row["val_loss"])["epoch"]


def train(
    model_config: ModelConfig,
    train_config: TrainConfig,
    data: ArithmeticData | None = None,
    progress: bool = True,
    state: str | Path | None = None,
    save_every: int = 25,
    watch=None,
) -> tuple[Transformer, dict]:
    """Train a fresh Transformer; return it (in eval mode) and its metrics.

    ``state``: a file where the run saves everything it needs to go on (weights, optimiser,
    schedule, random streams, history) every ``save_every`` epochs; a run started with a state
    file that exists continues from it, bit for bit the run it would have been. ``watch(epoch,
    model)``, if given, sees the model before the first epoch (0) and after each; a true return ends
    the run there (chapter 12's experiments, ``encdec/experiments/``, read the run through it)."""
    tc = train_config
    data = data or load_arithmetic()
    torch.manual_seed(tc.seed)
    generator = torch.Generator().manual_seed(tc.seed)
    model = Transformer(model_config)
    train_q, train_a = data.train_questions, data.train_answers
    if tc.train_subset is not None:
        train_q, train_a = train_q[: tc.train_subset], train_a[: tc.train_subset]
    Kq, Ka = train_q.shape[1], train_a.shape[1]
    ques_pos, ans_pos = model.positions(Kq), model.positions(Ka)  # (1, Kq, M), (1, Ka, M)
    steps_per_epoch = math.ceil(len(train_q) / tc.batch_size)
    opt = make_optimizer(model, tc)
    sched = _scheduler(opt, tc, tc.epochs * steps_per_epoch)
    history: list[dict] = []
    space = problem_space() if tc.stop_when_space_exact else None  # (19602, Kq), (19602, Ka)
    reached_at = None
    train_seconds = 0.0
    start_epoch = 1
    if state is not None and Path(state).is_file():
        start_epoch, history, train_seconds = _resume(Path(state), model, opt, sched, generator, model_config, tc)
    # In a log (no terminal) redraw every 10 s rather than every epoch.
    redraw = 0.1 if sys.stderr.isatty() else 10.0
    epochs, done = range(start_epoch, tc.epochs + 1), start_epoch - 1
    bar = tqdm(epochs, "epochs", tc.epochs, disable=not progress, unit="ep", mininterval=redraw, initial=done)
    if watch is not None and start_epoch == 1:
        watch(0, model)
    for epoch in bar:
        model.train()
        start = time.perf_counter()
        order = torch.randperm(len(train_q), generator=generator)
        epoch_loss = 0.0
        for i in range(0, len(train_q), tc.batch_size):
            idx = order[i : i + tc.batch_size]
            ques_b, ans_b = train_q[idx], train_a[idx]  # (n, Kq), (n, Ka)
            logits = model(ques_b, ques_pos, ans_b, ans_pos)  # (n, Ka-1, V)
            _, labels = shift_targets(ans_b)  # (n, Ka-1): the token each position predicts
            loss = sequence_loss(logits, labels, tc.label_smoothing)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if tc.grad_clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), tc.grad_clip)
            opt.step()
            if sched is not None:
                sched.step()
            epoch_loss += loss.item() * len(idx)
        train_seconds += time.perf_counter() - start
        row = {"epoch": epoch, "train_loss": epoch_loss / len(train_q), "train_seconds": train_seconds}
        last = epoch == tc.epochs
        if last or epoch % tc.eval_every == 0:
            row["val_loss"], row["val_token_accuracy"] = token_accuracy(model, data.val_questions, data.val_answers)
        if tc.exact_match_every and (last or epoch % tc.exact_match_every == 0):
            row["val_exact_match"] = exact_match(model, data.val_questions, data.val_answers)
            if (
                reached_at is None
                and tc.stop_at_exact_match is not None
                and row["val_exact_match"] >= tc.stop_at_exact_match
            ):
                reached_at = epoch
            if tc.stop_when_space_exact:
                row["space_wrong"] = round((1 - exact_match(model, *space)) * len(space[0]))
                if row["space_wrong"] == 0:
                    reached_at = epoch
        history.append(row)
        if watch is not None and watch(epoch, model):
            reached_at = epoch
        if tc.plateau_patience and "val_loss" in row and epoch - _lowest_at(history) >= tc.plateau_patience:
            reached_at = epoch  # the plateau: no new low of the validation loss for plateau_patience epochs
        bar.set_postfix({k: round(v, 4) for k, v in row.items() if k not in ("epoch", "train_seconds")}, refresh=False)
        if state is not None and (epoch % save_every == 0 or reached_at is not None or last):
            _save_state(Path(state), epoch, model, opt, sched, generator, history, train_seconds, model_config, tc)
        if reached_at is not None:
            break
    model.eval()
    unseen_q, unseen_a = data.unseen()
    space_q, space_a = space or problem_space()  # (19602, Kq), (19602, Ka): every question of the task
    space_em = exact_match(model, space_q, space_a)
    scored = [row for row in history if "val_token_accuracy" in row]
    best = max(scored, key=lambda row: row["val_token_accuracy"])
    subset_q = train_q if tc.train_subset is not None else None
    val_loss, val_acc = token_accuracy(model, data.val_questions, data.val_answers)
    metrics = {
        "val_loss": val_loss,
        "val_token_accuracy": val_acc,
        "val_exact_match": exact_match(model, data.val_questions, data.val_answers),
        "val_unseen_exact_match": exact_match(model, unseen_q, unseen_a),
        "num_val": len(data.val_questions),
        "num_val_unseen": len(unseen_q),
        "space_exact_match": space_em,
        "space_wrong": round((1 - space_em) * len(space_q)),
        "num_space": len(space_q),
        # the best epoch by validation token accuracy, beside the last one (chapter 12 shows both)
        "best_epoch": best["epoch"],
        "best_val_token_accuracy": best["val_token_accuracy"],
        "train_seconds": train_seconds,
        "epochs_run": len(history),
        "parameters": sum(p.numel() for p in model.parameters()),
        "history": history,
    }
    if subset_q is not None:
        _, metrics["train_token_accuracy"] = token_accuracy(model, subset_q, train_a)
        metrics["train_exact_match"] = exact_match(model, subset_q, train_a)
    return model, metrics


def save_checkpoint(model: Transformer, path: str | Path) -> None:
    """Weights and the ModelConfig, loadable with ``weights_only=True`` (no pickle of code)."""
    torch.save({"model_config": asdict(model.config), "state_dict": model.state_dict()}, path)


def load_checkpoint(path: str | Path) -> Transformer:
    """A ready Transformer in eval mode from ``save_checkpoint``'s file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}: make one with `python -m encdec.train --out DIR`")
    blob = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(blob, dict) or {"model_config", "state_dict"} - set(blob):
        raise ValueError(f"{path} is not an encdec checkpoint: expected keys model_config and state_dict")
    model = Transformer(ModelConfig(**blob["model_config"]))
    model.load_state_dict(blob["state_dict"])
    return model.eval()


# The presets' runs, versioned in git with their metrics and the command that made them
# (``make checkpoints`` retrains them on request); the student wheel carries them as package data.
PACKAGED_CHECKPOINTS = Path(__file__).resolve().parent / "checkpoints"


def checkpoint_root() -> Path:
    """Where the presets' runs are: $ENCDEC_CHECKPOINTS (a retraining experiment), else the
    package's own ``encdec/checkpoints``."""
    root = Path(os.environ.get("ENCDEC_CHECKPOINTS") or PACKAGED_CHECKPOINTS)
    if not root.is_dir():
        raise FileNotFoundError(
            f"no checkpoints folder at {root}: expected one folder per preset (`make checkpoints` retrains them)"
        )
    return root


def load_run(preset: str) -> tuple[Transformer, dict]:
    """The trained model (eval mode) and metrics of one preset's shipped run."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}: expected one of {', '.join(PRESETS)}")
    folder = checkpoint_root() / preset
    metrics = json.loads((folder / "metrics.json").read_text())
    return load_checkpoint(folder / "model.pt"), metrics


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", choices=sorted(PRESETS), required=True)
    parser.add_argument("--out", required=True, help="folder for model.pt and metrics.json")
    parser.add_argument("--epochs", type=int, help="override the preset's number of epochs")
    parser.add_argument("--seed", type=int, help="override the preset's seed")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument(
        "--state",
        help="save the run's state to this file as it goes, and continue from it "
        "when it exists (a long run survives an interruption)",
    )
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    model_config, train_config = get_preset(args.preset)
    if args.epochs is not None:
        train_config.epochs = args.epochs
    if args.seed is not None:
        train_config.seed = args.seed
    model, metrics = train(model_config, train_config, state=args.state)
    metrics["preset"] = args.preset
    # the command that made this run, as a user retypes it (no machine's paths)
    given = list(argv if argv is not None else sys.argv[1:])
    if "--state" in given:  # where a run kept its state does not change the run
        del given[given.index("--state") : given.index("--state") + 2]
    given = [a for a in given if not a.startswith("--state=")]
    metrics["command"] = " ".join(["python -m encdec.train", *given])
    metrics["model_config"] = asdict(model_config)
    metrics["train_config"] = asdict(train_config)
    metrics["original"] = {
        "val_token_accuracy": ORIGINAL_VAL_TOKEN_ACCURACY,
        "overfit_accuracy": ORIGINAL_OVERFIT_ACCURACY,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    save_checkpoint(model, out / "model.pt")
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    if args.state:  # the run is written: its state has done its job (a new run starts afresh)
        Path(args.state).unlink(missing_ok=True)
    summary = {
        k: metrics[k] for k in ("val_token_accuracy", "val_exact_match", "val_unseen_exact_match", "train_seconds")
    }
    print(json.dumps({"preset": args.preset, **summary}))
    return metrics


if __name__ == "__main__":
    main()
