"""Cached vs uncached greedy decoding at 64 new tokens (chapter 13). Prints the speed-up.

The model has longer answers than the arithmetic task: EOS is suppressed so every sequence
decodes all 64 tokens. Both loops must produce identical tokens; the ratio is measured in
the same run (target >= 3x).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from encdec.config import ModelConfig
from encdec.data import EOS_ID
from encdec.generate import greedy_decode
from encdec.model import Transformer


def timed(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    config = ModelConfig(
        emb_dim=256,
        num_heads=8,
        feedforward_dim=1024,
        num_enc_layers=2,
        num_dec_layers=4,
        dropout=0.0,
        position_encoding="sinusoid",
    )
    model = Transformer(config).eval()
    with torch.no_grad():
        model.proj_to_vocab.bias[EOS_ID] = -1e4  # never stop early: decode every token
    ques_b = torch.randint(0, 14, (args.batch, 9))
    cached = greedy_decode(model, ques_b, args.new_tokens, use_cache=True)
    uncached = greedy_decode(model, ques_b, args.new_tokens, use_cache=False)
    identical = torch.equal(cached, uncached)
    t_cached = timed(lambda: greedy_decode(model, ques_b, args.new_tokens, use_cache=True), args.repeats)
    t_uncached = timed(lambda: greedy_decode(model, ques_b, args.new_tokens, use_cache=False), args.repeats)
    result = {
        "new_tokens": args.new_tokens,
        "batch": args.batch,
        "cached_s": round(t_cached, 4),
        "uncached_s": round(t_uncached, 4),
        "cached_tokens_per_s": round(args.batch * args.new_tokens / t_cached, 1),
        "speedup_cached_over_uncached": round(t_uncached / t_cached, 2),
        "identical_tokens": identical,
    }
    print("generation:", result)
    if not identical:
        raise SystemExit("cached and uncached decoding disagree")
    return result


if __name__ == "__main__":
    main()
