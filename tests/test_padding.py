"""encdec/padding.py, and what chapter 12's "Padding in a real batch" says of the trained model."""

import pytest
import torch

from encdec import padding
from encdec.attention import get_subsequent_mask
from encdec.data import TOKEN_TO_ID, load_arithmetic
from encdec.padding import decoder_logits, masked_loss, pad_batch, padding_mask, row_positions
from encdec.train import load_run


def test_shape_check_runs():
    padding._check_shapes()


def test_pad_batch_fills_each_side_and_marks_the_real_tokens():
    ids, real = pad_batch([[7, 8, 9], [5]], pad_id=0, side="right")
    assert ids.tolist() == [[7, 8, 9], [5, 0, 0]]
    assert real.tolist() == [[True] * 3, [True, False, False]]
    ids, real = pad_batch([[7, 8, 9], [5]], pad_id=0, side="left")
    assert ids.tolist() == [[7, 8, 9], [0, 0, 5]]
    with pytest.raises(ValueError, match="side must be"):
        pad_batch([[1]], 0, side="middle")
    with pytest.raises(ValueError, match="no empty row"):
        pad_batch([[1], []], 0)


def test_padding_mask_forbids_padding_columns_for_every_reader():
    _, real = pad_batch([[1, 2], [3]], pad_id=0, side="left")
    mask = padding_mask(real)  # (N, K, K)
    assert mask[1].tolist() == [[True, False], [True, False]]
    assert not mask[0].any()


def test_row_positions_count_from_each_rows_first_token():
    model = load_run("modern")[0]
    _, real = pad_batch([[1, 2, 3], [4]], pad_id=0, side="left")
    pos = row_positions(model, real, 5)  # (N, K, M)
    table = model.positions(5)[0]
    assert torch.equal(pos[0], table[:3]) and torch.equal(pos[1, 2], table[0])
    with pytest.raises(ValueError, match="more than the answer"):
        row_positions(model, real, 2)


@pytest.fixture(scope="module")
def batch():
    """The chapter's batch: 500 validation rows, each a prefix of 1 to 4 decoder inputs."""
    model = load_run("modern")[0].eval()
    data = load_arithmetic()
    q, a = data.val_questions, data.val_answers
    k = torch.randint(1, 5, (q.shape[0],), generator=torch.Generator().manual_seed(0))
    rows = [a[i, :n].tolist() for i, n in enumerate(k.tolist())]
    with torch.no_grad():
        alone = model(q, model.positions(9), a, model.positions(5))  # (N, Ka-1, V)
    return model, q, a, k, rows, alone


def moved(batch, side: str, masks: str) -> tuple[float, float]:
    """Largest move of a real position's logits against the row alone, and the share of rows whose
    prediction changed, under the named masks."""
    model, q, _, k, rows, alone = batch
    ids, real = pad_batch(rows, TOKEN_TO_ID["EOS"], side)
    ref = torch.zeros(*ids.shape, alone.shape[-1])
    for i, n in enumerate(k.tolist()):
        ref[i, real[i]] = alone[i, :n]
    causal, pads = get_subsequent_mask(ids), padding_mask(real)
    mask = {"both": causal | pads, "causal": causal, "padding": pads}[masks]
    with torch.no_grad():
        lg = decoder_logits(model, q, ids, row_positions(model, real, 5), mask)
    changed = ((lg.argmax(-1) != ref.argmax(-1)) & real).any(dim=1).float().mean().item()
    return (lg - ref).abs().amax(dim=-1)[real].max().item(), changed


def test_with_both_masks_a_padded_row_is_the_row_alone(batch):
    for side in ("right", "left"):
        assert moved(batch, side, "both") == (pytest.approx(0, abs=1e-4), 0.0)


def test_right_padding_needs_only_the_causal_mask_left_padding_needs_the_padding_mask(batch):
    assert moved(batch, "right", "causal")[0] < 1e-4
    assert moved(batch, "left", "causal")[0] > 1.0


def test_without_the_causal_mask_most_rows_change(batch):
    assert moved(batch, "right", "padding")[1] > 0.5


def test_the_loss_mask_gives_the_rows_own_loss(batch):
    model, q, a, k, rows, alone = batch
    ids, real = pad_batch(rows, TOKEN_TO_ID["EOS"], "right")
    labels, _ = pad_batch([a[i, 1 : n + 1].tolist() for i, n in enumerate(k.tolist())], TOKEN_TO_ID["EOS"], "right")
    with torch.no_grad():
        lg = decoder_logits(model, q, ids, row_positions(model, real, 5), get_subsequent_mask(ids) | padding_mask(real))
    per = torch.nn.functional.cross_entropy(alone.transpose(1, 2), a[:, 1:], reduction="none")  # (N, Ka-1)
    own = torch.cat([per[i, :n] for i, n in enumerate(k.tolist())]).mean()
    assert masked_loss(lg, labels, real).item() == pytest.approx(own.item(), rel=1e-2, abs=1e-6)
    assert masked_loss(lg, labels, None).item() > 100 * own.item() + 1.0
