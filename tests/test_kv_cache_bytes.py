"""The KV cache's size in bytes (chapter 13): the formula against the tensors greedy_decode keeps."""

import torch

from encdec.config import ModelConfig
from encdec.data import EOS_ID
from encdec.generate import greedy_decode, kv_cache_bytes
from encdec.model import Transformer


def test_formula_matches_the_caches_greedy_decode_fills():
    torch.manual_seed(0)
    config = ModelConfig(
        emb_dim=24,
        num_heads=3,
        feedforward_dim=32,
        num_enc_layers=1,
        num_dec_layers=3,
        dropout=0.0,
        position_encoding="sinusoid",
    )
    model = Transformer(config).eval()
    with torch.no_grad():
        model.proj_to_vocab.bias[EOS_ID] = -50.0
    seen = []
    hook = model.decoder.register_forward_hook(lambda m, a, kw, out: seen.append(kw["caches"]), with_kwargs=True)
    N, Kq, new = 2, 9, 7
    greedy_decode(model, torch.randint(0, 14, (N, Kq)), new)
    hook.remove()
    caches = seen[-1]
    self_bytes = sum(c.k.nbytes + c.v.nbytes for c, _ in caches)
    cross_bytes = sum(c.k.nbytes + c.v.nbytes for _, c in caches)
    size = kv_cache_bytes(
        config.num_dec_layers, config.num_heads, config.emb_dim // config.num_heads, bytes_per_value=4, question_len=Kq
    )
    rows = len(caches[0][0])  # BOS and every fed token: the last token generated is never fed
    assert rows == new
    assert self_bytes == N * rows * size["self_per_token"]
    assert cross_bytes == N * size["cross_per_question"]


def test_a_7b_decoder_at_fp16_holds_half_a_mebibyte_per_token():
    size = kv_cache_bytes(num_layers=32, num_heads=32, head_dim=128, bytes_per_value=2)
    assert size["self_per_token"] == 2**19  # 0.5 MiB
    assert size["cross_per_question"] == 0
