"""Beam search against greedy decoding on the trained checkpoints (chapter 13, "Beam search"). Prints
each decoder's seconds over the book's sample of the question space (encdec/decoders.py) and its ratio
to greedy's, measured in the same run.

Beam search with k beams runs k rows per question at every step after the first: its cost over greedy's
should stay below k (the encoder and the first step run once per question).
"""

from __future__ import annotations

import argparse
import time

import torch

from encdec import decoders
from encdec.beam import beam_search
from encdec.data import problem_space
from encdec.generate import greedy_decode
from encdec.train import load_run


def seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stride", type=int, default=decoders.STRIDE, help="every n-th question")
    parser.add_argument("--preset", default="historical")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # as decoders.py measures
    model, _ = load_run(args.preset)
    ques = problem_space()[0][:: args.stride]  # (S, Kq)
    batches = [ques[s : s + decoders.BATCH] for s in range(0, len(ques), decoders.BATCH)]
    with torch.no_grad():
        floor = seconds(lambda: [greedy_decode(model, q, 4) for q in batches])
        out = {"questions": len(ques), "greedy_s": round(floor, 2)}
        print(f"{args.preset}, {len(ques)} questions: greedy {floor:.2f} s")
        for k in decoders.BEAMS:
            t = seconds(lambda k=k: [beam_search(model, q, k, 4) for q in batches])
            out[f"beam{k}_ratio"] = round(t / floor, 2)
            print(f"  beam, k = {k}: {t:.2f} s, {t / floor:.2f} x greedy")
    return out


if __name__ == "__main__":
    main()
