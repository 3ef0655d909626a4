"""Random inputs and constructed weights that are the same bits on every machine.

A check's inputs are drawn from a seed, so a regrade, the instructor's server and Gradescope
must draw the same numbers. torch's own ``randn`` does not promise that: its vectorised normal
kernels (one per instruction set, picked at run time) round differently from its scalar one,
and a matrix product's sums follow the CPU's kernels and the thread count. So every draw here
is made of integers (torch's CPU generator and integer arithmetic are exact), turned into floats
by exact steps, and every weight the grader *constructs* from a model's outputs is computed in
float64 and then rounded to a coarse grid, far coarser than any two machines' float64 results
can differ (``tests/test_grading_references.py`` builds every check under several instruction
sets and thread counts and holds the bits equal).
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch import Tensor, nn

_UNIT = 1 << 20  # a uniform integer draw's range; its float is exact in float32 (see ``normal``)
_TERMS = 12  # Irwin-Hall: the sum of 12 uniforms on [0, 1) has mean 6 and variance 1


def gen(seed: int) -> torch.Generator:
    """The generator of one check's draws."""
    return torch.Generator().manual_seed(seed + 7919)


def normal(g: torch.Generator, *shape: int) -> Tensor:
    """Draws of mean 0 and variance 1 (float32, in [-6, 6]): the sum of 12 uniform integers, less
    its mean, times 2^-20 (Irwin-Hall). Every step is exact: integers up to 12 * 2^20 < 2^24 fit a
    float32 mantissa, and a power of two only moves the exponent."""
    u = torch.randint(0, _UNIT, (*shape, _TERMS), generator=g)  # (*shape, 12) int64
    return (u.sum(-1) - _TERMS * _UNIT // 2).to(torch.float32) * (1.0 / _UNIT)  # (*shape)


def below(g: torch.Generator, p: float, *shape: int) -> Tensor:
    """A boolean draw, True with probability ``p`` (compared in integers)."""
    return torch.randint(0, _UNIT, shape, generator=g) < round(p * _UNIT)


def coarse(x: Tensor, bits: int = 16) -> Tensor:
    """``x`` (computed in float64) rounded to ``bits`` significant bits, as float32: two machines'
    float64 results, some 1e-16 apart relatively, round to the same value unless one lies within
    that distance of a rounding midpoint (about one value in 2^36). numpy's frexp, round and
    ldexp are exact."""
    m, e = np.frexp(x.detach().to(torch.float64).numpy())
    return torch.from_numpy(np.asarray(np.ldexp(np.round(m * 2.0**bits) / 2.0**bits, e), dtype=np.float32))


def in_double(value):
    """A float64 copy of a check's inputs (tensors, modules, and the lists, tuples and dicts that
    hold them): the reference is computed on it, then rounded back to float32 (``in_single``), so
    it is the same on every machine where float32 sums are not."""
    if isinstance(value, Tensor):
        return value.double() if value.is_floating_point() else value
    if isinstance(value, nn.Module):
        return copy.deepcopy(value).double()
    if isinstance(value, dict):
        return {k: in_double(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(in_double(v) for v in value)
    return value


def in_single(outputs: dict) -> dict:
    """A reference's float64 arrays rounded to float32 (the dtype the kernel's outputs have)."""
    return {
        k: v.astype(np.float32) if isinstance(v, np.ndarray) and v.dtype == np.float64 else v
        for k, v in outputs.items()
    }
