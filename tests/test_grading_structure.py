"""The kv_cache structure items are judged by values (issue: honest scores by construction): the
grader's model for each carries a trait (encdec/grading/structure.py) under which the wrong
structure returns other tokens, so nothing is timed.

Invariant: on a structure model, the reference tokens come from a decoding that runs the encoder
once per question and feeds each token once through a cache, whatever else the code does (hooks
emptied, ``forward`` called directly, the model copied); an honest decoding in another style passes.
Each attempt below is kept as a test."""
from __future__ import annotations

import copy

import pytest
import torch

from autograder import judge as J
from encdec import attention as A
from encdec.data import BOS_ID
from encdec.generate import pick_next
from encdec.grading import structure
from grading_support import cached_decoder, graded, uncached

STUDENTS = [f"student{i:02d}" for i in range(12)]
SECRET = b"a course secret for this test only"


@pytest.fixture
def workdir(tmp_path):
    return tmp_path


def seeds(check_id: str) -> list[int]:
    return [J.check_seed(SECRET, s, "kv_cache", check_id) for s in STUDENTS]


@torch.no_grad()
def per_question(model, ques_b, n):
    """Honest, in another style: each question decoded alone (the encoder runs once per question)."""
    return torch.cat([cached_decoder()(model, ques_b[i : i + 1], n) for i in range(ques_b.shape[0])])


@torch.no_grad()
def masked_single_step(model, ques_b, n):
    """Honest: a cached decoding that passes a mask at every step (nothing in the cache is future)."""
    N = ques_b.shape[0]
    tokens, pos, memory = torch.full((N, 1), BOS_ID), model.positions(1 + n), model.encode(ques_b)
    caches = [(A.KVCache(), A.KVCache(static=True)) for _ in model.decoder.layers]
    done = torch.zeros(N, dtype=torch.bool)
    for t in range(n):
        x = model.emb_layer(tokens[:, -1:]) + pos[:, t : t + 1]  # (N, 1, M)
        nothing_future = torch.zeros(N, 1, t + 1, dtype=torch.bool)  # (N, 1, T): the new row reads every cached key
        h = model.decoder(x, memory, nothing_future, caches=caches)  # (N, 1, M)
        nxt, done = pick_next(model.proj_to_vocab(h[:, -1]), done)
        tokens = torch.cat([tokens, nxt[:, None]], dim=1)
    return tokens


@torch.no_grad()
def distinct_rows_only(model, ques_b, n):
    """The shortcut that met the old cost bound: uncached, re-running only the distinct rows."""
    uniq, back = torch.unique(ques_b, dim=0, return_inverse=True)
    return uncached(model, uniq, n)[back]


@torch.no_grad()
def copied_then_uncached(model, ques_b, n):
    """Uncached decoding on a copy of the model (hooks or not, ``type(model)(config)``)."""
    twin = type(model)(model.config)
    twin.load_state_dict(model.state_dict())
    return uncached(twin.eval(), ques_b, n)


@torch.no_grad()
def hooks_emptied_forward_called(model, ques_b, n):
    """Every hook dictionary emptied, each layer's ``forward`` called directly, the prefix re-run."""
    for m in model.modules():
        m._forward_pre_hooks.clear()
        m._forward_hooks.clear()
    N = ques_b.shape[0]
    tokens, pos, memory = torch.full((N, 1), BOS_ID), model.positions(1 + n), model.encode(ques_b)
    done = torch.zeros(N, dtype=torch.bool)
    for t in range(n):
        h = model.emb_layer(tokens) + pos[:, : t + 1]  # (N, t + 1, M)
        for layer in model.decoder.layers:
            h = layer.forward(h, memory, A.get_subsequent_mask(tokens))
        nxt, done = pick_next(model.proj_to_vocab.forward(h[:, -1]), done)
        tokens = torch.cat([tokens, nxt[:, None]], dim=1)
    return tokens


@torch.no_grad()
def prefix_through_fresh_caches(model, ques_b, n):
    """The prefix re-run each step through new caches (a prefill every step)."""
    N = ques_b.shape[0]
    tokens, pos, memory = torch.full((N, 1), BOS_ID), model.positions(1 + n), model.encode(ques_b)
    done = torch.zeros(N, dtype=torch.bool)
    for t in range(n):
        caches = [(A.KVCache(), A.KVCache(static=True)) for _ in model.decoder.layers]
        h = model.decoder(model.emb_layer(tokens) + pos[:, : t + 1], memory, A.get_subsequent_mask(tokens), caches=caches)
        nxt, done = pick_next(model.proj_to_vocab(h[:, -1]), done)
        tokens = torch.cat([tokens, nxt[:, None]], dim=1)
    return tokens


@torch.no_grad()
def encoder_twice_first_kept(model, ques_b, n):
    """Encodes twice up front and keeps the first memory: the second call is a wrong structure too."""
    memory = model.encode(ques_b)
    model.encode(ques_b)
    return _with_memory(model, ques_b, n, memory)


def _with_memory(model, ques_b, n, memory):
    N = ques_b.shape[0]
    tokens, pos = torch.full((N, 1), BOS_ID), model.positions(1 + n)
    caches = [(A.KVCache(), A.KVCache(static=True)) for _ in model.decoder.layers]
    done = torch.zeros(N, dtype=torch.bool)
    for t in range(n):
        h = model.decoder(model.emb_layer(tokens[:, -1:]) + pos[:, t : t + 1], memory, None, caches=caches)
        nxt, done = pick_next(model.proj_to_vocab(h[:, -1]), done)
        tokens = torch.cat([tokens, nxt[:, None]], dim=1)
    return tokens


HONEST = {"lesson": cached_decoder(), "per_question": per_question, "masked_single_step": masked_single_step}
# decoder -> the structure item it must lose, and the label it is named by
WRONG = {
    "encoder_every_step": (cached_decoder(encoder_every_step=True), "kv_cache.encoder_once", "encoder_every_step"),
    "encoder_twice_first_kept": (encoder_twice_first_kept, "kv_cache.encoder_once", None),
    "uncached": (uncached, "kv_cache.one_token_per_step", "no_cache"),
    "distinct_rows_only": (distinct_rows_only, "kv_cache.one_token_per_step", "no_cache"),
    "copied_then_uncached": (copied_then_uncached, "kv_cache.one_token_per_step", "no_cache"),
    "hooks_emptied_forward_called": (hooks_emptied_forward_called, "kv_cache.one_token_per_step", "no_cache"),
    "prefix_through_fresh_caches": (prefix_through_fresh_caches, "kv_cache.one_token_per_step", "no_cache"),
}


@pytest.mark.parametrize("name", HONEST)
@pytest.mark.parametrize("check_id", ["kv_cache.encoder_once", "kv_cache.one_token_per_step", "kv_cache.structure_hidden"])
def test_an_honest_decoding_passes_every_structure_item(name, check_id, workdir):
    for seed in seeds(check_id)[:4]:
        verdict, _ = graded(check_id, HONEST[name], workdir, seed=seed)
        assert verdict.ok, (name, seed, verdict.message)


@pytest.mark.parametrize("name", WRONG)
def test_each_wrong_structure_loses_its_item_for_every_student(name, workdir):
    decode, check_id, label = WRONG[name]
    for seed in seeds(check_id):
        verdict, _ = graded(check_id, decode, workdir, seed=seed)
        assert not verdict.ok, (name, seed)
        assert label is None or verdict.label == label, (name, seed, verdict.label)
    hidden, _ = graded("kv_cache.structure_hidden", decode, workdir, seed=seeds("kv_cache.structure_hidden")[0])
    # a named wrong structure misses its own part only; tokens no known structure gives miss both
    assert not hidden.ok and hidden.credit == (0.5 if label else 0.0), (name, hidden.parts)


def test_the_traits_hold_in_a_copy_and_leave_the_weights_unchanged():
    model = J.graded_inputs("kv_cache.structure_hidden", 3)["model"]
    probe = structure.with_traits(model, structure.TRAITS)
    assert set(probe.state_dict()) == set(model.state_dict())  # the traits add no weight the file would carry
    for copied in (copy.deepcopy(probe), type(probe)(probe.config)):
        assert type(copied.decoder.layers[0].attention_self) is structure.UnmaskedSelfAttention
        assert type(copied.encoder) is structure.ReencodingEncoder
    with pytest.raises(ValueError, match="unknown structure traits"):
        structure.model_class(["timing"])


def test_nothing_in_the_judge_reads_a_time():
    """No score depends on timing: the judge and the execution step read no clock."""
    import inspect

    from autograder.judge import decode_draws, kv_cache
    from autograder.preprocessors import graded_execute

    for module in (kv_cache, decode_draws, graded_execute):
        source = inspect.getsource(module)
        assert "process_time" not in source and "perf_counter" not in source and "cpu_time" not in source
