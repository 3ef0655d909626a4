"""How often a wrong cached decoding returns other tokens than the reference, on the decoding
checks' inputs of many students: the token items are decided by the tokens alone, so this rate is
what stands between a wrong decoder and the points.

    python bench/bench_decode_detection.py [students]     # 100 by default

Prints, per mistake, on how many of the hidden check's inputs (one draw per student) it was caught
(the tokens differ), with the known mistakes (``autograder/judge/variants.py``, caught on every
input by construction) beside mistakes no judge lists.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from grading_support import DropsOldestCache, ScalesValuesCache, cached_decoder

from autograder import judge as J
from autograder.judge import variants as Var
from encdec.generate import greedy_decode

UNLISTED = {
    "positions skip one from step 2": cached_decoder(position=lambda t: t if t < 2 else t + 1),
    "positions stop advancing at 3": cached_decoder(position=lambda t: min(t, 3)),
    "positions stop advancing at 6": cached_decoder(position=lambda t: min(t, 6)),
    "the oldest key dropped": DropsOldestCache,
    "values scaled by 1.05": ScalesValuesCache,
}


def main(students: int) -> dict:
    torch.set_num_threads(1)
    decoders = {k: (cached_decoder(cache=v) if isinstance(v, type) else v) for k, v in UNLISTED.items()}
    caught = dict.fromkeys(decoders, 0)
    listed: dict[str, int] = {}
    drawn, start = 0, time.perf_counter()
    for check_id in ("kv_cache.tokens_hidden",):  # the visible check is one draw, the same for all
        for i in range(students):
            inputs = J.graded_inputs(check_id, J.check_seed(b"bench secret", f"s{i}", "kv_cache", check_id))
            model, ques, n = inputs["model"], inputs["ques"], inputs["n"]
            ref = greedy_decode(model, ques, n, use_cache=False)
            drawn += 1
            for name, decode in decoders.items():
                caught[name] += not torch.equal(decode(model, ques, n), ref)
            for name, (tokens, _) in Var.decode_variants(model, ques, n).items():
                listed[name] = listed.get(name, 0) + (not torch.equal(tokens, ref))
    seconds = time.perf_counter() - start
    out = {
        "inputs": drawn,
        "seconds_per_input": round(seconds / drawn, 3),
        "listed_caught": listed,
        "unlisted_caught": caught,
        "unlisted_caught_ratio": {k: round(v / drawn, 4) for k, v in caught.items()},
    }
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
