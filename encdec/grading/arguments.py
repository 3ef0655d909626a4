"""The wire's arrays as a student's arguments, and a student's results as arrays: what every way the
kernel calls a student's code (``calls.py``, ``calls_beam.py``) shares."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from .wire import section


def tensor_of(a: np.ndarray) -> Tensor:
    return torch.from_numpy(np.array(a))


def as_array(x: Any, what: str) -> np.ndarray:
    """Student output -> numpy, with a clear message when it is not a tensor."""
    if isinstance(x, Tensor):
        return x.detach().cpu().numpy()
    if isinstance(x, (np.ndarray, float, int, bool)):
        return np.asarray(x)
    raise TypeError(f"{what} must be a torch.Tensor, got {type(x).__name__}")


def state_of(arrays: dict) -> dict[str, Tensor]:
    """A model's weights, from the ``state`` section of the wire's arrays."""
    return {k: tensor_of(v) for k, v in section(arrays, "state").items()}


def config_of(meta):
    """The model's configuration a check's meta names."""
    from ..config import ModelConfig

    return ModelConfig(**meta["config"])
