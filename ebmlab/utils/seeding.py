"""Explicit randomness: one torch.Generator per run, seeded from the config."""

from __future__ import annotations

import random

import numpy as np
import torch


def make_generator(seed: int, device: torch.device) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(int(seed))
    return g


def seed_everything(seed: int) -> None:
    """Seed global RNGs too, for library code that does not take a generator."""
    random.seed(seed)
    np.random.seed(seed % (2**32))  # noqa: NPY002 - global seeding is the point here
    torch.manual_seed(seed)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)
